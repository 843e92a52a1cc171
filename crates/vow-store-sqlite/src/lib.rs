//! vow's embedded default store: [`vow_store::Store`] on SQLite, built for durable throughput.
//!
//! Every write goes to ONE writer thread that owns the only write connection. It runs whatever
//! writes are queued together in one transaction (a savepoint each, so one failing write does
//! not take the others down), commits once, and only then answers the callers: an acknowledged
//! write is on disk (`synchronous=FULL`), and one fsync covers a whole batch (group commit).
//! Reads run concurrently on a few read connections (WAL) from tokio's blocking pool.
//!
//! ```no_run
//! # fn main() -> Result<(), vow_store::StoreError> {
//! let store = vow_store_sqlite::SqliteStore::open(std::path::Path::new("vow-data/vow.db"))?;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`SqliteStore`] (this file): opening (pragmas, migrations), and `read`/`write`, which run a
//!   closure on a read connection or in the writer; every entity module implements its
//!   `vow_store` trait with them.
//! - `queue`: the [`vow_store::DeliveryQueue`] traits (claims with leases, outcomes, attempts,
//!   resend/replay, retention).
//! - `inbound`: the [`vow_store::InboundStore`] traits (sources, the atomic claim of inbound
//!   events, quarantine, rejections, retention).
//! - `overview`: the console's Overview ([`vow_store::Overviews`]), indexed reads only.
//! - `writer`: the writer thread, batching and group commit.
//! - `readers`: the read connection pool.
//! - `checkpointer`: WAL checkpoints on their own thread, off the writer's path.
//! - `migrate`: the embedded, forward-only migrations in `migrations/`.
//! - `error`: SQLite errors → [`vow_store::StoreError`] (unique violations → `Conflict`, ...).
//! - `convert`: column encodings shared by the entity modules (times, ids, JSON, keyset seeks).
//! - `application`, `event_type`, `endpoint`, `message`, `session`, `settings` (with ping): each entity's
//!   trait impl and SQL.
//! - `idempotency`: `Idempotency-Key` records, completed in the writer job of the write they
//!   protect.
//! - `testing` (feature `testing`): a fresh store in a temporary directory.

mod application;
mod checkpointer;
mod convert;
mod dead_letters;
mod endpoint;
mod error;
mod event_type;
mod idempotency;
mod inbound;
mod message;
mod migrate;
mod overview;
#[cfg(test)]
mod plan;
mod queue;
mod readers;
mod relay;
mod session;
mod settings;
mod writer;

#[cfg(feature = "testing")]
pub mod testing;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::Connection;
use vow_store::rules::pace::LocalPace;
use vow_store::{StoreError, StoreResult};

use crate::checkpointer::Checkpointer;
use crate::readers::Readers;
use crate::writer::{Lane, Writer};

/// How many read connections a store keeps.
const READERS: usize = 4;

/// How long a connection waits for a lock held by another process before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Statements each connection keeps prepared.
const STATEMENT_CACHE: usize = 64;

/// The SQLite store. Cheap to share behind an `Arc`; dropping it stops the writer thread (after
/// the writes already queued) and closes the database.
pub struct SqliteStore {
    path: PathBuf,
    writer: Writer,
    readers: Arc<Readers>,
    _checkpointer: Checkpointer,
    /// Throttled endpoints' send slots: one process owns the database (its one writer), so
    /// its workers' pace is kept here, off the writer's path.
    pace: LocalPace,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

/// Counters of the writer thread, from [`SqliteStore::write_stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteStats {
    /// Write transactions committed.
    pub transactions: u64,
    /// Writes run (each a savepoint inside some transaction, committed or not).
    pub writes: u64,
}

/// The write connection's settings, from [`SqliteStore::connection_settings`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionSettings {
    /// `PRAGMA journal_mode`, upper case: `WAL`.
    pub journal_mode: String,
    /// `PRAGMA synchronous` by name: `FULL`.
    pub synchronous: String,
    /// `PRAGMA foreign_keys`: on.
    pub foreign_keys: bool,
}

/// The file could not be opened or prepared.
#[derive(Debug, thiserror::Error)]
#[error("could not open the SQLite database at {path}")]
struct OpenFailed {
    path: PathBuf,
    #[source]
    cause: Box<dyn std::error::Error + Send + Sync>,
}

