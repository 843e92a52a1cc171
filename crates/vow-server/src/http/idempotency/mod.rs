//! `Idempotency-Key` on every `POST` of the API that changes state (ADR 6; problems in
//! `docs/problems.md`; the routes in [`route`]).
//!
//! A handler takes [`Once`] as an extractor (before its body: an invalid key, or a
//! missing one where `VOW_REQUIRE_IDEMPOTENCY_KEY` names the route, is a 400 problem before
//! anything else is read), validates its body, resolves the application in the path (the
//! record's scope, so its uid and id share keys), and hands the rest of its work to
//! [`Once::run`] as an operation that ends in one [`Commit::write`]. Without a key the operation
//! simply runs. With one, the record's scope is (principal `admin`, application, `POST`, route
//! template, key), its fingerprint covers the body, the path's other parameters and the query
//! parameters the route reads, and the
//! operation runs at once: its write claims the key in its own store transaction
//! ([`vow_store::Messages::create_message_keyed`] with a fresh claim; no read of the record
//! first), so claim, write and stored response commit together. A key with a record rolls that
//! write back, and the record, begun then, answers:
//! - owner: the write commits with the rendered, stored response in ONE transaction (an
//!   abandoned claim is taken over inside it). A business refusal on the way (404 for an
//!   endpoint, 409 for a taken uid) is final too: stored, and replayed. A validation failure or
//!   an infrastructure failure stores nothing, so a retry runs;
//! - replay: the stored status, headers and body, with `Idempotent-Replayed: true`;
//! - reused: 422 with the differing pointers; in progress (or fenced by a takeover): 409 with
//!   `Retry-After`, or with `Prefer: wait=N` a wait of up to N s for the outcome; expired: 422;
//!   the record store unavailable: 503, failing closed.
//!
//! Every keyed answer carries `Idempotency-Expires`. An answer that stops being true before the
//! configured retention ends (a pull claim's leases) is replayed only as long as it holds
//! ([`Once::replayed_within`]); then the key is free again. The keyed operation runs in a task of its
//! own, so a client that hangs up cannot cancel it half-way: its retry finds the outcome.
//!
//! A duplicate of a request in flight on this node is answered before it touches the store
//! ([`in_flight`]): 409 at once, or after waiting (woken, holding nothing) up to its
//! `Prefer: wait`. A request with `Prefer: wait` begins its record before its operation, so a
//! wait that ends with the record free (released, or its lease expired) runs the operation.
//!
//! # Layout
//! - [`in_flight`]: the keyed requests running on this node.
//! - `fault` (test-only feature `fault-hooks`): the crash tests' hook.
//! - `commit`: [`Commit`], the write that completes the record.
//! - [`route`]: the routes and what their fingerprint covers.
//! - [`respond`]: problems, stored and replayed responses, reading the headers.
//! - [`status`]: `GET /api/v1/idempotency-key/{key}`.

mod commit;
#[cfg(feature = "fault-hooks")]
mod fault;
pub mod in_flight;
pub mod respond;
pub mod route;
pub mod status;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{FromRequestParts, MatchedPath, RawPathParams};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use tokio::time::Instant;
use vow_core::AppId;
use vow_idempotency::http::{begin_until, next, Next};
use vow_idempotency::{IdempotencyKey, Problem};
use vow_store::idempotency::{
    Begun, Fingerprint, FreshClaim, KeyState, LeaseToken, Scope, Settings,
};
use vow_store::StoreError;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
pub use commit::Commit;
use commit::{Owned, Progress};
use in_flight::Entered;
pub use respond::{json, problem};
pub use route::{Route, ROUTES};

/// The one principal there is: the admin token.
const PRINCIPAL: &str = "admin";

/// The `Idempotency-Key` side of a request to a keyed route, read from its head: the route,
/// the key, `Prefer: wait`, and the target and query its fingerprint covers.
#[derive(Debug, Clone)]
pub struct Once {
    route: &'static Route,
    key: Option<IdempotencyKey>,
    wait: Option<Duration>,
    target: String,
    window: Option<Duration>,
    query: String,
}

