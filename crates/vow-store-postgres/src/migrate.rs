//! The schema: migrations embedded from `migrations/*.sql`, applied forward-only.
//!
//! [`PgStore::migrate`] runs sqlx's migrator, which holds a PostgreSQL advisory lock while it
//! works, so two processes migrating at once take turns and the second finds nothing to do. It
//! runs on a connection taken out of the pool and closed afterwards, so a migration that fails
//! half-way can never leave that session lock behind on a pooled connection.
//! [`PgStore::pending_migrations`] only reads: it never creates the bookkeeping table.

use sqlx::migrate::Migrator;
use sqlx::Connection;
use vow_store::StoreError;

use crate::error::{db_error, migrate_error};
use crate::PgStore;

/// Every migration of this crate, embedded at build time.
static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Where sqlx records applied migrations.
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

impl PgStore {
    /// Applies the migrations this binary knows and the database lacks. Safe to run from several
    /// processes at once. Fails with [`StoreError::Backend`] when an applied migration differs
    /// from this binary's copy or the database has one this binary does not know.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?.detach();
        let result = MIGRATOR.run_direct(&mut conn).await.map_err(migrate_error);
        // Ends the session, and with it any advisory lock a failure left held.
        let _ = conn.close().await;
        result
    }

    /// Whether the schema is missing or behind this binary: some embedded migration has not
    /// been applied successfully (with the same checksum). `vow serve` refuses to start on
    /// `true` unless asked to migrate. A database ahead of this binary is not pending.
    pub async fn pending_migrations(&self) -> Result<bool, StoreError> {
        let table: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
            .bind(MIGRATIONS_TABLE)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error)?;
        let applied: Vec<(i64, Vec<u8>)> = match table {
            None => Vec::new(),
            Some(_) => {
                sqlx::query_as("SELECT version, checksum FROM _sqlx_migrations WHERE success")
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?
            }
        };
        Ok(MIGRATOR
            .iter()
            .filter(|m| !m.migration_type.is_down_migration())
            .any(|m| {
                !applied
                    .iter()
                    .any(|(version, checksum)| *version == m.version && **checksum == *m.checksum)
            }))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_idempotency_migrations_hold_the_record_stores_schema() {
        let sql = concat!(
            include_str!("../migrations/0004_idempotency.sql"),
            include_str!("../migrations/0005_idempotency_in_progress.sql"),
            include_str!("../migrations/0024_idempotency_one_deadline_entry.sql"),
            include_str!("../migrations/0026_wide_values_compress_with_lz4.sql")
        );
        for statement in vow_idempotency::postgres::SCHEMA.split(';').map(str::trim) {
            assert!(sql.contains(statement), "missing: {statement}");
        }
    }
}
