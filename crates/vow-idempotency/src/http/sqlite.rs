//! "Run this operation at most once" on SQLite (features `axum` + `sqlite`): [`run`].
//!
//! The service hands over its database as a [`WithConnection`]: something that runs a closure
//! on a `rusqlite::Connection` off the async runtime and answers with its result. This crate
//! implements it for `Arc<std::sync::Mutex<Connection>>` (the closure runs in
//! `spawn_blocking` with the lock held); a service with a writer thread implements it by sending
//! the closure there.
//!
//! Every closure [`run`] hands over opens its own transaction, `BEGIN IMMEDIATE` when the
//! connection is in autocommit mode, else a `SAVEPOINT` (so a writer that already batches jobs
//! in one transaction works as well), and ends it before returning. The operation's closure runs
//! inside the transaction that fences and completes the record, so it must not begin or end
//! transactions itself.

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use rusqlite::Connection;

use super::keyed::Owner;
use super::keyed::RecordStore;
use super::once::{self, Clock, Write, Written};
use super::once::{Done, Failure, Outcome, Request};
use crate::error::{Error, Result};
use crate::record::{Begun, LeaseToken, Scope, Settings, StoredResponse};
use crate::{sqlite as records, Fingerprint, KeyStatus};

/// Runs closures on a SQLite connection for [`run`].
pub trait WithConnection: Send + Sync {
    /// Runs `job` on a connection to the database, not on the async runtime's threads, and
    /// answers with what it returned; [`Error::Unavailable`] when it could not run it at all.
    /// `job` manages its own transaction (see the module docs).
    fn with_connection<T, F>(&self, job: F) -> impl Future<Output = Result<T>> + Send
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static;
}

/// One connection behind a mutex: `job` runs under the lock in `spawn_blocking`. A lock that a
/// panicking job poisoned is taken back, and a transaction it left open is rolled back.
impl WithConnection for Arc<Mutex<Connection>> {
    fn with_connection<T, F>(&self, job: F) -> impl Future<Output = Result<T>> + Send
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let shared = Arc::clone(self);
        async move {
            let ran = tokio::task::spawn_blocking(move || {
                let conn = shared.lock().unwrap_or_else(|poisoned| {
                    shared.clear_poison();
                    let conn = poisoned.into_inner();
                    if !conn.is_autocommit() {
                        // Nothing to keep from a job that panicked mid-transaction.
                        let _ = conn.execute_batch("ROLLBACK");
                    }
                    conn
                });
                job(&conn)
            })
            .await;
            ran.map_err(|e| Error::Unavailable(Box::new(e)))?
        }
    }
}

/// Runs `op` at most once for `request`, on `db`, or every time when `request` is `None` (no
/// key). The record is begun in a transaction of its own (waiting for a request in progress as
/// `request.wait` allows); the owner then runs `op` in ONE transaction with the record's fence
/// and completion, so the business writes and the stored response commit together or not at all.
/// See [`Outcome`] for what comes back, and [`Failure`] for how a failing `op` is treated.
///
/// ```no_run
/// # use std::sync::{Arc, Mutex};
/// # use rusqlite::Connection;
/// # use vow_idempotency::http::{self, sqlite, Done, Failure, Outcome};
/// # use vow_idempotency::StoredResponse;
/// # async fn create(db: Arc<Mutex<Connection>>, request: Option<http::Request<'_>>) {
/// let outcome = sqlite::run(&db, request, |conn| {
///     conn.execute("INSERT INTO jobs (id) VALUES ('job_1')", [])
///         .map_err(Failure::Retry)?;
///     let response = StoredResponse::json(202, &serde_json::json!({"id": "job_1"}));
///     Ok(Done { value: "job_1", response })
/// })
/// .await;
/// # let _ = outcome;
/// # }
/// ```
pub async fn run<A, T, E, F>(db: &A, request: Option<Request<'_>>, op: F) -> Outcome<T, E>
where
    A: WithConnection,
    F: FnOnce(&Connection) -> std::result::Result<Done<T>, Failure<E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let clock = Clock::of(request.as_ref());
    once::run(&Sqlite(db, clock), request, op).await
}

