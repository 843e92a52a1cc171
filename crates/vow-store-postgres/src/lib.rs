//! vow's PostgreSQL store: the multi-node backend of [`vow_store::Store`].
//!
//! Several `vow serve` processes share one database, so every rule the trait promises holds across
//! processes: uniqueness is a constraint in the schema (not a check in this process), every state
//! change is one transaction, and the rows a transaction depends on are locked (`FOR KEY SHARE`
//! on the application and endpoints a message fans out to, `FOR NO KEY UPDATE` on an endpoint
//! whose secret rotates). Queries are runtime-checked (`sqlx::query*` with `.bind`), so building
//! the crate needs no database. All SQL lives in this crate; callers see [`StoreError`] only.
//!
//! ```no_run
//! # async fn run() -> Result<(), vow_store::StoreError> {
//! let store = vow_store_postgres::PgStore::connect("postgres://vow@db/vow", 10).await?;
//! if store.pending_migrations().await? {
//!     store.migrate().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`PgStore`] (here): the pool, [`PgStore::connect`], a `Debug` that never shows the DSN.
//! - `connection_setup`: what each pooled connection sets first (`jit = off`).
//! - `migrate`: the embedded migrations (`migrations/*.sql`), [`PgStore::migrate`] and
//!   [`PgStore::pending_migrations`].
//! - one module per entity, each implementing its `vow_store` trait with its SQL:
//!   `settings`, `session`, `application`, `event_type`, `endpoint` (with its signing secrets and their
//!   rotation), `message` (with the fan-out into deliveries), `delivery` and `idempotency`
//!   (`Idempotency-Key` records, completed in the transaction of the write they protect).
//! - `batcher`: the queue and flushers of a group commit; `flusher_thread`: the thread, runtime
//!   and pool they run on; `group_commit`: concurrent message
//!   creates, keyed or not, share one transaction, a few statements and one commit; `intake`:
//!   the bounded share of connections (and wait) new work may take.
//! - `kept_plans`: transactions whose statements run plans kept per connection, made of index
//!   reads only (the delivery queue's claim and record).
//! - `queue`: the [`vow_store::DeliveryQueue`] traits: leased claims, fenced records, attempts,
//!   resend/replay, retention; one module per concern.
//! - `inbound`: the [`vow_store::InboundStore`] traits: sources, the atomic claim of inbound
//!   events, quarantine, rejections, retention.
//! - `overview`: the console's Overview ([`vow_store::Overviews`]), indexed reads in one
//!   snapshot.
//! - `listen`: `NOTIFY` when work becomes due, [`PgStore::spawn_work_listener`] to wake this
//!   process's workers.
//! - `vacuum`: [`PgStore::vacuum_off`], whether autovacuum will clean the work queues.
//! - `seek`: keyset pagination ([`vow_store::Seek`]) as SQL.
//! - `convert`: this store's `vow_store::rows::Columns` (rows read back through the shared
//!   mapping) and the conversions on the way in.
//! - `error`: PostgreSQL errors into [`StoreError`] (unique violation → `Conflict`, ...).
//! - `testing` (feature `testing`): a fresh migrated schema per test.

mod application;
mod batcher;
mod connection_setup;
mod convert;
mod dead_letters;
mod delivery;
mod endpoint;
mod error;
mod event_type;
mod flusher_thread;
mod group_commit;
mod idempotency;
mod inbound;
mod intake;
mod kept_plans;
mod listen;
mod message;
mod migrate;
mod overview;
mod queue;
mod relay;
mod seek;
mod session;
mod settings;
mod vacuum;

pub use vacuum::VacuumOff;
#[cfg(feature = "testing")]
pub mod testing;

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool, Postgres};
use vow_store::idempotency::{Applied, QueuesWork};
use vow_store::{StoreError, StoreResult};

use crate::error::db_error;
use crate::flusher_thread::FlusherThread;

/// How long a first connection may take before [`PgStore::connect`] gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an operation waits for a pooled connection before it fails as `Unavailable`; also
/// how long a request waits while the server refuses connections (the pool retries until then),
/// so a PostgreSQL that is down answers requests with 503 within it. The readiness probe's
/// store wait.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a pooled connection may have been idle and still be handed out untested. Every
/// connection is tested as it goes back to the pool (sqlx pings it on release), so one used
/// within this time was alive a moment ago; one idle longer (a quiet spell, after which the
/// server may have gone away or closed it) is pinged first and replaced if it is dead. Under
/// load connections come back within milliseconds, so an acquire costs no round trip (sqlx's
/// default pinged on every acquire: one more round trip before each batch, claim and outcome).
pub(crate) const TRUSTED_IDLE: Duration = Duration::from_secs(1);