impl FromRequestParts<AppState> for Once {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let template = parts
            .extensions
            .get::<MatchedPath>()
            .map(MatchedPath::as_str);
        let Some(route) = template.and_then(Route::at) else {
            let detail = format!("{template:?} is not a route that honours Idempotency-Key");
            return Err(ApiError::Internal(detail.into()).into_response());
        };
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let key = match respond::key(&parts.headers) {
            Ok(None) if state.settings.requires_idempotency_key(route.name) => {
                return Err(problem(Problem::KeyMissing))
            }
            Ok(key) => key,
            Err(invalid) => return Err(problem(invalid)),
        };
        Ok(Self {
            route,
            key,
            wait: respond::prefer_wait(&parts.headers),
            target: route.target(params.iter()),
            window: None,
            query: route.canonical_query(parts.uri.query()),
        })
    }
}

impl Once {
    /// Replays the outcome for at most `window` (and less when the configured retention is
    /// shorter), then frees the key with no tombstone, so a retry after it runs afresh: for an
    /// answer that stops being true, such as a pull claim whose leases end after `window`. The
    /// record is timed from before the operation runs, so it never outlives what it answers.
    pub fn replayed_within(self, window: Duration) -> Self {
        Self {
            window: Some(window),
            ..self
        }
    }

    /// How long this request's record lives: the configuration's, bounded by the window.
    fn settings(&self, state: &AppState) -> Settings {
        let mut settings = state.settings.idempotency;
        if let Some(window) = self.window {
            settings.ttl = settings.ttl.min(window);
            settings.tombstone = Duration::ZERO;
        }
        settings
    }

    /// Runs `op` at most once per key (see the module docs). `app` is the application the
    /// route's path names, resolved; `raw` the body as sent.
    pub async fn run<F, Fut>(
        self,
        state: &AppState,
        app: Option<AppId>,
        raw: &[u8],
        op: F,
    ) -> ApiResult<Response>
    where
        F: FnOnce(Commit) -> Fut + Send + 'static,
        Fut: Future<Output = ApiResult<Response>> + Send + 'static,
    {
        let settings = self.settings(state);
        let Some(key) = self.key else {
            return op(Commit::plain(state.clone())).await;
        };
        let scope = Scope {
            principal: PRINCIPAL.into(),
            application: app.map(|a| a.to_string()),
            method: "POST".into(),
            route: self.route.template.into(),
            key,
        };
        let (fingerprint, body) = Fingerprint::of_request("POST", &self.target, &self.query, raw);
        let request = Keyed {
            fingerprint,
            body,
            scope,
            wait: self.wait,
            until: Instant::now() + self.wait.unwrap_or_default(),
            settings,
        };
        let state = state.clone();
        tokio::spawn(async move { request.run(&state, op).await })
            .await
            .unwrap_or_else(|e| Err(ApiError::Internal(Box::new(e))))
    }
}

/// A request with a key, ready to begin its record.
struct Keyed {
    scope: Scope,
    fingerprint: Fingerprint,
    body: String,
    /// `Prefer: wait`, as sent.
    wait: Option<Duration>,
    /// When a wait for another request's outcome ends (now, without `Prefer: wait`).
    until: Instant,
    /// How long its record lives ([`Once::settings`]).
    settings: Settings,
}

impl Keyed {
    /// Runs `op` at most once for the key. A duplicate of a request running on this node waits
    /// for it (up to `Prefer: wait`, holding no store connection) and answers 409 if it is still
    /// running then. Without `Prefer: wait`, the key is claimed in the write's own transaction
    /// (the hot path); with it, the record is begun first, so a wait that ends with this request
    /// owning the record (the holder released it or its lease ran out) runs `op`.
    async fn run<F, Fut>(self, state: &AppState, op: F) -> ApiResult<Response>
    where
        F: FnOnce(Commit) -> Fut,
        Fut: Future<Output = ApiResult<Response>>,
    {
        let mut counted = false;
        let _running = loop {
            match state.in_flight.enter(&self.scope) {
                Entered::Running(running) => break running,
                Entered::Busy(busy) => {
                    if !counted && Instant::now() < self.until {
                        counted = true;
                        metrics::counter!(crate::metrics::IDEMPOTENT_WAITS).increment(1);
                    }
                    if !busy.finished_by(self.until).await {
                        return Ok(self.running_here(state).await);
                    }
                }
            }
        };
        if self.wait.is_some_and(|w| !w.is_zero()) {
            let now = state.now();
            let token = match self.begin_waiting(state, now).await {
                Ok(begun) => match self.owned(state, begun) {
                    Ok(token) => token,
                    Err(answer) => return Ok(answer),
                },
                Err(e) => return Ok(self.unavailable(&e)),
            };
            return self.execute(state, op, token, None, state.now()).await;
        }
        // The key is claimed inside the write's own transaction: one commit for claim, write and
        // response, and no read of the record before it. The store takes an abandoned record
        // over there too; a key with any other record (or, on PostgreSQL, one another
        // transaction holds) rolls the write back (`Fenced`), and the record, begun then, gives
        // the answer.
        let key = self.scope.key.clone();
        let on_takeover = Box::new(move || took_over(&key));
        let fresh = FreshClaim {
            fingerprint: self.fingerprint,
            canonical_body: self.body.clone(),
            on_takeover: Some(on_takeover),
        };
        let now = state.now();
        self.execute(state, op, LeaseToken::generate(), Some(fresh), now)
            .await
    }

