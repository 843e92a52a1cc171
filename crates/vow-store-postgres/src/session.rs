//! Console sessions and app-portal tokens ([`vow_store::Sessions`]), by the hash of their secret.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_store::rows::FromColumns;
use vow_store::session::{Session, Sessions};
use vow_store::StoreResult;

use crate::convert::{self, read};
use crate::error::db_error;
use crate::PgStore;

const COLUMNS: &str = <Session as FromColumns>::COLUMNS;

#[async_trait]
impl Sessions for PgStore {
    async fn create_session(&self, session: Session) -> StoreResult<Session> {
        sqlx::query(&format!(
            "INSERT INTO sessions ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
        ))
        .bind(&session.id_hash)
        .bind(session.scope.kind())
        .bind(session.scope.app_id().map(|a| a.to_string()))
        .bind(&session.csrf)
        .bind(session.created_at)
        .bind(session.expires_at)
        .bind(session.read_only)
        .try_map(read::<Session>)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error)
    }

    async fn session(&self, id_hash: &str, now: DateTime<Utc>) -> StoreResult<Option<Session>> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM sessions WHERE id_hash = $1 AND expires_at > $2"
        ))
        .bind(id_hash)
        .bind(now)
        .try_map(read::<Session>)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)
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
