//! Translation of SQLite's errors into [`StoreError`], in one place.
//!
//! Database work inside the crate returns [`Error`], so `?` works on both `rusqlite` calls and
//! the crate's own `NotFound`/`Conflict` decisions; [`Error::into_store`] turns it into the
//! contract's [`StoreError`] at the boundary:
//! - unique violations become [`StoreError::Conflict`] with a sentence naming what clashed,
//!   chosen from the columns SQLite reports ([`conflict_sentence`]);
//! - `SQLITE_BUSY`/`LOCKED`, IO errors, a full disk, a file that cannot be opened and a writer
//!   thread that is gone become [`StoreError::Unavailable`];
//! - anything else becomes [`StoreError::Backend`].
//!
//! The original error is kept as the `source` so logs print the whole chain.

use std::sync::Arc;

use rusqlite::ErrorCode;
use vow_store::StoreError;

/// What database work inside the crate fails with.
#[derive(Debug)]
pub(crate) enum Error {
    /// SQLite (or decoding a row) failed.
    Sqlite(rusqlite::Error),
    /// The crate decided the outcome itself (e.g. `NotFound("application")`).
    Store(StoreError),
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Sqlite(e)
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

impl Error {
    /// The contract's error for this one.
    pub(crate) fn into_store(self) -> StoreError {
        match self {
            Error::Store(e) => e,
            Error::Sqlite(e) => from_sqlite(e),
        }
    }
}

/// Shorthand for the crate's internal results.
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// Classifies a SQLite error.
pub(crate) fn from_sqlite(e: rusqlite::Error) -> StoreError {
    if let Some(constraint) = unique_violation(&e) {
        return StoreError::Conflict(conflict_sentence(constraint));
    }
    if is_unavailable(&e) {
        StoreError::Unavailable(Box::new(e))
    } else {
        StoreError::Backend(Box::new(e))
    }
}

/// The error a whole batch reports when its transaction could not begin or commit: every job
/// in the batch gets one, sharing the cause.
pub(crate) fn batch_failed(cause: &Arc<rusqlite::Error>) -> StoreError {
    let err = BatchFailed(Arc::clone(cause));
    if is_unavailable(cause) {
        StoreError::Unavailable(Box::new(err))
    } else {
        StoreError::Backend(Box::new(err))
    }
}

/// A write batch's transaction failed; the cause is shared by every job in the batch.
#[derive(Debug, thiserror::Error)]
#[error("the write transaction failed, so this write was not committed")]
pub(crate) struct BatchFailed(#[source] Arc<rusqlite::Error>);

/// The writer thread is gone (it could not start, or it stopped).
#[derive(Debug, thiserror::Error)]
#[error("the SQLite writer thread is not running")]
pub(crate) struct WriterGone;

/// The writer dropped a job without answering (the job panicked).
#[derive(Debug, thiserror::Error)]
#[error("the SQLite writer abandoned this write without an answer (the operation panicked)")]
pub(crate) struct Abandoned;

/// A read task could not complete (it panicked, or the runtime is shutting down).
#[derive(Debug, thiserror::Error)]
#[error("the SQLite read task did not complete")]
pub(crate) struct ReadTaskFailed(#[source] pub(crate) tokio::task::JoinError);

/// The text SQLite gave for a unique or primary-key violation, e.g.
/// `UNIQUE constraint failed: applications.uid`.
fn unique_violation(e: &rusqlite::Error) -> Option<&str> {
    match e {
        rusqlite::Error::SqliteFailure(f, msg)
            if f.code == ErrorCode::ConstraintViolation
                && matches!(
                    f.extended_code,
                    rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                        | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                ) =>
        {
            Some(msg.as_deref().unwrap_or(""))
        }
        _ => None,
    }
}

/// Whether retrying later may succeed: contention, IO, a full disk, an unopenable file.
fn is_unavailable(e: &rusqlite::Error) -> bool {
    if let rusqlite::Error::SqliteFailure(f, _) = e {
        // A transaction SQLite rolled back after one of the codes below (the writer's
        // `transaction_lost`).
        if f.extended_code == rusqlite::ffi::SQLITE_ABORT_ROLLBACK {
            return true;
        }
    }
    match e.sqlite_error_code() {
        Some(code) => matches!(
            code,
            ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::SystemIoFailure
                | ErrorCode::DiskFull
                | ErrorCode::CannotOpen
                | ErrorCode::ReadOnly
                | ErrorCode::OutOfMemory
        ),
        None => false,
    }
}

/// The sentence a client reads for a unique violation, from the columns SQLite names.
pub(crate) fn conflict_sentence(constraint: &str) -> String {
    let columns = constraint
        .strip_prefix("UNIQUE constraint failed: ")
        .unwrap_or(constraint);
    let sentence = match columns {
        "applications.uid" => "an application with this uid already exists",
        "applications.id" => "an application with this id already exists",
        "endpoints.app_id, endpoints.uid" => {
            "an endpoint with this uid already exists in this application"
        }
        "endpoints.id" | "endpoints.app_id, endpoints.id" => {
            "an endpoint with this id already exists"
        }
        "event_types.name" => "an event type with this name already exists",
        "messages.app_id, messages.event_id" => "a message with this eventId already exists",
        "messages.app_id, messages.id" => "a message with this id already exists",
        "attempts.id" => "an attempt with this id already exists",
        "sources.id" => "a source with this id already exists",
        "sources.token" => "a source with this token already exists",
        other => return format!("a row with these values already exists ({other})"),
    };
    sentence.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: std::ffi::c_int, msg: &str) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some(msg.to_string()))
    }

    #[test]
    fn a_unique_violation_names_what_clashed() {
        let e = failure(
            rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE,
            "UNIQUE constraint failed: endpoints.app_id, endpoints.uid",
        );
        match from_sqlite(e) {
            StoreError::Conflict(s) => {
                assert_eq!(
                    s,
                    "an endpoint with this uid already exists in this application"
                )
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
    }

    #[test]
    fn busy_and_full_are_unavailable_and_keep_their_cause() {
        for code in [rusqlite::ffi::SQLITE_BUSY, rusqlite::ffi::SQLITE_FULL] {
            let e = from_sqlite(failure(code, "x"));
            assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
            assert!(std::error::Error::source(&e).is_some());
        }
    }

    #[test]
    fn other_failures_are_backend_errors() {
        let e = from_sqlite(failure(rusqlite::ffi::SQLITE_CORRUPT, "x"));
        assert!(matches!(e, StoreError::Backend(_)), "{e:?}");
        let e = from_sqlite(failure(
            rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY,
            "FOREIGN KEY constraint failed",
        ));
        assert!(matches!(e, StoreError::Backend(_)), "{e:?}");
    }
}
