//! Translation of PostgreSQL and sqlx errors into [`StoreError`], the only error callers see.
//!
//! Unique violations (SQLSTATE `23505`) become [`StoreError::Conflict`] with a sentence chosen by
//! the constraint's name (the names are spelled out in `migrations/*.sql`); a foreign key
//! pointing at a missing parent becomes [`StoreError::NotFound`]; anything that says "the database
//! is not there or refused service right now" (IO errors, pool timeouts, SQLSTATE classes `08`
//! connection exception, `53` insufficient resources, `57` operator intervention such as
//! `admin_shutdown`, plus serialization failures and deadlocks) becomes
//! [`StoreError::Unavailable`]; the rest is [`StoreError::Backend`]. The sqlx error is kept as the
//! source so logs show the whole chain.

use sqlx::migrate::MigrateError;
use vow_store::StoreError;

/// What a database error means to a caller, before the cause is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meaning {
    /// A uniqueness rule refused the write; the text names it.
    Conflict(&'static str),
    /// A foreign key's parent is missing; the text names what.
    NotFound(&'static str),
    /// Retrying later may succeed.
    Unavailable,
    /// A bug or corrupt data.
    Backend,
}

/// The sentence for a unique violation of `constraint`.
fn conflict_message(constraint: Option<&str>) -> &'static str {
    match constraint {
        Some("applications_uid_key") => "an application with this uid already exists",
        Some("applications_pkey") => "an application with this id already exists",
        Some("endpoints_app_id_uid_key") => {
            "an endpoint with this uid already exists in this application"
        }
        Some("endpoints_pkey" | "endpoints_app_id_id_key") => {
            "an endpoint with this id already exists"
        }
        Some("event_types_pkey") => "an event type with this name already exists",
        Some("messages_app_id_event_id_key") => "a message with this eventId already exists",
        Some("messages_pkey" | "messages_app_id_id_key") => "a message with this id already exists",
        Some("deliveries_pkey" | "deliveries_msg_id_endpoint_id_key") => {
            "a delivery of this message to this endpoint already exists"
        }
        Some("attempts_pkey") => "an attempt with this id already exists",
        Some("endpoint_secrets_current_key") => "this endpoint already has a current secret",
        Some("settings_pkey") => "this setting already exists",
        Some("sources_pkey") => "a source with this id already exists",
        Some("sources_token_key") => "a source with this token already exists",
        _ => "a row with these values already exists",
    }
}

/// What is missing when `constraint`, a foreign key, refused a write.
fn missing_parent(constraint: Option<&str>) -> Option<&'static str> {
    match constraint {
        Some("endpoints_app_id_fkey" | "messages_app_id_fkey" | "sessions_app_id_fkey") => {
            Some("application")
        }
        Some("endpoint_secrets_endpoint_fkey" | "deliveries_endpoint_fkey") => Some("endpoint"),
        Some("deliveries_message_fkey") => Some("message"),
        Some("attempts_delivery_fkey") => Some("delivery"),
        Some(
            "inbound_events_source_fkey"
            | "inbound_rejections_source_fkey"
            | "inbound_rejection_counts_source_fkey"
            | "inbound_rejection_ring_source_fkey"
            | "inbound_entities_source_fkey",
        ) => Some("source"),
        Some("inbound_forwards_event_fkey") => Some("inbound event"),
        _ => None,
    }
}

/// Classifies a database error by SQLSTATE `code` and the `constraint` it names.
fn classify_database(code: &str, constraint: Option<&str>) -> Meaning {
    match code {
        // unique_violation
        "23505" => Meaning::Conflict(conflict_message(constraint)),
        // foreign_key_violation: a parent we point at is gone. (A violation on delete cannot
        // happen: every foreign key cascades.)
        "23503" => missing_parent(constraint).map_or(Meaning::Backend, Meaning::NotFound),
        // Lost to another transaction: busy, retry later.
        _ if is_contention_code(code) => Meaning::Unavailable,
        // 08: connection exception; 53: insufficient resources (disk full, too many
        // connections); 57: operator intervention (admin_shutdown, crash_shutdown,
        // cannot_connect_now, query_canceled by a statement timeout).
        _ if code.starts_with("08") || code.starts_with("53") || code.starts_with("57") => {
            Meaning::Unavailable
        }
        _ => Meaning::Backend,
    }
}

/// Whether `err` is a transaction that lost to another one (serialization failure, deadlock,
/// lock not available): the same writes may well succeed alone or later.
pub(crate) fn is_contention(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => db.code().is_some_and(|code| is_contention_code(&code)),
        _ => false,
    }
}

/// Whether `err` is a unique violation (SQLSTATE `23505`).
pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .is_some_and(|db| db.is_unique_violation())
}