/// `A` as the flow's store, with the request's clock.
struct Sqlite<'a, A>(&'a A, Clock);

impl<A: WithConnection> RecordStore for Sqlite<'_, A> {
    type Error = Error;

    fn is_fenced(error: &Error) -> bool {
        error.is_fenced()
    }

    fn now(&self) -> DateTime<Utc> {
        self.1.now()
    }

    fn begin(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> impl Future<Output = Result<Begun>> + Send {
        let (scope, fingerprint, settings) = (scope.clone(), *fingerprint, *settings);
        let body = canonical_body.to_owned();
        self.0.with_connection(move |conn| {
            records::begin(conn, &scope, &fingerprint, &body, now, &settings)
        })
    }

    fn status(
        &self,
        scope: &Scope,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Option<KeyStatus>>> + Send {
        let scope = scope.clone();
        self.0
            .with_connection(move |conn| records::status(conn, &scope, now))
    }

    fn complete(
        &self,
        scope: &Scope,
        token: &LeaseToken,
        response: StoredResponse,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> impl Future<Output = Result<()>> + Send {
        let (scope, token, settings) = (scope.clone(), token.clone(), *settings);
        self.0.with_connection(move |conn| {
            let done: std::result::Result<(), Infallible> = atomically(conn, |c| {
                records::fence(c, &scope, &token)?;
                records::complete(c, &scope, &token, &response, now, &settings).map(Ok)
            })?;
            let Ok(()) = done;
            Ok(())
        })
    }

    fn release(
        &self,
        scope: &Scope,
        token: &LeaseToken,
    ) -> impl Future<Output = Result<bool>> + Send {
        let (scope, token) = (scope.clone(), token.clone());
        self.0
            .with_connection(move |conn| records::release(conn, &scope, &token))
    }
}

impl<A, T, E, F> Write<T, E, F> for Sqlite<'_, A>
where
    A: WithConnection,
    F: FnOnce(&Connection) -> std::result::Result<Done<T>, Failure<E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    fn write(&self, owner: Option<Owner>, op: F) -> impl Future<Output = Written<T, E>> + Send {
        self.0.with_connection(move |conn| {
            atomically(conn, |c| {
                if let Some(owner) = &owner {
                    records::fence(c, &owner.scope, &owner.token)?;
                }
                let done = match op(c) {
                    Ok(done) => done,
                    Err(failure) => return Ok(Err(failure)),
                };
                if let Some(owner) = &owner {
                    complete(c, owner, &done.response)?;
                }
                Ok(Ok(done))
            })
        })
    }
}

/// Completes `owner`'s record with `response`.
fn complete(conn: &Connection, owner: &Owner, response: &StoredResponse) -> Result<()> {
    let Owner {
        scope,
        token,
        now,
        settings,
        ..
    } = owner;
    records::complete(conn, scope, token, response, *now, settings)
}

/// Runs `f` in a transaction of its own (a savepoint when `conn` is already in one), kept only
/// when `f` gives `Ok(Ok(_))`; rolled back on `Ok(Err(_))` or `Err(_)`.
fn atomically<T, X>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<std::result::Result<T, X>>,
) -> Result<std::result::Result<T, X>> {
    let outer = conn.is_autocommit();
    conn.execute_batch(if outer {
        "BEGIN IMMEDIATE"
    } else {
        "SAVEPOINT vow_idempotency"
    })?;
    let result = f(conn);
    let end = match (&result, outer) {
        (Ok(Ok(_)), true) => "COMMIT",
        (Ok(Ok(_)), false) => "RELEASE vow_idempotency",
        (_, true) => "ROLLBACK",
        (_, false) => "ROLLBACK TO vow_idempotency; RELEASE vow_idempotency",
    };
    let ended = conn.execute_batch(end);
    if ended.is_err() && outer && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    match (result, ended) {
        (Ok(Ok(_)), Err(e)) => Err(e.into()),
        (result, _) => result,
    }
}