    /// Runs `op` as the owner of the record `token` holds: begun already (`fresh: None`), or
    /// claimed by its write (`fresh`); then answers by where the record stands.
    async fn execute<F, Fut>(
        &self,
        state: &AppState,
        op: F,
        token: LeaseToken,
        fresh: Option<FreshClaim>,
        now: DateTime<Utc>,
    ) -> ApiResult<Response>
    where
        F: FnOnce(Commit) -> Fut,
        Fut: Future<Output = ApiResult<Response>>,
    {
        let begun = fresh.is_none().then(|| token.clone());
        let progress = Arc::new(Mutex::new(Progress::Open));
        let commit = Commit {
            state: state.clone(),
            record: Some(Owned {
                scope: self.scope.clone(),
                token,
                fresh,
                now,
                settings: self.settings,
                progress: progress.clone(),
            }),
        };
        let outcome = op(commit).await;
        let progress = *progress.lock().unwrap_or_else(|e| e.into_inner());
        #[cfg(feature = "fault-hooks")]
        if progress == Progress::Completed && fault::hang_after_commit() {
            // Fault injection for the crash tests: committed, and never answered.
            std::future::pending::<()>().await;
        }
        let expires_at = self.settings.deadlines(now).expires_at;
        match (progress, outcome) {
            (Progress::Completed, outcome) => outcome.map(|out| respond::expiring(out, expires_at)),
            // The key has a record: answer as it says.
            (Progress::Fenced, _) => Ok(self.lost_claim(state).await),
            // An answer reached without a write (a refusal, get-if-exists): final, stored.
            (Progress::Open, Ok(out)) => self.finish(state, out, now, begun).await,
            (Progress::Open, Err(e @ (ApiError::NotFound(_) | ApiError::Conflict(_)))) => {
                let out = e.into_response();
                self.finish(state, out, now, begun).await
            }
            (Progress::Open, Err(e)) => {
                if let Some(token) = &begun {
                    // Not final: the begun record goes, so a retry runs.
                    self.release(state, token).await;
                }
                match e {
                    ApiError::Unavailable(cause) => Ok(self.unavailable(&cause)),
                    e if begun.is_some() => Err(e),
                    // Not final, so not stored; but a key with a record is answered by it, as
                    // it would have been had the record been read before the operation.
                    e => self.recorded_or(state, e).await,
                }
            }
        }
    }

    /// The answer to a duplicate of a request still running on this node once its wait is
    /// over: the key's final answer when its record has one (a replay, 422), else 409.
    async fn running_here(&self, state: &AppState) -> Response {
        match state
            .store
            .idempotency_status(&self.scope, state.now())
            .await
        {
            Ok(Some(status)) if status.state != KeyState::InProgress => {
                self.lost_claim(state).await
            }
            Ok(_) => problem(Problem::InProgress { retry_after: 1 }),
            Err(cause) => self.unavailable(&cause),
        }
    }

    /// The answer of the key's record when it has one, else `e` (an outcome that is not final).
    async fn recorded_or(&self, state: &AppState, e: ApiError) -> ApiResult<Response> {
        match state
            .store
            .idempotency_status(&self.scope, state.now())
            .await
        {
            Ok(None) => Err(e),
            Ok(Some(_)) => match self.begin_waiting(state, state.now()).await {
                Ok(begun) => match self.owned(state, begun) {
                    Err(answer) => Ok(answer),
                    // Freed meanwhile (or abandoned): this request's outcome stands, unstored.
                    Ok(token) => {
                        self.release(state, &token).await;
                        Err(e)
                    }
                },
                Err(cause) => Ok(self.unavailable(&cause)),
            },
            Err(cause) => Ok(self.unavailable(&cause)),
        }
    }