/// Whether `err` is a lock wait cut short (SQLSTATE `55P03`, lock_not_available: past
/// `lock_timeout`).
pub(crate) fn is_lock_timeout(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .is_some_and(|db| db.code().as_deref() == Some(LOCK_NOT_AVAILABLE))
}

/// SQLSTATE lock_not_available: a lock wait past `lock_timeout`, or a `NOWAIT` lock refused.
const LOCK_NOT_AVAILABLE: &str = "55P03";

/// serialization_failure, deadlock_detected, lock_not_available.
fn is_contention_code(code: &str) -> bool {
    matches!(code, "40001" | "40P01" | LOCK_NOT_AVAILABLE)
}

/// Classifies any sqlx error.
fn classify(err: &sqlx::Error) -> Meaning {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => Meaning::Unavailable,
        sqlx::Error::Database(db) => match db.code() {
            Some(code) => classify_database(&code, db.constraint()),
            None => Meaning::Backend,
        },
        _ => Meaning::Backend,
    }
}

/// Translates a sqlx error, keeping it as the cause.
pub(crate) fn db_error(err: sqlx::Error) -> StoreError {
    match classify(&err) {
        Meaning::Conflict(what) => StoreError::Conflict(what.to_string()),
        Meaning::NotFound(what) => StoreError::NotFound(what),
        Meaning::Unavailable => StoreError::Unavailable(Box::new(err)),
        Meaning::Backend => StoreError::Backend(Box::new(err)),
    }
}

/// Translates a migration error: a lost connection is `Unavailable`, the rest (a failed or
/// edited migration, a database ahead of this binary) is `Backend`.
pub(crate) fn migrate_error(err: MigrateError) -> StoreError {
    match err {
        MigrateError::Execute(e) => db_error(e),
        other => StoreError::Backend(Box::new(other)),
    }
}

/// Stored data this crate cannot read back (an id without its prefix, a negative counter):
/// corrupt data or a schema this binary does not know.
pub(crate) fn corrupt(what: impl Into<String>) -> StoreError {
    StoreError::Backend(Box::new(CorruptRow(what.into())))
}

/// A stored value this crate could not decode.
#[derive(Debug, thiserror::Error)]
#[error("corrupt row: {0}")]
pub(crate) struct CorruptRow(String);

/// The record store's error as the contract's.
pub(crate) fn record_error(e: vow_idempotency::Error) -> StoreError {
    match e {
        vow_idempotency::Error::Fenced => StoreError::Fenced,
        vow_idempotency::Error::Postgres(e) => db_error(e),
        other => StoreError::Backend(Box::new(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_violations_name_the_rule_that_clashed() {
        assert_eq!(
            classify_database("23505", Some("applications_uid_key")),
            Meaning::Conflict("an application with this uid already exists")
        );
        assert_eq!(
            classify_database("23505", Some("endpoints_app_id_uid_key")),
            Meaning::Conflict("an endpoint with this uid already exists in this application")
        );
        assert_eq!(
            classify_database("23505", Some("event_types_pkey")),
            Meaning::Conflict("an event type with this name already exists")
        );
        assert_eq!(
            classify_database("23505", Some("messages_app_id_event_id_key")),
            Meaning::Conflict("a message with this eventId already exists")
        );
        assert!(matches!(
            classify_database("23505", Some("something_new")),
            Meaning::Conflict(_)
        ));
    }

    #[test]
    fn a_foreign_key_to_a_missing_application_is_not_found() {
        assert_eq!(
            classify_database("23503", Some("endpoints_app_id_fkey")),
            Meaning::NotFound("application")
        );
        assert_eq!(
            classify_database("23503", Some("messages_app_id_fkey")),
            Meaning::NotFound("application")
        );
        assert_eq!(classify_database("23503", None), Meaning::Backend);
    }

    #[test]
    fn shutdowns_and_lost_connections_are_unavailable() {
        for code in [
            "57P01", "57P02", "57P03", "08006", "08001", "53100", "53300", "40001",
        ] {
            assert_eq!(
                classify_database(code, None),
                Meaning::Unavailable,
                "{code}"
            );
        }
        for code in ["42P01", "22021", "23502", "XX000"] {
            assert_eq!(classify_database(code, None), Meaning::Backend, "{code}");
        }
    }

    #[test]
    fn io_and_pool_errors_are_unavailable_and_keep_their_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = db_error(sqlx::Error::Io(io));
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        let source = std::error::Error::source(&err).expect("a cause");
        assert!(source.to_string().contains("refused"), "{source}");
        assert!(matches!(
            db_error(sqlx::Error::PoolTimedOut),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(
            db_error(sqlx::Error::PoolClosed),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(
            db_error(sqlx::Error::RowNotFound),
            StoreError::Backend(_)
        ));
    }
}