impl SqliteStore {
    /// Opens (creating it and its parent directory if needed) the database at `path`, sets
    /// WAL, `synchronous=FULL` and foreign keys, applies pending migrations, and starts the
    /// writer thread.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let failed = |cause: StoreError| match cause {
            StoreError::Unavailable(e) => StoreError::Unavailable(Box::new(OpenFailed {
                path: path.to_owned(),
                cause: e,
            })),
            StoreError::Backend(e) => StoreError::Backend(Box::new(OpenFailed {
                path: path.to_owned(),
                cause: e,
            })),
            other => other,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| failed(StoreError::Unavailable(Box::new(e))))?;
        }
        let mut conn = Connection::open(path).map_err(|e| failed(error::from_sqlite(e)))?;
        configure(&conn)
            .and_then(|()| set_journal_mode_wal(&conn))
            .map_err(|e| failed(error::from_sqlite(e)))?;
        migrate::migrate(&mut conn).map_err(|e| failed(e.into_store()))?;
        // The checkpoint thread does the copying; the writer's own checkpoint only has to finish
        // the WAL now and then so it can start over (see `checkpointer`).
        conn.pragma_update(
            None,
            "wal_autocheckpoint",
            checkpointer::WRITER_AUTOCHECKPOINT_PAGES,
        )
        .map_err(|e| failed(error::from_sqlite(e)))?;
        let readers =
            Readers::open(path, READERS, configure).map_err(|e| failed(error::from_sqlite(e)))?;
        let writer =
            Writer::spawn(conn).map_err(|e| failed(StoreError::Unavailable(Box::new(e))))?;
        let checkpointer = Checkpointer::spawn(path, configure)
            .map_err(|e| failed(StoreError::Unavailable(Box::new(e))))?;
        Ok(SqliteStore {
            path: path.to_owned(),
            writer,
            readers,
            _checkpointer: checkpointer,
            pace: LocalPace::default(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the writer has done since the store opened: how many transactions it committed
    /// for how many writes (their ratio is the group-commit batch size).
    pub fn write_stats(&self) -> WriteStats {
        let stats = self.writer.stats();
        WriteStats {
            transactions: stats.batches.load(Ordering::Relaxed),
            writes: stats.jobs.load(Ordering::Relaxed),
        }
    }

    /// The settings the write connection runs with, read back from SQLite (for health output
    /// and tests).
    pub async fn connection_settings(&self) -> StoreResult<ConnectionSettings> {
        self.write(|c| {
            let journal_mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
            let synchronous: i64 = c.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
            let foreign_keys: bool = c.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?;
            let synchronous = match synchronous {
                0 => "OFF",
                1 => "NORMAL",
                2 => "FULL",
                3 => "EXTRA",
                _ => "UNKNOWN",
            };
            Ok(ConnectionSettings {
                journal_mode: journal_mode.to_ascii_uppercase(),
                synchronous: synchronous.to_string(),
                foreign_keys,
            })
        })
        .await
    }

    /// Refuses new messages and inbound events with [`StoreError::Overloaded`] while the
    /// oldest one waiting for the writer has waited longer than `limit` (`None`: never, the
    /// default). Deliveries' and other accepted work's writes are never refused, and go first.
    pub fn shed_intake_after(&self, limit: Option<Duration>) {
        self.writer.shed_intake_after(limit);
    }

    /// Intake jobs refused so far ([`SqliteStore::shed_intake_after`]).
    pub fn intake_shed(&self) -> u64 {
        self.writer.stats().shed.load(Ordering::Relaxed)
    }

    /// Runs `f` in the writer's work lane: first into every batch, never refused.
    async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        F: FnOnce(&Connection) -> error::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.writer.run(Lane::Work, f).await
    }

    /// Runs `f`, new work a client offers, in the writer's intake lane: refused while the
    /// writer is overloaded.
    async fn write_intake<T, F>(&self, f: F) -> StoreResult<T>
    where
        F: FnOnce(&Connection) -> error::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.writer.run(Lane::Intake, f).await
    }

    async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        F: FnOnce(&Connection) -> error::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.readers.run(f).await
    }
}

/// Per-connection settings (the writer's and every reader's).
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // FULL: the WAL is synced on every commit, so an acknowledged write survives power loss.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    // Each write runs in a savepoint; its sub-journal (and temp b-trees) stay in memory instead
    // of a temp file written on every first page touch.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // A larger page cache (in KiB when negative) keeps the hot index pages of a batch resident.
    conn.pragma_update(None, "cache_size", -16_384)?;
    Ok(())
}

/// Switches the file to WAL (persistent) and checks that SQLite agreed.
fn set_journal_mode_wal(conn: &Connection) -> rusqlite::Result<()> {
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
    if mode.eq_ignore_ascii_case("wal") {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
            Some(format!("SQLite refused WAL mode (journal_mode is {mode})")),
        ))
    }
}

/// The time `update_*` stamps as `updated_at` (the trait passes no clock for those).
fn now() -> DateTime<Utc> {
    Utc::now()
}
