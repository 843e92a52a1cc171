//! The "at most once" flow both stores' `run` share, over two small crate-private traits that
//! each store implements ([`Records`] for the record steps, [`Write`] for the one transaction of
//! the business writes and the completion):
//!
//! 1. **Begin** ([`crate::sqlite::begin`] / [`crate::postgres::begin`]): the insert decides the
//!    owner. With `Prefer: wait=N`, a request that finds the key in progress polls every
//!    [`super::POLL`] until the outcome is stored (a replay), the lease ends (it takes over), or the N
//!    seconds are over (409). Each poll begins at `now` plus the time waited so far.
//! 2. Not the owner: [`super::answer`] (replay, 422 reused or expired, 409 in progress).
//! 3. **Write**: one transaction that fences the record by its lease token, runs the closure and
//!    completes the record with the closure's response; all of it commits or none.
//! 4. A [`Failure::Final`] is stored in a transaction of its own after the writes rolled back; a
//!    [`Failure::Retry`] or a store failure releases the record, so a retry runs.
//!
//! Without a store feature only the public vocabulary ([`Request`], [`Done`], [`Failure`],
//! [`Outcome`]) is of use.
#![cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use chrono::{DateTime, TimeDelta, Utc};

use super::{answer, response, with_expires};
use crate::error::{Error, Result};
use crate::fingerprint::canonical_body;
use crate::record::{Begun, LeaseToken, Scope, Settings, StoredResponse};
use crate::{Fingerprint, Problem};

/// One request with a key, to run at most once.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The record's scope: who, which application, which method and route template, which key.
    pub scope: Scope,
    /// The body as sent: fingerprinted (with the scope's method and route) and kept to tell a
    /// reuse which fields differ.
    pub body: &'a [u8],
    /// When the request arrived.
    pub now: DateTime<Utc>,
    /// The lease, replay and tombstone durations.
    pub settings: Settings,
    /// How long to wait for a request in progress with the same key ([`super::prefer_wait`]).
    pub wait: Option<Duration>,
}

impl<'a> Request<'a> {
    /// A request with the default [`Settings`] that does not wait.
    pub fn new(scope: Scope, body: &'a [u8], now: DateTime<Utc>) -> Self {
        Self {
            scope,
            body,
            now,
            settings: Settings::default(),
            wait: None,
        }
    }

    /// The same with `settings`.
    pub fn with_settings(self, settings: Settings) -> Self {
        Self { settings, ..self }
    }

    /// The same, waiting up to `wait` (capped at [`super::MAX_WAIT`]) for a request in progress.
    pub fn with_wait(self, wait: Option<Duration>) -> Self {
        Self { wait, ..self }
    }
}

/// What the operation's writes produced: the value for the handler and the response to send,
/// which is stored with the record (any status: a business refusal whose writes are kept, or
/// that wrote nothing, is a `Done` too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done<T> {
    /// What the handler gets back.
    pub value: T,
    /// The response to send and replay.
    pub response: StoredResponse,
}

/// Why the operation's writes are rolled back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure<E> {
    /// A final business outcome that must not keep the writes made so far (e.g. a unique
    /// violation that aborted the transaction): the writes roll back, then this response is
    /// stored with the record in a transaction of its own and replayed like any other.
    Final(StoredResponse),
    /// Not final (a validation failure found late, a 429, an infrastructure error): the writes
    /// roll back and the record is released, so a retry with the key runs the operation.
    Retry(E),
}

/// How a request with [`Request`] (or without a key) ended.
#[derive(Debug)]
#[must_use]
#[non_exhaustive]
pub enum Outcome<T, E> {
    /// This request ran the operation: its writes and the stored response committed together
    /// (with a key, the response carries `Idempotency-Expires`).
    Ran {
        /// The closure's value.
        value: T,
        /// The response to send.
        response: Response,
    },
    /// Answered without running the operation now: a replay, a final refusal stored after its
    /// writes rolled back, or a problem (409 in progress, 422 reused or expired).
    Answered(Response),
    /// The operation failed in a way that is not final ([`Failure::Retry`]): its writes rolled
    /// back and the record was released. Answer with the error.
    Failed(E),
    /// The record store failed, so nothing was done (fail closed): `response` is the 503
    /// `idempotency-store-unavailable` problem; `error` is the cause, for the host's logs.
    StoreFailed {
        /// The cause.
        error: Error,
        /// The 503 problem.
        response: Response,
    },
}

impl<T, E: IntoResponse> IntoResponse for Outcome<T, E> {
    fn into_response(self) -> Response {
        match self {
            Self::Ran { response, .. }
            | Self::Answered(response)
            | Self::StoreFailed { response, .. } => response,
            Self::Failed(error) => error.into_response(),
        }
    }
}

/// An owned record, as the write carries it.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub scope: Scope,
    pub token: LeaseToken,
    /// When the record was claimed: the completion's expiry counts from it.
    pub now: DateTime<Utc>,
    pub settings: Settings,
}

/// What the write transaction gives back: the store's error, else the closure's result.
pub(crate) type Written<T, E> = Result<std::result::Result<Done<T>, Failure<E>>>;

