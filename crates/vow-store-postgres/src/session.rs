//! Console sessions and app-portal tokens ([`vow_store::Sessions`]), by the hash of their secret.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_store::session::{Session, SessionScope, Sessions};
use vow_store::StoreResult;

use crate::convert;
use crate::error::{corrupt, db_error};
use crate::PgStore;

const COLUMNS: &str = "id_hash, kind, app_id, csrf, created_at, expires_at";

/// One `sessions` row.
#[derive(sqlx::FromRow)]
struct SessionRow {
    id_hash: String,
    kind: String,
    app_id: Option<String>,
    csrf: String,
    created_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
}

impl SessionRow {
    fn into_model(self) -> StoreResult<Session> {
        let app_id = self
            .app_id
            .map(|id| convert::id("sessions.app_id", &id))
            .transpose()?;
        let scope = SessionScope::from_columns(&self.kind, app_id).ok_or_else(|| {
            corrupt(format!(
                "session kind {:?} does not match its app_id",
                self.kind
            ))
        })?;
        Ok(Session {
            id_hash: self.id_hash,
            scope,
            csrf: self.csrf,
            created_at: self.created_at,
            expires_at: self.expires_at,
        })
    }
}

#[async_trait]
impl Sessions for PgStore {
    async fn create_session(&self, session: Session) -> StoreResult<Session> {
        sqlx::query_as::<_, SessionRow>(&format!(
            "INSERT INTO sessions ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
        ))
        .bind(&session.id_hash)
        .bind(session.scope.kind())
        .bind(session.scope.app_id().map(|a| a.to_string()))
        .bind(&session.csrf)
        .bind(session.created_at)
        .bind(session.expires_at)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error)?
        .into_model()
    }

    async fn session(&self, id_hash: &str, now: DateTime<Utc>) -> StoreResult<Option<Session>> {
        sqlx::query_as::<_, SessionRow>(&format!(
            "SELECT {COLUMNS} FROM sessions WHERE id_hash = $1 AND expires_at > $2"
        ))
        .bind(id_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .map(SessionRow::into_model)
        .transpose()
    }

    async fn end_session(&self, id_hash: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM sessions WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() > 0)
    }

    async fn purge_sessions(&self, now: DateTime<Utc>, batch: usize) -> StoreResult<usize> {
        let done = sqlx::query(
            "DELETE FROM sessions WHERE id_hash IN
             (SELECT id_hash FROM sessions WHERE expires_at <= $1 LIMIT $2)",
        )
        .bind(now)
        .bind(convert::bigint_param(batch))
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(usize::try_from(done.rows_affected()).unwrap_or(usize::MAX))
    }
}
