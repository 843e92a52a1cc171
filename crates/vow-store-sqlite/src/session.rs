//! Console sessions and app-portal tokens ([`vow_store::Sessions`]), by the hash of their secret.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension};
use vow_store::rows::FromColumns;
use vow_store::session::{Session, Sessions};
use vow_store::StoreResult;

use crate::application;
use crate::convert::{micros, read, truncate};
use crate::SqliteStore;

const COLUMNS: &str = <Session as FromColumns>::COLUMNS;

#[async_trait]
impl Sessions for SqliteStore {
    async fn create_session(&self, session: Session) -> StoreResult<Session> {
        self.write(move |conn| {
            if let Some(app) = session.scope.app_id() {
                application::require(conn, &app)?;
            }
            conn.prepare_cached(&format!(
                "INSERT INTO sessions ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
            ))?
            .execute(params![
                session.id_hash,
                session.scope.kind(),
                session.scope.app_id().map(|a| a.to_string()),
                session.csrf,
                micros(session.created_at),
                micros(session.expires_at),
                session.read_only,
            ])?;
            Ok(Session {
                created_at: truncate(session.created_at),
                expires_at: truncate(session.expires_at),
                ..session
            })
        })
        .await
    }

    async fn session(&self, id_hash: &str, now: DateTime<Utc>) -> StoreResult<Option<Session>> {
        let id_hash = id_hash.to_owned();
        self.read(move |conn| {
            let sql =
                format!("SELECT {COLUMNS} FROM sessions WHERE id_hash = ?1 AND expires_at > ?2");
            Ok(conn
                .prepare_cached(&sql)?
                .query_row(params![id_hash, micros(now)], read)
                .optional()?)
        })
        .await
    }

    async fn end_session(&self, id_hash: &str) -> StoreResult<bool> {
        let id_hash = id_hash.to_owned();
        self.write(move |conn| {
            let n = conn
                .prepare_cached("DELETE FROM sessions WHERE id_hash = ?1")?
                .execute([id_hash])?;
            Ok(n > 0)
        })
        .await
    }

    async fn purge_sessions(&self, now: DateTime<Utc>, batch: usize) -> StoreResult<usize> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        self.write(move |conn| {
            Ok(conn
                .prepare_cached(
                    "DELETE FROM sessions WHERE id_hash IN
                     (SELECT id_hash FROM sessions WHERE expires_at <= ?1 LIMIT ?2)",
                )?
                .execute(params![micros(now), batch])?)
        })
        .await
    }
}
