//! "Run this operation at most once" on PostgreSQL (features `axum` + `postgres`): [`run`], on
//! a sqlx `PgPool`.
//!
//! The record is begun on a pooled connection outside any transaction (each statement commits,
//! so the claim is visible at once). The owner's operation then runs in ONE transaction that
//! first locks the record by its lease token (`SELECT … FOR UPDATE`: a takeover waits for it),
//! then makes the business writes, then completes the record. The operation's closure gets the
//! transaction's connection and must not commit or roll it back itself.

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use super::keyed::Owner;
use super::keyed::RecordStore;
use super::once::{self, Clock, Write, Written};
use super::once::{Done, Failure, Outcome, Request};
use crate::error::{Error, Result};
use crate::record::{Begun, LeaseToken, Scope, Settings, StoredResponse};
use crate::{postgres as records, Fingerprint, KeyStatus};

/// A boxed, sendable future borrowing for `'c`: what the operation's closure returns.
pub type BoxFuture<'c, T> = Pin<Box<dyn Future<Output = T> + Send + 'c>>;

/// Runs `op` at most once for `request`, on `pool`, or every time when `request` is `None` (no
/// key). The record is begun first (waiting for a request in progress as `request.wait`
/// allows); the owner then runs `op` in ONE transaction with the record's fence and completion,
/// so the business writes and the stored response commit together or not at all. See
/// [`Outcome`] for what comes back, and [`Failure`] for how a failing `op` is treated.
///
/// ```no_run
/// # use sqlx::PgPool;
/// # use vow_idempotency::http::{self, postgres, Done, Failure};
/// # use vow_idempotency::StoredResponse;
/// # async fn create(pool: PgPool, request: Option<http::Request<'_>>) {
/// let outcome = postgres::run(&pool, request, |conn| {
///     Box::pin(async move {
///         sqlx::query("INSERT INTO jobs (id) VALUES ('job_1')")
///             .execute(&mut *conn)
///             .await
///             .map_err(Failure::Retry)?;
///         let response = StoredResponse::json(202, &serde_json::json!({"id": "job_1"}));
///         Ok(Done { value: "job_1", response })
///     })
/// })
/// .await;
/// # let _ = outcome;
/// # }
/// ```
pub async fn run<T, E, F>(pool: &PgPool, request: Option<Request<'_>>, op: F) -> Outcome<T, E>
where
    F: for<'c> FnOnce(
            &'c mut PgConnection,
        ) -> BoxFuture<'c, std::result::Result<Done<T>, Failure<E>>>
        + Send,
    T: Send,
    E: Send,
{
    let clock = Clock::of(request.as_ref());
    once::run(&Postgres(pool, clock), request, op).await
}

/// The pool as the flow's store, with the request's clock.
struct Postgres<'a>(&'a PgPool, Clock);

impl RecordStore for Postgres<'_> {
    type Error = Error;

    fn is_fenced(error: &Error) -> bool {
        error.is_fenced()
    }

    fn now(&self) -> DateTime<Utc> {
        self.1.now()
    }

    async fn begin(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> Result<Begun> {
        let mut conn = self.0.acquire().await?;
        records::begin(&mut conn, scope, fingerprint, canonical_body, now, settings).await
    }

    async fn status(&self, scope: &Scope, now: DateTime<Utc>) -> Result<Option<KeyStatus>> {
        let mut conn = self.0.acquire().await?;
        records::status(&mut conn, scope, now).await
    }

    async fn complete(
        &self,
        scope: &Scope,
        token: &LeaseToken,
        response: StoredResponse,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> Result<()> {
        let mut tx = self.0.begin().await?;
        records::fence(&mut tx, scope, token).await?;
        records::complete(&mut tx, scope, token, &response, now, settings).await?;
        Ok(tx.commit().await?)
    }

    async fn release(&self, scope: &Scope, token: &LeaseToken) -> Result<bool> {
        let mut conn = self.0.acquire().await?;
        records::release(&mut conn, scope, token).await
    }
}

impl<T, E, F> Write<T, E, F> for Postgres<'_>
where
    F: for<'c> FnOnce(
            &'c mut PgConnection,
        ) -> BoxFuture<'c, std::result::Result<Done<T>, Failure<E>>>
        + Send,
    T: Send,
    E: Send,
{
    async fn write(&self, owner: Option<Owner>, op: F) -> Written<T, E> {
        // Dropping `tx` before its commit rolls it back.
        let mut tx = self.0.begin().await?;
        if let Some(owner) = &owner {
            records::fence(&mut tx, &owner.scope, &owner.token).await?;
        }
        let done = match op(&mut tx).await {
            Ok(done) => done,
            Err(failure) => {
                tx.rollback().await?;
                return Ok(Err(failure));
            }
        };
        if let Some(owner) = &owner {
            complete(&mut tx, owner, &done.response).await?;
        }
        tx.commit().await?;
        Ok(Ok(done))
    }
}

/// Completes `owner`'s record with `response`.
async fn complete(conn: &mut PgConnection, owner: &Owner, response: &StoredResponse) -> Result<()> {
    let Owner {
        scope,
        token,
        now,
        settings,
        ..
    } = owner;
    records::complete(conn, scope, token, response, *now, settings).await
}
