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
        "0009_inbound_rejection_log",
        include_str!("../migrations/0009_inbound_rejection_log.sql"),
    ),
    (
        "0010_inbound_replay_guard",
        include_str!("../migrations/0010_inbound_replay_guard.sql"),
    ),
    (
        "0011_sessions",
        include_str!("../migrations/0011_sessions.sql"),
    ),
    (
        "0012_session_read_only",
        include_str!("../migrations/0012_session_read_only.sql"),
    ),
    (
        "0013_endpoint_disabled_reason",
        include_str!("../migrations/0013_endpoint_disabled_reason.sql"),
    ),
    (
        "0014_overview",
        include_str!("../migrations/0014_overview.sql"),
    ),
    (
        "0015_message_search",
        include_str!("../migrations/0015_message_search.sql"),
    ),
    (
        "0016_replay_id",
        include_str!("../migrations/0016_replay_id.sql"),
    ),
    (
        "0017_inbound_activity",
        include_str!("../migrations/0017_inbound_activity.sql"),
    ),
    (
        "0018_inbound_replay_id",
        include_str!("../migrations/0018_inbound_replay_id.sql"),
    ),
    (
        "0019_relay_listeners",
        include_str!("../migrations/0019_relay_listeners.sql"),
    ),
    (
        "0020_dead_letter_alerts",
        include_str!("../migrations/0020_dead_letter_alerts.sql"),
    ),
    (
        "0021_message_traceparent",
        include_str!("../migrations/0021_message_traceparent.sql"),
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
    fn the_rejection_log_migration_keeps_the_newest_thousand_in_ring_order_and_counts_all() {
        let conn = Connection::open_in_memory().unwrap();
        let (name, sql) = MIGRATIONS[8];
        assert_eq!(name, "0009_inbound_rejection_log");
        for (_, earlier) in &MIGRATIONS[..8] {
            conn.execute_batch(earlier).unwrap();
        }
        for source in ["src_a", "src_b"] {
            conn.execute(
                "INSERT INTO sources (id, token, description, scheme, secrets, tolerance_secs,
                     destinations, created_at, updated_at)
                 VALUES (?1, ?1, '', 'github', '[]', 300, '[]', 0, 0)",
                [source],
            )
            .unwrap();
        }
        let rows = (0..1002)
            .map(|i| ("src_a", i))
            .chain((0..2).map(|i| ("src_b", i)));
        for (source, i) in rows {
            conn.execute(
                "INSERT INTO inbound_rejections (id, source_id, reason, status, body_size, received_at)
                 VALUES (?1 || printf('%04d', ?2), ?1, 'signature_mismatch', 401, 0, ?2)",
                rusqlite::params![source, i],
            )
            .unwrap();
        }
        conn.execute_batch(sql).unwrap();
        let slots = |source: &str| -> (i64, i64, i64, String, String) {
            conn.query_row(
                "SELECT count(*), min(slot), max(slot),
                        (SELECT id FROM inbound_rejections WHERE source_id = ?1 AND slot = 0),
                        max(id)
                 FROM inbound_rejections WHERE source_id = ?1",
                [source],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap()
        };
        let oldest_kept = ("src_a0002".to_owned(), "src_a1001".to_owned());
        assert_eq!(slots("src_a"), (1000, 0, 999, oldest_kept.0, oldest_kept.1));
        assert_eq!(slots("src_b").0, 2);
        let tallies = |source: &str| -> (i64, i64) {
            conn.query_row(
                "SELECT (SELECT recorded FROM inbound_rejection_ring WHERE source_id = ?1),
                        (SELECT count FROM inbound_rejection_counts WHERE source_id = ?1)",
                [source],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
        };
        assert_eq!(
            tallies("src_a"),
            (1000, 1002),
            "the ring is full; the count is exact"
        );
        assert_eq!(tallies("src_b"), (2, 2));
    }

    #[test]
    fn the_message_search_migration_indexes_the_channels_of_the_messages_already_stored() {
        let conn = Connection::open_in_memory().unwrap();
        let (name, sql) = MIGRATIONS[14];
        assert_eq!(name, "0015_message_search");
        for (_, earlier) in &MIGRATIONS[..14] {
            conn.execute_batch(earlier).unwrap();
        }
        conn.execute_batch(
            "INSERT INTO applications (id, name, metadata, created_at, updated_at)
                 VALUES ('app_a', 'a', '{}', 0, 0), ('app_b', 'b', '{}', 0, 0);
             INSERT INTO messages (id, app_id, event_type, channels, payload, payload_expires_at,
                                   created_at)
             VALUES ('msg_1', 'app_a', 't', '[\"eu\",\"us\",\"eu\"]', '{}', 0, 0),
                    ('msg_2', 'app_a', 't', NULL, '{}', 0, 0),
                    ('msg_3', 'app_b', 't', '[\"eu\"]', '{}', 0, 0);",
        )
        .unwrap();
        conn.execute_batch(sql).unwrap();
        let mut rows = conn
            .prepare("SELECT app_id, channel, msg_id FROM message_channels ORDER BY 1, 2, 3")
            .unwrap();
        let rows: Vec<(String, String, String)> = rows
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let row = |a: &str, c: &str, m: &str| (a.to_owned(), c.to_owned(), m.to_owned());
        assert_eq!(
            rows,
            [
                row("app_a", "eu", "msg_1"),
                row("app_a", "us", "msg_1"),
                row("app_b", "eu", "msg_3"),
            ]
        );
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
