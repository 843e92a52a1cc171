//! `Idempotency-Key` on every create route of the API (ADR 6; problems in `docs/problems.md`).
//!
//! A create handler takes [`Once`] as an extractor (before its body: an invalid key, or a
//! missing one where `VOW_REQUIRE_IDEMPOTENCY_KEY` names the route, is a 400 problem before
//! anything else is read), validates its body, resolves the application in the path (the
//! record's scope, so its uid and id share keys), and hands the rest of its work to
//! [`Once::run`] as an operation that ends in one [`Commit::write`]. Without a key the operation
//! simply runs. With one, the record's scope is (principal `admin`, application, `POST`, route
//! template, key), its fingerprint covers the body, the path's other parameters and the query
//! parameters the route reads, and the
//! operation runs at once: its write claims the key in its own store transaction
//! ([`vow_store::Store::apply`] with a fresh claim; no read of the record first), so claim,
//! write and stored response commit together. A key with a record rolls that write back, and the
//! record, begun then, answers:
//! - owner: the write commits with the rendered, stored response in ONE transaction (an
//!   abandoned claim is taken over inside it). A business refusal on the way (404 for an
//!   endpoint, 409 for a taken uid) is final too: stored, and replayed. A validation failure or
//!   an infrastructure failure stores nothing, so a retry runs;
//! - replay: the stored status, headers and body, with `Idempotent-Replayed: true`;
//! - reused: 422 with the differing pointers; in progress (or fenced by a takeover): 409 with
//!   `Retry-After`, or with `Prefer: wait=N` a wait of up to N s for the outcome; expired: 422;
//!   the record store unavailable: 503, failing closed.
//!
//! Every keyed answer carries `Idempotency-Expires`. The keyed operation runs in a task of its
//! own, so a client that hangs up cannot cancel it half-way: its retry finds the outcome.
//!
//! # Layout
//! - [`route`]: the routes and what their fingerprint covers.
//! - [`respond`]: problems, stored and replayed responses, reading the headers.
//! - [`status`]: `GET /api/v1/idempotency-key/{key}`.

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
use vow_core::AppId;
use vow_idempotency::{IdempotencyKey, Problem};
use vow_store::idempotency::{
    Begun, Completion, Fingerprint, FreshClaim, LeaseToken, Render, Scope, StoredResponse, Write,
    Written,
};
use vow_store::inbound::Source;
use vow_store::{Application, CreatedMessage, Delivery, Endpoint, EventType, StoreError};

use crate::error::{ApiError, ApiResult};
use crate::http::AppState;
pub use respond::{json, problem};
pub use route::{Route, ROUTES};

/// The one principal there is: the admin token.
const PRINCIPAL: &str = "admin";

/// How often a waiting request looks at the record again.
const WAIT_POLL: Duration = Duration::from_millis(50);

/// The `Idempotency-Key` side of a request to a create route, read from its head: the route,
/// the key, `Prefer: wait`, and the target and query its fingerprint covers.
#[derive(Debug)]
pub struct Once {
    route: &'static Route,
    key: Option<IdempotencyKey>,
    wait: Option<Duration>,
    target: String,
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
            query: route.canonical_query(parts.uri.query()),
        })
    }
}

impl Once {
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
    wait: Option<Duration>,
}

