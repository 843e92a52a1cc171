//! Process-wide settings in the `settings` key/value table: for now the admin token's hash.
//!
//! Two processes starting at once must agree on one hash, so the first write wins with
//! `INSERT … ON CONFLICT DO NOTHING` and everybody then reads what is stored. The read is a
//! separate statement: under READ COMMITTED it takes a new snapshot, which sees the winner's row
//! even when that row was committed while our insert waited on it (a single statement with a CTE
//! would not).

use async_trait::async_trait;
use sqlx::PgPool;
use vow_store::Admin;
use vow_store::StoreResult;

use crate::error::{corrupt, db_error};
use crate::PgStore;

/// The key of the admin token hash.
const ADMIN_TOKEN_HASH: &str = "admin_token_hash";

/// The stored admin token hash.
pub(crate) async fn admin_token_hash(pool: &PgPool) -> StoreResult<Option<String>> {
    sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
        .bind(ADMIN_TOKEN_HASH)
        .fetch_optional(pool)
        .await
        .map_err(db_error)
}

#[async_trait]
impl Admin for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(db_error)
    }

    async fn schema_current(&self) -> StoreResult<bool> {
        Ok(!self.pending_migrations().await?)
    }

    async fn init_admin_token_hash(&self, hash: &str) -> StoreResult<String> {
        sqlx::query(
            "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
        )
        .bind(ADMIN_TOKEN_HASH)
        .bind(hash)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        admin_token_hash(&self.pool)
            .await?
            .ok_or_else(|| corrupt("the admin token hash vanished right after it was stored"))
    }

    async fn admin_token_hash(&self) -> StoreResult<Option<String>> {
        admin_token_hash(&self.pool).await
    }
}
