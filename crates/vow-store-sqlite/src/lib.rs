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
//! - [`SqliteStore`] (this file): opening (pragmas, migrations) and the `Store` impl, which
//!   routes each method to the writer or the readers.
//! - `queue`: the [`vow_store::DeliveryQueue`] impl (claims with leases, outcomes, attempts,
//!   resend/replay, retention).
//! - `inbound`: the [`vow_store::InboundStore`] impl (sources, the atomic claim of inbound
//!   events, quarantine, rejections, retention).
//! - `writer`: the writer thread, batching and group commit.
//! - `readers`: the read connection pool.
//! - `checkpointer`: WAL checkpoints on their own thread, off the writer's path.
//! - `migrate`: the embedded, forward-only migrations in `migrations/`.
//! - `error`: SQLite errors → [`vow_store::StoreError`] (unique violations → `Conflict`, ...).
//! - `rows`: column encodings shared by the entity modules (times, ids, JSON, keyset seeks).
//! - `apps`, `event_types`, `endpoints`, `messages`, `settings`: the SQL of each entity.
//! - `idempotency`: `Idempotency-Key` records, completed in the writer job of the write they
//!   protect.
//! - `testing` (feature `testing`): a fresh store in a temporary directory.

mod apps;
mod checkpointer;
mod endpoints;
mod error;
mod event_types;
mod idempotency;
mod inbound;
mod messages;
mod migrate;
mod queue;
mod readers;
mod rows;
mod settings;
mod writer;

#[cfg(feature = "testing")]
pub mod testing;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::Connection;
use vow_core::{AppId, EndpointId, MessageId};
use vow_store::idempotency::{
    Begun, Completion, Fingerprint, KeyStatus, LeaseToken, Scope, Settings, StoredResponse, Write,
    Written,
};
use vow_store::{
    AppKey, Application, ApplicationFields, CreatedMessage, Delivery, Endpoint, EndpointFields,
    EndpointKey, EndpointSecret, EventType, Message, MessageFilter, MessageKey, NewApplication,
    NewEndpoint, NewMessage, Seek, Store, StoreError, StoreResult,
};

