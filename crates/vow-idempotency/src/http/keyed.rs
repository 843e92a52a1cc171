//! What the keyed flow ([`super::flow`]) works with: the `Idempotency-Key` side of a request
//! read from its head ([`Head`]), the request ready to run ([`Keyed`]), the record store it runs
//! on ([`RecordStore`], which a host implements over its own records), what the owner's operation
//! is given ([`Owner`]) and reports ([`Ended`]), and how the request settles ([`Settled`]).

use std::future::Future;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::route::Route;
use crate::record::{Begun, LeaseToken, Scope, Settings, StoredResponse};
use crate::{Fingerprint, IdempotencyKey, KeyStatus, Problem};

/// The `Idempotency-Key` side of a request to a keyed route, read from its head before its body:
/// the route, the key, `Prefer: wait`, the target and query its fingerprint covers, and how long
/// its answer may be replayed.
#[derive(Debug, Clone)]
pub struct Head {
    route: &'static Route,
    key: Option<IdempotencyKey>,
    wait: Option<Duration>,
    target: String,
    query: String,
    window: Option<Duration>,
}

impl Head {
    /// Reads the request's key and `Prefer: wait` from `headers`, the query parameters `route`
    /// reads from `query`, and its target from the path's `params` (all but `scoped`, the
    /// parameter the records are scoped by). [`Problem::KeyInvalid`] for a bad key header.
    pub fn read<'a>(
        route: &'static Route,
        headers: &HeaderMap,
        query: Option<&str>,
        scoped: &str,
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, Problem> {
        Ok(Self {
            route,
            key: super::respond::key(headers)?,
            wait: super::respond::prefer_wait(headers),
            target: route.target(scoped, params),
            query: route.canonical_query(query),
            window: None,
        })
    }

    /// The route.
    pub fn route(&self) -> &'static Route {
        self.route
    }

    /// The request's key, if it sent one.
    pub fn key(&self) -> Option<&IdempotencyKey> {
        self.key.as_ref()
    }

    /// Replays the outcome for at most `window` (and less when the configured retention is
    /// shorter), then frees the key with no tombstone, so a retry after it runs afresh: for an
    /// answer that stops being true, such as a claim on work whose leases end after `window`. The
    /// record is timed from before the operation runs, so it never outlives what it answers.
    pub fn replayed_within(self, window: Duration) -> Self {
        Self {
            window: Some(window),
            ..self
        }
    }

    /// How long this request's record lives: `configured`, bounded by the window.
    pub fn settings(&self, configured: Settings) -> Settings {
        let mut settings = configured;
        if let Some(window) = self.window {
            settings.ttl = settings.ttl.min(window);
            settings.tombstone = Duration::ZERO;
        }
        settings
    }

    /// The request ready to run, scoped to (`principal`, `application`, `method`, the route's
    /// template, the key), its fingerprint covering `method`, the target, the query and `raw`
    /// (the body as sent); `None` without a key.
    pub fn keyed(
        self,
        principal: &str,
        application: Option<String>,
        method: &str,
        raw: &[u8],
        configured: Settings,
    ) -> Option<Keyed> {
        let settings = self.settings(configured);
        let key = self.key?;
        let scope = Scope {
            principal: principal.into(),
            application,
            method: method.into(),
            route: self.route.template.into(),
            key,
        };
        let (fingerprint, body) = Fingerprint::of_request(method, &self.target, &self.query, raw);
        Some(Keyed::new(scope, fingerprint, body, self.wait, settings))
    }
}

/// A request with a key, ready to begin its record.
#[derive(Debug, Clone)]
pub struct Keyed {
    /// The record's scope.
    pub scope: Scope,
    /// The request's fingerprint.
    pub fingerprint: Fingerprint,
    /// Its canonical body (to tell a reuse which fields differ).
    pub canonical_body: String,
    /// `Prefer: wait`, as sent.
    pub wait: Option<Duration>,
    /// When a wait for another request's outcome ends (now, without `Prefer: wait`).
    pub until: Instant,
    /// How long its record lives.
    pub settings: Settings,
}

impl Keyed {
    /// The request, its wait (capped at [`super::respond::MAX_WAIT`]) counted from now.
    pub fn new(
        scope: Scope,
        fingerprint: Fingerprint,
        canonical_body: String,
        wait: Option<Duration>,
        settings: Settings,
    ) -> Self {
        let wait = wait.map(|w| w.min(super::respond::MAX_WAIT));
        Self {
            scope,
            fingerprint,
            canonical_body,
            wait,
            until: Instant::now() + wait.unwrap_or_default(),
            settings,
        }
    }
}

