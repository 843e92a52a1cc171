//! Process-wide settings: a key/value table (today only the admin token's hash).

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension};
use vow_store::Admin;
use vow_store::StoreError;
use vow_store::StoreResult;

use crate::error::Result;
use crate::SqliteStore;

const ADMIN_TOKEN_HASH: &str = "admin_token_hash";

pub(crate) fn admin_token_hash(conn: &Connection) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT value FROM settings WHERE key = ?1")?
        .query_row([ADMIN_TOKEN_HASH], |r| r.get(0))
        .optional()?)
}

#[async_trait]
impl Admin for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> StoreResult<()> {
        if !self.writer.is_running() {
            return Err(StoreError::Unavailable(Box::new(crate::error::WriterGone)));
        }
        self.read(|c| Ok(c.query_row("SELECT 1", [], |_| Ok(()))?))
            .await
    }

    async fn schema_current(&self) -> StoreResult<bool> {
        let version: i64 = self
            .read(|c| Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?))
            .await?;
        Ok(version >= crate::migrate::MIGRATIONS.len() as i64)
    }

    async fn init_admin_token_hash(&self, hash: &str) -> StoreResult<String> {
        let hash = hash.to_owned();
        self.write(move |conn| {
            let hash: &str = &hash;
            conn.prepare_cached(
                "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
            )?
            .execute([ADMIN_TOKEN_HASH, hash])?;
            Ok(conn
                .prepare_cached("SELECT value FROM settings WHERE key = ?1")?
                .query_row([ADMIN_TOKEN_HASH], |r| r.get(0))?)
        })
        .await
    }

    async fn admin_token_hash(&self) -> StoreResult<Option<String>> {
        self.read(admin_token_hash).await
    }
}
