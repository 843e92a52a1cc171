//! Whether PostgreSQL will vacuum the delivery queue: without autovacuum its dead rows are
//! never cleaned, and claims slow down the longer vow runs (see migration 0022), so `vow
//! serve` warns at start when this finds it off.

use crate::error::db_error;
use crate::PgStore;
use vow_store::StoreResult;

/// Why the delivery queue will not be vacuumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VacuumOff {
    /// The server's `autovacuum` setting is off.
    Server,
    /// The server's `track_counts` is off, without which autovacuum has nothing to go by.
    TrackCounts,
    /// `autovacuum_enabled = false` is set on this table.
    Table(String),
}

impl std::fmt::Display for VacuumOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Server => f.write_str("the server's autovacuum setting is off"),
            Self::TrackCounts => f.write_str("the server's track_counts setting is off"),
            Self::Table(t) => write!(f, "autovacuum_enabled = false is set on table {t}"),
        }
    }
}

/// The work queues: each delivery and each inbound event is updated at least twice (claimed,
/// then recorded).
const QUEUE_TABLES: [&str; 2] = ["deliveries", "inbound_events"];

impl PgStore {
    /// Every reason autovacuum will not clean the work queues; empty when it will.
    pub async fn vacuum_off(&self) -> StoreResult<Vec<VacuumOff>> {
        let (server, counts): (bool, bool) = sqlx::query_as(
            "SELECT current_setting('autovacuum')::bool, current_setting('track_counts')::bool",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(db_error)?;
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT c.relname::text FROM pg_class c
             WHERE c.oid = ANY(SELECT to_regclass(t) FROM unnest($1::text[]) AS t)
               AND 'autovacuum_enabled=false' = ANY(coalesce(c.reloptions, '{}'))
             ORDER BY c.relname",
        )
        .bind(QUEUE_TABLES)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let mut off = Vec::new();
        if !server {
            off.push(VacuumOff::Server);
        }
        if !counts {
            off.push(VacuumOff::TrackCounts);
        }
        off.extend(tables.into_iter().map(VacuumOff::Table));
        Ok(off)
    }
}