/// What the flow tells its host, for its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A request began waiting for another one with its key (`Prefer: wait`).
    Waited,
    /// A request took over a claim whose lease ran out (also logged here).
    TookOver,
    /// A stored response was replayed.
    Replayed,
    /// A request was answered with this problem.
    Refused(&'a Problem),
}

/// The record store the flow runs on, each step a short statement or transaction of its own. A
/// host implements it over its records (this crate does, over SQLite and PostgreSQL, for
/// `http::sqlite::run` and `http::postgres::run`); the operation's own write, which completes the
/// record in its transaction, is the host's ([`Owner`]).
pub trait RecordStore: Sync {
    /// The store's error.
    type Error: std::fmt::Display + Send;

    /// Whether `error` says the lease token no longer owns the record.
    fn is_fenced(error: &Self::Error) -> bool;

    /// Whether the operation's write can claim the key in its own transaction ([`Owner::fresh`]):
    /// then a request that does not wait claims no record before it runs (one commit for claim,
    /// write and response). Without it, every request begins its record first.
    fn claims_in_the_write(&self) -> bool {
        false
    }

    /// The time now, by the store's clock.
    fn now(&self) -> DateTime<Utc>;

    /// Claims `scope` for a request with `fingerprint` and `canonical_body` at `now`, or says
    /// why not ([`Begun`]).
    fn begin(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> impl Future<Output = Result<Begun, Self::Error>> + Send;

    /// Where `scope`'s key stands at `now` (`None`: the key is free).
    fn status(
        &self,
        scope: &Scope,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Option<KeyStatus>, Self::Error>> + Send;

    /// Completes the record `token` owns with `response`, on its own (a final outcome that
    /// wrote nothing); fenced when the token no longer owns it.
    fn complete(
        &self,
        scope: &Scope,
        token: &LeaseToken,
        response: StoredResponse,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Deletes the `in_progress` record `token` owns, so a retry runs; whether there was one.
    fn release(
        &self,
        scope: &Scope,
        token: &LeaseToken,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Told what happened, for the host's metrics (nothing by default).
    fn observe(&self, event: Event<'_>) {
        let _ = event;
    }
}

/// What the owner's operation is given: the record its write completes in its own transaction.
#[derive(Debug, Clone)]
pub struct Owner {
    /// The record's scope.
    pub scope: Scope,
    /// The owner's lease token: the record's, or (with `fresh`) a new one to claim it with.
    pub token: LeaseToken,
    /// `Some` to claim the key inside the write's transaction, no record begun
    /// ([`RecordStore::claims_in_the_write`]): the store decides there whether the key was free
    /// (or abandoned, and taken over) or held by another record, and then the write is
    /// [`Ended::Fenced`]. `None`: the record was begun; the write fences it by `token`.
    pub fresh: Option<Fresh>,
    /// When the record completes (its expiry counts from here).
    pub now: DateTime<Utc>,
    /// How long the completed record lives.
    pub settings: Settings,
}

/// What a claim in the write records: the request's fingerprint and canonical body.
#[derive(Debug, Clone)]
pub struct Fresh {
    /// The request's fingerprint.
    pub fingerprint: Fingerprint,
    /// Its canonical body.
    pub canonical_body: String,
}

/// How the owner's operation ended, as its host reports it.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "made once per request and matched at once; boxing the response gains nothing"
)]
pub enum Ended<T, E, X> {
    /// Its write committed and completed the record: `answer` is what it answers.
    Completed {
        /// The operation's answer.
        answer: T,
        /// Whether its fresh claim took an abandoned record over.
        took_over: bool,
    },
    /// Its write found the key with another record (or lost it to a takeover) and rolled back,
    /// writing nothing: the record answers.
    Fenced,
    /// A final answer reached without a write (a business refusal): `stored` is completed on the
    /// record, and `sent` answered.
    Final {
        /// The response to store and replay.
        stored: StoredResponse,
        /// The response to send now.
        sent: Response,
    },
    /// Not final (a validation failure, an infrastructure error): nothing is stored, and a
    /// record begun for it is released, so a retry runs.
    Failed(E),
    /// The store failed: nothing is stored, and the request is refused (503, failing closed).
    Unavailable(X),
}

/// How a keyed request settled.
#[derive(Debug)]
#[must_use]
pub enum Settled<T, E, X> {
    /// This request ran the operation, and its write completed the record: answer `answer` with
    /// `Idempotency-Expires: expires_at`.
    Ran {
        /// The operation's answer.
        answer: T,
        /// When its record stops being replayed.
        expires_at: DateTime<Utc>,
    },
    /// Answered with this response: a replay, a stored final refusal, or a problem.
    Answered(Response),
    /// The operation failed in a way that is not final; nothing is stored.
    Failed(E),
    /// The record store failed: answer 503 ([`Problem::StoreUnavailable`]).
    Unavailable(X),
}