/// The PostgreSQL [`vow_store::Store`]: a connection pool to one database.
///
/// Cheap to clone (the pool is shared). Several processes may each hold one on the same
/// database.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    host: String,
    port: u16,
    database: Option<String>,
    max_connections: u32,
    notifier: listen::WorkNotifier,
    intake: std::sync::Arc<intake::Intake>,
    group_commit: group_commit::GroupCommit,
    inbound_claims: inbound::group_claims::GroupClaims,
    /// The group commits' thread and pool, running while the store is.
    flushers: FlusherThread,
    /// Where this process's delivery claims start walking each endpoint's pending rows.
    claim_floors: std::sync::Arc<queue::floors::ClaimFloors>,
}

impl std::fmt::Debug for PgStore {
    /// Where the store points, never the DSN (it may hold a password).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

/// The pools' settings, for at most `max_connections`, each new one set up by `set_up`; a
/// connection idle for [`TRUSTED_IDLE`] or longer is pinged before it is handed out.
fn pool_options(max_connections: u32, set_up: connection_setup::Hook) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= TRUSTED_IDLE {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        .after_connect(set_up)
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:pass@host:port/db?sslmode=...`) with
    /// at most `max_connections` (at least 2): a quarter of them, up to 4, in the group commits'
    /// pool (`flusher_thread`), the rest in the pool everything else shares.
    ///
    /// One connection is opened straight away, so a wrong URL, password or database name, or a
    /// server that is down, fails here with its real cause: [`StoreError::Unavailable`] when the
    /// server cannot be reached (or does not answer within 10 s), [`StoreError::Backend`] for
    /// the rest. The schema is not checked: see [`PgStore::pending_migrations`].
    pub async fn connect(url: &str, max_connections: u32) -> Result<PgStore, StoreError> {
        let options = PgConnectOptions::from_str(url).map_err(db_error)?;
        let options = match options.get_application_name() {
            Some(_) => options,
            None => options.application_name("vow"),
        };
        let first = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options))
            .await
            .map_err(|elapsed| StoreError::Unavailable(Box::new(ConnectTimeout(elapsed))))?
            .map_err(db_error)?;
        // The pool opens its own connections; this one only proved the way is open.
        let _ = first.close().await;
        let max_connections = max_connections.max(1);
        let flushers = flusher_thread::connections(max_connections);
        let shared = max_connections.saturating_sub(flushers).max(1);
        let pool =
            pool_options(shared, connection_setup::SET_UP).connect_lazy_with(options.clone());
        let batches = pool_options(flushers, connection_setup::SET_UP_FOR_BATCHES);
        let thread = FlusherThread::start(batches, options.clone())
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        let intake = std::sync::Arc::new(intake::Intake::new(shared));
        let store = PgStore {
            host: options.get_host().to_string(),
            port: options.get_port(),
            database: options.get_database().map(str::to_string),
            max_connections,
            notifier: listen::WorkNotifier::spawn(pool.clone()),
            group_commit: group_commit::GroupCommit::spawn(&thread, pool.clone(), intake.clone()),
            inbound_claims: inbound::group_claims::GroupClaims::spawn(
                &thread,
                pool.clone(),
                intake.clone(),
            ),
            flushers: thread,
            claim_floors: std::sync::Arc::default(),
            intake,
            pool,
        };
        Ok(store)
    }

    /// Refuses new messages and inbound events with [`StoreError::Overloaded`] when they wait
    /// longer than `limit` for one of the intake's connections (three quarters of the pool; the
    /// rest stay for deliveries' writes, which are never refused); `None`: they wait (the
    /// default).
    pub fn shed_intake_after(&self, limit: Option<Duration>) {
        self.intake.shed_after(limit);
    }

    /// Listens for work made due by any process and notifies `wake` for each signal; when
    /// `delivering` (this process's delivery workers run), counts it among the processes that
    /// deliver (`Overviews::delivering_nodes`) while it listens. Runs in the background until
    /// `wake` has no other owner; reconnects after a lost connection.
    pub fn spawn_work_listener(&self, wake: std::sync::Arc<tokio::sync::Notify>, delivering: bool) {
        listen::spawn_listener(self.pool.clone(), wake, delivering);
    }

    /// Runs `write`, a write that may queue work, and once it committed, wakes the workers of
    /// every process when it did.
    pub(crate) async fn waking<T: QueuesWork>(
        &self,
        write: impl Future<Output = StoreResult<Applied<T>>>,
    ) -> StoreResult<Applied<T>> {
        let applied = write.await?;
        self.notifier.written(&applied.0);
        Ok(applied)
    }

    /// A connection from the pool, for the entity functions that take one.
    pub(crate) async fn conn(&self) -> StoreResult<PoolConnection<Postgres>> {
        self.pool.acquire().await.map_err(db_error)
    }

    /// Closes both pools: waits for borrowed connections to come back and closes them all.
    /// Later calls fail with [`StoreError::Unavailable`].
    pub async fn close(&self) {
        self.pool.close().await;
        self.flushers.pool().close().await;
    }
}

/// The first connection did not open in time.
#[derive(Debug, thiserror::Error)]
#[error("could not connect to PostgreSQL within {CONNECT_TIMEOUT:?}")]
struct ConnectTimeout(#[source] tokio::time::error::Elapsed);
