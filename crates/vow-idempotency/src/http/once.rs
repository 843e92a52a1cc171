//! Both stores' `run`, on the one keyed flow ([`super::flow`]): each store is the flow's
//! [`RecordStore`] (its record steps, timed by the request's [`Clock`]) and implements the
//! crate-private [`Write`], the one transaction of the business writes and the completion:
//!
//! 1. **Begin** ([`crate::sqlite::begin`] / [`crate::postgres::begin`]): the insert decides the
//!    owner (these stores do not claim in the write). With `Prefer: wait=N`, a request that
//!    finds the key in progress polls every [`super::next::POLL`] until the outcome is stored (a
//!    replay), the lease ends (it takes over), or the N seconds are over (409). Each poll begins
//!    at `now` plus the time waited so far ([`Clock`]).
//! 2. Not the owner: replay, 422 reused or expired, 409 in progress.
//! 3. **Write**: one transaction that fences the record by its lease token, runs the closure and
//!    completes the record with the closure's response; all of it commits or none.
//! 4. A [`Failure::Final`] is stored in a transaction of its own after the writes rolled back; a
//!    [`Failure::Retry`] or a store failure releases the record, so a retry runs.
//!
//! Without a store feature only the public vocabulary ([`Request`], [`Done`], [`Failure`],
//! [`Outcome`]) is of use.
#![cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]

use std::future::Future;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use chrono::{DateTime, TimeDelta, Utc};
use tokio::time::Instant;

use super::flow;
use super::keyed::{Ended, Keyed, Owner, RecordStore, Settled};
use super::respond::{response, with_expires};
use crate::error::{Error, Result};
use crate::fingerprint::canonical_body;
use crate::record::{Scope, Settings, StoredResponse};
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
    /// How long to wait for a request in progress with the same key ([`super::respond::prefer_wait`]).
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

    /// The same, waiting up to `wait` (capped at [`super::respond::MAX_WAIT`]) for a request in progress.
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

/// What the write transaction gives back: the store's error, else the closure's result.
pub(crate) type Written<T, E> = Result<std::result::Result<Done<T>, Failure<E>>>;

/// A store's one transaction around the closure `Op`: fence `owner`'s record (if any), run
/// `op`, complete the record with its response; committed only when all of it succeeds.
pub(crate) trait Write<T, E, Op>: RecordStore<Error = Error> {
    fn write(&self, owner: Option<Owner>, op: Op) -> impl Future<Output = Written<T, E>> + Send;
}

/// A store's clock for one request: the request's `now` plus the time waited since (in whole
/// milliseconds, so the first begin is at `now` itself).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    at: DateTime<Utc>,
    started: Instant,
}

impl Clock {
    /// The clock of `request` (the time now without one: nothing is timed then).
    pub(crate) fn of(request: Option<&Request<'_>>) -> Self {
        Self {
            at: request.map_or_else(Utc::now, |r| r.now),
            started: Instant::now(),
        }
    }

    /// The request's time plus the time waited.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        let waited = i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let waited = TimeDelta::try_milliseconds(waited).unwrap_or(TimeDelta::MAX);
        self.at.checked_add_signed(waited).unwrap_or(self.at)
    }
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
    let scope = request.scope;
    let fingerprint = Fingerprint::of(&scope.method, &scope.route, request.body);
    let canonical = canonical_body(request.body);
    let keyed = Keyed::new(
        scope,
        fingerprint,
        canonical,
        request.wait,
        request.settings,
    );
    let settled = flow::run(store, &keyed, None, |owner| async move {
        match store.write(Some(owner), op).await {
            Ok(Ok(done)) => Ended::Completed {
                answer: done,
                took_over: false,
            },
            Ok(Err(Failure::Final(refusal))) => Ended::Final {
                sent: response(refusal.clone()),
                stored: refusal,
            },
            Ok(Err(Failure::Retry(error))) => Ended::Failed(error),
            // Another request took the record over: it runs (or ran) the operation.
            Err(Error::Fenced) => Ended::Fenced,
            Err(error) => Ended::Unavailable(error),
        }
    })
    .await;
    match settled {
        Settled::Ran { answer, expires_at } => ran(answer, Some(expires_at)),
        Settled::Answered(answered) => Outcome::Answered(answered),
        Settled::Failed(error) => Outcome::Failed(error),
        Settled::Unavailable(error) => unavailable(error),
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