impl Keyed {
    async fn run<F, Fut>(self, state: &AppState, op: F) -> ApiResult<Response>
    where
        F: FnOnce(Commit) -> Fut,
        Fut: Future<Output = ApiResult<Response>>,
    {
        let now = state.now();
        // The key is claimed inside the write's own transaction: one commit for claim, write and
        // response, and no read of the record before it. The store takes an abandoned record
        // over there too; a key with any other record rolls the write back (`Fenced`), and the
        // record, begun then, gives the answer.
        let token = LeaseToken::generate();
        let progress = Arc::new(Mutex::new(Progress::Open));
        let key = self.scope.key.clone();
        let on_takeover = Box::new(move || {
            metrics::counter!(crate::metrics::IDEMPOTENT_TAKEOVERS).increment(1);
            tracing::info!(key = %key.hash(), "took over an expired idempotency claim");
        });
        let commit = Commit {
            state: state.clone(),
            record: Some(Owned {
                scope: self.scope.clone(),
                token,
                fresh: Some(FreshClaim {
                    fingerprint: self.fingerprint,
                    canonical_body: self.body.clone(),
                    on_takeover: Some(on_takeover),
                }),
                now,
                progress: progress.clone(),
            }),
        };
        let outcome = op(commit).await;
        let progress = *progress.lock().unwrap_or_else(|e| e.into_inner());
        if progress == Progress::Completed && hang_after_commit() {
            // Fault injection for the crash tests: committed, and never answered.
            std::future::pending::<()>().await;
        }
        let expires_at = state.settings.idempotency.deadlines(now).expires_at;
        match (progress, outcome) {
            (Progress::Completed, outcome) => outcome.map(|out| respond::expiring(out, expires_at)),
            // The key has a record: answer as it says.
            (Progress::Fenced, _) => Ok(self.lost_claim(state).await),
            // An answer reached without a write (a refusal, get-if-exists): final, stored.
            (Progress::Open, Ok(out)) => self.finish(state, out, now).await,
            (Progress::Open, Err(e @ (ApiError::NotFound(_) | ApiError::Conflict(_)))) => {
                let out = e.into_response();
                self.finish(state, out, now).await
            }
            (Progress::Open, Err(ApiError::Unavailable(cause))) => Ok(self.unavailable(&cause)),
            // Not final, so not stored; but a key with a record is answered by it, as it would
            // have been had the record been read before the operation.
            (Progress::Open, Err(e)) => self.recorded_or(state, e).await,
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
    /// (`vow_idempotency::http::answer`, with vow's replay, problem and takeover metrics).
    #[allow(
        clippy::result_large_err,
        reason = "the error is the response the caller sends at once; boxing it gains nothing"
    )]
    fn owned(&self, state: &AppState, begun: Begun) -> Result<LeaseToken, Response> {
        Err(match begun {
            Begun::Owner(token) => return Ok(token),
            Begun::TakenOver(token) => {
                metrics::counter!(crate::metrics::IDEMPOTENT_TAKEOVERS).increment(1);
                tracing::info!(key = %self.scope.key.hash(), "took over an expired idempotency claim");
                return Ok(token);
            }
            Begun::Replay {
                response,
                expires_at,
            } => respond::replayed(response, expires_at),
            Begun::Reused { differences } => problem(Problem::KeyReused { differences }),
            // The owner's `now` can be a hair later than this request's (they raced), which
            // would make the lease look longer than it is: never more than a whole lease.
            Begun::InProgress { retry_after_secs } => problem(Problem::InProgress {
                retry_after: retry_after_secs.min(state.settings.idempotency.lease.as_secs()),
            }),
            Begun::Expired { .. } => problem(Problem::KeyExpired),
            other => ApiError::Internal(format!("unknown idempotency outcome {other:?}").into())
                .into_response(),
        })
    }

