//! Forward-only migrations, embedded in the binary and applied on every open.
//!
//! The files in `migrations/` are listed in [`MIGRATIONS`] in order. `PRAGMA user_version`
//! records how many are applied; [`migrate`] applies the rest, each in its own `BEGIN IMMEDIATE`
//! transaction that re-reads the version first, so two processes opening the same file at once
//! do not apply a migration twice. A database whose version is newer than this binary knows is
//! refused rather than used.

use rusqlite::Connection;

/// `(name, SQL)` of every migration, in the order they apply. Append only; never edit one
/// that shipped.
pub(crate) const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_initial",
        include_str!("../migrations/0001_initial.sql"),
    ),
    (
        "0002_delivery_queue",
        include_str!("../migrations/0002_delivery_queue.sql"),
    ),
    (
        "0003_claim_by_endpoint",
        include_str!("../migrations/0003_claim_by_endpoint.sql"),
    ),
    (
        "0004_idempotency",
        include_str!("../migrations/0004_idempotency.sql"),
    ),
    (
        "0005_idempotency_in_progress",
        include_str!("../migrations/0005_idempotency_in_progress.sql"),
    ),
    (
        "0006_inbound",
        include_str!("../migrations/0006_inbound.sql"),
    ),
    (
        "0007_inbound_processing",
        include_str!("../migrations/0007_inbound_processing.sql"),
    ),
    (
        "0008_idempotency_state_check",
        include_str!("../migrations/0008_idempotency_state_check.sql"),
    ),
    (
        "0010_inbound_replay_guard",
        include_str!("../migrations/0010_inbound_replay_guard.sql"),
    ),
];

/// A database written by a newer vow.
#[derive(Debug, thiserror::Error)]
#[error(
    "the database is at schema version {found}, newer than this build knows ({known}); upgrade vow"
)]
pub(crate) struct TooNew {
    found: i64,
    known: usize,
}

/// Applies the migrations `conn`'s database lacks. Idempotent.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), crate::error::Error> {
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let applied = usize::try_from(version).unwrap_or(usize::MAX);
        if applied > MIGRATIONS.len() {
            return Err(vow_store::StoreError::Backend(Box::new(TooNew {
                found: version,
                known: MIGRATIONS.len(),
            }))
            .into());
        }
        let Some((name, sql)) = MIGRATIONS.get(applied) else {
            return Ok(());
        };
        tracing::info!(migration = name, "applying SQLite migration");
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrating_twice_is_a_no_op() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, MIGRATIONS.len() as i64);
    }

    #[test]
    fn the_idempotency_migrations_hold_the_record_stores_schema() {
        // 0008 rebuilt the table (and its indexes) last: it holds the schema as it is now.
        let (name, sql) = MIGRATIONS[7];
        assert_eq!(name, "0008_idempotency_state_check");
        for statement in vow_idempotency::sqlite::SCHEMA.split(';').map(str::trim) {
            assert!(sql.contains(statement), "missing: {statement}");
        }
    }

    #[test]
    fn a_newer_database_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", 999).unwrap();
        let err = migrate(&mut conn).unwrap_err().into_store();
        assert!(err.to_string().contains("failed"), "{err}");
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(cause.contains("newer"), "{cause}");
    }
}