    /// The lease token when `begun` lets this request run the operation, else the answer
    /// (`vow_idempotency::http::next` decides; vow counts replays, problems and takeovers).
    #[allow(
        clippy::result_large_err,
        reason = "the error is the response the caller sends at once; boxing it gains nothing"
    )]
    fn owned(&self, state: &AppState, begun: Begun) -> Result<LeaseToken, Response> {
        match next(begun, &state.settings.idempotency) {
            Next::Run { token, taken_over } => {
                if taken_over {
                    took_over(&self.scope.key);
                }
                Ok(token)
            }
            Next::Replay {
                response,
                expires_at,
            } => Err(respond::replayed(response, expires_at)),
            Next::Refuse(refusal) => Err(problem(refusal)),
        }
    }

    /// The answer when the key has a record, so this request's write was rolled back: its
    /// replay, 422, or 409 while it runs (or after `Prefer: wait`).
    async fn lost_claim(&self, state: &AppState) -> Response {
        match self.begin_waiting(state, state.now()).await {
            Ok(begun) => match self.owned(state, begun) {
                Err(answer) => answer,
                // The record was freed between this request's claim and its begin (the other
                // request failed, or its lease ended just then): this one's operation is spent,
                // so the client retries. A request with `Prefer: wait` begins first instead,
                // and runs its operation when its wait ends this way.
                Ok(token) => {
                    self.release(state, &token).await;
                    problem(Problem::InProgress { retry_after: 1 })
                }
            },
            Err(e) => self.unavailable(&e),
        }
    }

    /// Deletes the record `token` holds, so a retry runs.
    async fn release(&self, state: &AppState, token: &LeaseToken) {
        if let Err(e) = state.store.release_idempotent(&self.scope, token).await {
            tracing::warn!(error = %e, key = %self.scope.key.hash(),
                "could not release an idempotency record; it frees when its lease ends");
        }
    }

    /// Begins the record; while another request (on another node, or one that began it
    /// through the store) holds it and the wait allows, polls until that request's outcome is
    /// stored (a replay), its lease ends or it is released (this request owns the record), or
    /// the wait is over (409). Each poll is one short statement: nothing is held between them.
    async fn begin_waiting(
        &self,
        state: &AppState,
        now: DateTime<Utc>,
    ) -> Result<Begun, StoreError> {
        begin_until(self.until, |polls| {
            let at = if polls == 0 { now } else { state.now() };
            if polls == 1 {
                metrics::counter!(crate::metrics::IDEMPOTENT_WAITS).increment(1);
            }
            let (scope, settings) = (&self.scope, &self.settings);
            state
                .store
                .begin_idempotent(scope, &self.fingerprint, &self.body, at, settings)
        })
        .await
    }

    /// Stores `out` as the record's final response and answers it. Unless `begun` holds the
    /// record already, it is begun first; when the key has one (another request's), it answers
    /// instead.
    async fn finish(
        &self,
        state: &AppState,
        out: Response,
        now: DateTime<Utc>,
        begun: Option<LeaseToken>,
    ) -> ApiResult<Response> {
        let token = match begun {
            Some(token) => token,
            None => match self.begin_waiting(state, now).await {
                Ok(begun) => match self.owned(state, begun) {
                    Ok(token) => token,
                    Err(answer) => return Ok(answer),
                },
                Err(e) => return Ok(self.unavailable(&e)),
            },
        };
        let (response, out) = respond::to_stored(out).await?;
        let settings = &self.settings;
        match state
            .store
            .complete_idempotent(&self.scope, &token, response, now, settings)
            .await
        {
            Ok(()) | Err(StoreError::Fenced) => {}
            Err(e) => tracing::warn!(error = %e, key = %self.scope.key.hash(),
                "could not store a final outcome; a retry will run the request again"),
        }
        Ok(respond::expiring(out, settings.deadlines(now).expires_at))
    }

    /// 503: the records cannot be read or written, so nothing runs (fail closed).
    fn unavailable(&self, cause: &StoreError) -> Response {
        tracing::warn!(error = %cause, key = %self.scope.key.hash(),
            "idempotency records unavailable; refusing the request");
        problem(Problem::StoreUnavailable)
    }
}

/// Counts and logs a claim of `key` taken over after its first request's lease ran out.
fn took_over(key: &IdempotencyKey) {
    metrics::counter!(crate::metrics::IDEMPOTENT_TAKEOVERS).increment(1);
    tracing::info!(key = %key.hash(), "took over an expired idempotency claim");
}