    /// The answer when the key has a record, so this request's write was rolled back: its
    /// replay, 422, or 409 while it runs (or after `Prefer: wait`).
    async fn lost_claim(&self, state: &AppState) -> Response {
        match self.begin_waiting(state, state.now()).await {
            Ok(begun) => match self.owned(state, begun) {
                Err(answer) => answer,
                // The other request released the key again (it failed): this one's operation
                // is spent, so the client retries.
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

    /// Begins the record; while another request holds it and `wait` allows, polls until that
    /// request's outcome is stored (a replay), its lease ends (this request takes over), or the
    /// wait is over (409).
    async fn begin_waiting(
        &self,
        state: &AppState,
        now: DateTime<Utc>,
    ) -> Result<Begun, StoreError> {
        let until = tokio::time::Instant::now() + self.wait.unwrap_or_default();
        let mut at = now;
        loop {
            let begun = state
                .store
                .begin_idempotent(
                    &self.scope,
                    &self.fingerprint,
                    &self.body,
                    at,
                    &state.settings.idempotency,
                )
                .await?;
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if !matches!(begun, Begun::InProgress { .. }) || left.is_zero() {
                return Ok(begun);
            }
            if at == now {
                metrics::counter!(crate::metrics::IDEMPOTENT_WAITS).increment(1);
            }
            tokio::time::sleep(WAIT_POLL.min(left)).await;
            at = state.now();
        }
    }

    /// Stores `out` as the record's final response and answers it. The record is begun first;
    /// when the key has one (another request's), it answers instead.
    async fn finish(
        &self,
        state: &AppState,
        out: Response,
        now: DateTime<Utc>,
    ) -> ApiResult<Response> {
        let token = match self.begin_waiting(state, now).await {
            Ok(begun) => match self.owned(state, begun) {
                Ok(token) => token,
                Err(answer) => return Ok(answer),
            },
            Err(e) => return Ok(self.unavailable(&e)),
        };
        let (response, out) = respond::to_stored(out).await?;
        let settings = &state.settings.idempotency;
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

/// `VOW_TEST_HANG_AFTER_COMMIT=1`: a keyed request whose write committed never answers, so a
/// test can `kill -9` the process between the commit and the response. Read once; never set
/// outside tests.
fn hang_after_commit() -> bool {
    static HANG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HANG.get_or_init(|| std::env::var_os("VOW_TEST_HANG_AFTER_COMMIT").is_some_and(|v| v == "1"))
}

/// Where the owner's record stands after its operation ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// Not completed: the operation ended before its write committed, or without one.
    Open,
    /// Completed in the write's transaction.
    Completed,
    /// Another request took the record over; this one wrote nothing.
    Fenced,
}

/// The owner's record, as a [`Commit`] completes it.
struct Owned {
    scope: Scope,
    token: LeaseToken,
    fresh: Option<FreshClaim>,
    now: DateTime<Utc>,
    progress: Arc<Mutex<Progress>>,
}

/// The one write an operation ends in: with a key, it completes the record in the same store
/// transaction; without one it is the plain write.
pub struct Commit {
    state: AppState,
    record: Option<Owned>,
}

impl Commit {
    fn plain(state: AppState) -> Self {
        Self {
            state,
            record: None,
        }
    }

    /// The handler's state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Runs `write` in one store transaction, with the response `render` makes of its result
    /// stored in that transaction when there is a key, and wakes the delivery workers when the
    /// write queued work. Returns the result and the response to answer.
    pub async fn write<T: Produced>(
        self,
        write: Write,
        render: impl FnOnce(&T) -> StoredResponse + Send + 'static,
    ) -> ApiResult<(T, Response)> {
        let render = Render::From(Box::new(move |written: &Written| match T::view(written) {
            Some(value) => render(value),
            None => mismatch(written),
        }));
        self.commit(write, render).await
    }

    /// [`Commit::write`] for a write whose success answers `response`, rendered before it (a
    /// message create: its row is the request's values). With a key, the store claims the key
    /// with the response, and renders nothing inside the transaction.
    pub async fn write_answering<T: Produced>(
        self,
        write: Write,
        response: StoredResponse,
    ) -> ApiResult<(T, Response)> {
        self.commit(write, Render::Ready(response)).await
    }

    async fn commit<T: Produced>(self, write: Write, render: Render) -> ApiResult<(T, Response)> {
        let store = &self.state.store;
        let (written, response) = match self.record {
            None => {
                let (written, _) = store.apply(write, None).await?;
                let response = render.response(&written);
                (written, Some(response))
            }
            Some(owned) => {
                let completion = Completion {
                    scope: owned.scope,
                    token: owned.token,
                    fresh: owned.fresh,
                    now: owned.now,
                    settings: self.state.settings.idempotency,
                    render,
                };
                let applied = store.apply(write, Some(completion)).await;
                let mut progress = owned.progress.lock().unwrap_or_else(|e| e.into_inner());
                match applied {
                    Ok(applied) => {
                        *progress = Progress::Completed;
                        applied
                    }
                    Err(StoreError::Fenced) => {
                        *progress = Progress::Fenced;
                        return Err(ApiError::Internal(Box::new(StoreError::Fenced)));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        if written.queues_work() {
            self.state.wake.notify_one();
        }
        let response = response.ok_or_else(|| mismatch_error(&written))?;
        let value = T::take(written).ok_or_else(|| ApiError::Internal("write mismatch".into()))?;
        Ok((value, respond::stored(response)))
    }
}

/// What a [`Write`] produces, taken out of [`Written`] by type.
pub trait Produced: Sized + Send + 'static {
    /// The value, if `written` holds one of this type.
    fn view(written: &Written) -> Option<&Self>;
    /// The value, owned.
    fn take(written: Written) -> Option<Self>;
}

macro_rules! produced {
    ($($type:ty => $variant:ident),* $(,)?) => {$(
        impl Produced for $type {
            fn view(written: &Written) -> Option<&Self> {
                match written {
                    Written::$variant(value) => Some(value),
                    _ => None,
                }
            }
            fn take(written: Written) -> Option<Self> {
                match written {
                    Written::$variant(value) => Some(value),
                    _ => None,
                }
            }
        }
    )*};
}

produced!(
    Application => Application,
    EventType => EventType,
    Endpoint => Endpoint,
    CreatedMessage => Message,
    Delivery => Resent,
    u64 => Replayed,
    Source => Source,
);

impl Produced for () {
    fn view(written: &Written) -> Option<&Self> {
        matches!(written, Written::SecretRotated).then_some(&())
    }
    fn take(written: Written) -> Option<Self> {
        matches!(written, Written::SecretRotated).then_some(())
    }
}

/// A handler asked for another result than its write produces: a bug, answered 500.
fn mismatch(written: &Written) -> StoredResponse {
    tracing::error!(
        ?written,
        "a write produced another result than its handler renders"
    );
    StoredResponse {
        status: 500,
        headers: Vec::new(),
        body: Vec::new(),
        resource: None,
    }
}

fn mismatch_error(written: &Written) -> ApiError {
    ApiError::Internal(format!("a write produced {written:?}, not what its handler renders").into())
}