/// The record steps of a store, each in a short transaction of its own.
pub(crate) trait Records: Sync {
    /// [`crate::sqlite::begin`] / [`crate::postgres::begin`], committed.
    fn begin(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> impl std::future::Future<Output = Result<Begun>> + Send;

    /// Fences the record and completes it with `response`, in one transaction.
    fn finish(
        &self,
        claim: &Claim,
        response: &StoredResponse,
    ) -> impl std::future::Future<Output = Result<()>> + Send;

    /// Releases the record `claim` owns.
    fn release(&self, claim: &Claim) -> impl std::future::Future<Output = Result<bool>> + Send;
}

/// A store's one transaction around the closure `Op`: fence `claim` (if any), run `op`, complete
/// `claim` with its response; committed only when all of it succeeds.
pub(crate) trait Write<T, E, Op>: Records {
    fn write(
        &self,
        claim: Option<Claim>,
        op: Op,
    ) -> impl std::future::Future<Output = Written<T, E>> + Send;
}

/// Runs `op` at most once for `request` (every time when there is no key). See the module docs.
pub(crate) async fn run<T, E, Op, S>(
    store: &S,
    request: Option<Request<'_>>,
    op: Op,
) -> Outcome<T, E>
where
    S: Write<T, E, Op>,
{
    let Some(request) = request else {
        return match store.write(None, op).await {
            Ok(Ok(done)) => ran(done, None),
            Ok(Err(Failure::Final(refusal))) => Outcome::Answered(response(refusal)),
            Ok(Err(Failure::Retry(error))) => Outcome::Failed(error),
            Err(error) => unavailable(error),
        };
    };
    let (begun, now) = match begin_waiting(store, &request).await {
        Ok(begun) => begun,
        Err(error) => return unavailable(error),
    };
    let token = match answer(begun, &request.settings) {
        Ok(token) => token,
        Err(answered) => return Outcome::Answered(answered),
    };
    let claim = Claim {
        scope: request.scope,
        token,
        now,
        settings: request.settings,
    };
    let expires_at = claim.settings.deadlines(now).expires_at;
    match store.write(Some(claim.clone()), op).await {
        Ok(Ok(done)) => ran(done, Some(expires_at)),
        Ok(Err(Failure::Final(refusal))) => match store.finish(&claim, &refusal).await {
            Ok(()) => Outcome::Answered(with_expires(response(refusal), expires_at)),
            Err(error) => {
                release(store, &claim, &error.to_string()).await;
                Outcome::Answered(response(refusal))
            }
        },
        Ok(Err(Failure::Retry(error))) => {
            release(store, &claim, "the operation failed").await;
            Outcome::Failed(error)
        }
        // Another request took the record over: it runs (or ran) the operation.
        Err(Error::Fenced) => {
            Outcome::Answered(Problem::InProgress { retry_after: 1 }.into_response())
        }
        Err(error) => {
            release(store, &claim, &error.to_string()).await;
            unavailable(error)
        }
    }
}

/// Begins the record, polling while another request holds it and `request.wait` allows; the
/// outcome and the time it was decided at.
async fn begin_waiting<S: Records>(
    store: &S,
    request: &Request<'_>,
) -> Result<(Begun, DateTime<Utc>)> {
    let scope = &request.scope;
    let fingerprint = Fingerprint::of(&scope.method, &scope.route, request.body);
    let canonical = canonical_body(request.body);
    let wait = request.wait.unwrap_or_default().min(super::MAX_WAIT);
    let started = tokio::time::Instant::now();
    let settings = &request.settings;
    let (fingerprint, canonical) = (&fingerprint, canonical.as_str());
    // A lock, not a `Cell`, so the handler's future stays `Send`.
    let decided_at = std::sync::Mutex::new(request.now);
    let begun = super::begin_until(started + wait, |polls| {
        // The first begin is at `now` itself; each poll after it at `now` plus the time waited.
        let waited = match polls {
            0 => TimeDelta::zero(),
            _ => TimeDelta::from_std(started.elapsed()).unwrap_or(TimeDelta::MAX),
        };
        let now = request
            .now
            .checked_add_signed(waited)
            .unwrap_or(request.now);
        *decided_at.lock().unwrap_or_else(|e| e.into_inner()) = now;
        store.begin(scope, fingerprint, canonical, now, settings)
    })
    .await?;
    let now = *decided_at.lock().unwrap_or_else(|e| e.into_inner());
    Ok((begun, now))
}

/// Releases `claim` after `why`; a record that cannot be released frees itself when its lease
/// ends, so this only logs.
async fn release<S: Records>(store: &S, claim: &Claim, why: &str) {
    if let Err(error) = store.release(claim).await {
        tracing::warn!(%error, %why, key = %claim.scope.key.hash(),
            "could not release an idempotency record; it frees when its lease ends");
    }
}

fn ran<T, E>(done: Done<T>, expires_at: Option<DateTime<Utc>>) -> Outcome<T, E> {
    let sent = response(done.response);
    Outcome::Ran {
        value: done.value,
        response: match expires_at {
            Some(at) => with_expires(sent, at),
            None => sent,
        },
    }
}

fn unavailable<T, E>(error: Error) -> Outcome<T, E> {
    Outcome::StoreFailed {
        error,
        response: Problem::StoreUnavailable.into_response(),
    }
}