use crate::checkpointer::Checkpointer;
use crate::readers::Readers;
use crate::writer::Writer;

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

    async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        F: FnOnce(&Connection) -> error::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.writer.run(f).await
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

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> StoreResult<()> {
        if !self.writer.is_running() {
            return Err(StoreError::Unavailable(Box::new(error::WriterGone)));
        }
        self.read(|c| Ok(c.query_row("SELECT 1", [], |_| Ok(()))?))
            .await
    }

    async fn init_admin_token_hash(&self, hash: &str) -> StoreResult<String> {
        let hash = hash.to_owned();
        self.write(move |c| settings::init_admin_token_hash(c, &hash))
            .await
    }

    async fn admin_token_hash(&self) -> StoreResult<Option<String>> {
        self.read(settings::admin_token_hash).await
    }

    async fn create_application(&self, new: NewApplication) -> StoreResult<Application> {
        self.write(move |c| apps::create(c, new)).await
    }

    async fn get_application(&self, key: &AppKey) -> StoreResult<Option<Application>> {
        let key = key.clone();
        self.read(move |c| apps::get(c, &key)).await
    }

    async fn list_applications(&self, seek: &Seek) -> StoreResult<Vec<Application>> {
        let seek = seek.clone();
        self.read(move |c| apps::list(c, &seek)).await
    }

    async fn update_application(
        &self,
        id: AppId,
        fields: ApplicationFields,
    ) -> StoreResult<Application> {
        let now = now();
        self.write(move |c| apps::update(c, id, fields, now)).await
    }

    async fn delete_application(&self, id: AppId) -> StoreResult<()> {
        self.write(move |c| apps::delete(c, id)).await
    }

    async fn create_event_type(&self, new: EventType) -> StoreResult<EventType> {
        self.write(move |c| event_types::create(c, new)).await
    }

    async fn get_event_type(&self, name: &str) -> StoreResult<Option<EventType>> {
        let name = name.to_owned();
        self.read(move |c| event_types::get(c, &name)).await
    }

    async fn list_event_types(
        &self,
        seek: &Seek,
        include_archived: bool,
    ) -> StoreResult<Vec<EventType>> {
        let seek = seek.clone();
        self.read(move |c| event_types::list(c, &seek, include_archived))
            .await
    }

    async fn update_event_type(&self, updated: EventType) -> StoreResult<EventType> {
        self.write(move |c| event_types::update(c, updated)).await
    }

    async fn expunge_event_type(&self, name: &str) -> StoreResult<()> {
        let name = name.to_owned();
        self.write(move |c| event_types::expunge(c, &name)).await
    }

    async fn create_endpoint(&self, new: NewEndpoint) -> StoreResult<Endpoint> {
        self.write(move |c| endpoints::create(c, new)).await
    }

    async fn get_endpoint(&self, app: AppId, key: &EndpointKey) -> StoreResult<Option<Endpoint>> {
        let key = key.clone();
        self.read(move |c| endpoints::get(c, app, &key)).await
    }

    async fn list_endpoints(&self, app: AppId, seek: &Seek) -> StoreResult<Vec<Endpoint>> {
        let seek = seek.clone();
        self.read(move |c| endpoints::list(c, app, None, &seek))
            .await
    }

    async fn update_endpoint(
        &self,
        app: AppId,
        id: EndpointId,
        fields: EndpointFields,
    ) -> StoreResult<Endpoint> {
        let now = now();
        self.write(move |c| endpoints::update(c, app, id, fields, now))
            .await
    }

    async fn delete_endpoint(&self, app: AppId, id: EndpointId) -> StoreResult<()> {
        self.write(move |c| endpoints::delete(c, app, id)).await
    }

    async fn endpoint_secrets(
        &self,
        app: AppId,
        id: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<EndpointSecret>> {
        self.read(move |c| endpoints::secrets(c, app, id, now))
            .await
    }

    async fn rotate_endpoint_secret(
        &self,
        app: AppId,
        id: EndpointId,
        new_key: String,
        old_valid_until: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.write(move |c| endpoints::rotate_secret(c, app, id, &new_key, old_valid_until))
            .await
    }

    async fn create_message(&self, new: NewMessage) -> StoreResult<CreatedMessage> {
        self.write(move |c| messages::create(c, new, None)).await
    }

    async fn create_message_to_endpoint(
        &self,
        new: NewMessage,
        endpoint: EndpointId,
    ) -> StoreResult<CreatedMessage> {
        self.write(move |c| messages::create(c, new, Some(endpoint)))
            .await
    }

    async fn get_message(&self, app: AppId, key: &MessageKey) -> StoreResult<Option<Message>> {
        let key = key.clone();
        self.read(move |c| messages::get(c, app, &key)).await
    }

    async fn list_messages(
        &self,
        app: AppId,
        filter: &MessageFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<Message>> {
        let filter = filter.clone();
        let seek = seek.clone();
        self.read(move |c| messages::list(c, app, &filter, None, &seek))
            .await
    }

    async fn list_deliveries(&self, app: AppId, msg: MessageId) -> StoreResult<Vec<Delivery>> {
        self.read(move |c| messages::deliveries(c, app, msg)).await
    }

    async fn begin_idempotent(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<Begun> {
        let (scope, fingerprint, settings) = (scope.clone(), *fingerprint, *settings);
        let body = canonical_body.to_owned();
        self.write(move |c| idempotency::begin(c, &scope, &fingerprint, &body, now, &settings))
            .await
    }

    async fn release_idempotent(&self, scope: &Scope, token: &LeaseToken) -> StoreResult<bool> {
        let (scope, token) = (scope.clone(), token.clone());
        self.write(move |c| idempotency::release(c, &scope, &token))
            .await
    }

    async fn purge_idempotent(&self, now: DateTime<Utc>, batch: usize) -> StoreResult<usize> {
        self.write(move |c| idempotency::purge(c, now, batch)).await
    }

    async fn complete_idempotent(
        &self,
        scope: &Scope,
        token: &LeaseToken,
        response: StoredResponse,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<()> {
        let (scope, token, settings) = (scope.clone(), token.clone(), *settings);
        self.write(move |c| idempotency::complete(c, &scope, &token, &response, now, &settings))
            .await
    }

    async fn apply(
        &self,
        write: Write,
        completion: Option<Completion>,
    ) -> StoreResult<(Written, Option<StoredResponse>)> {
        self.write(move |c| idempotency::apply(c, write, completion))
            .await
    }

    async fn idempotency_status(
        &self,
        scope: &Scope,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<KeyStatus>> {
        let scope = scope.clone();
        self.read(move |c| idempotency::status(c, &scope, now))
            .await
    }

    async fn oldest_idempotent_claim(
        &self,
        settings: &Settings,
    ) -> StoreResult<Option<DateTime<Utc>>> {
        let settings = *settings;
        self.read(move |c| idempotency::oldest_claim(c, &settings))
            .await
    }
}
