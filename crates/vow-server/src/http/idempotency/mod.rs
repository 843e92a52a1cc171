//! `Idempotency-Key` on every `POST` of the API that changes state (ADR 6; problems in
//! `docs/problems.md`; the routes in [`route`]).
//!
//! A handler takes [`Once`] as an extractor (before its body: an invalid key, or a
//! missing one where `VOW_REQUIRE_IDEMPOTENCY_KEY` names the route, is a 400 problem before
//! anything else is read), validates its body, resolves the application in the path (the
//! record's scope, so its uid and id share keys), and hands the rest of its work to
//! [`Once::run`] as an operation that ends in one [`Commit::write`]. Without a key the operation
//! simply runs. With one, the record's scope is (principal, application, `POST`, route
//! template, key), the principal being `admin` or `portal` ([`Principal::idempotency_scope`]);
//! its fingerprint covers the body, the path's other parameters and the query parameters the
//! route reads, and the operation runs at once: its write claims the key in its own store
//! transaction ([`vow_store::Messages::create_message_keyed`] with a fresh claim; no read of the
//! record first), so claim, write and stored response commit together. A key with a record rolls that
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
//! (`vow_idempotency::http::InFlight`): 409 at once, or after waiting (woken, holding nothing)
//! up to its `Prefer: wait`. A request with `Prefer: wait` begins its record before its
//! operation, so a wait that ends with the record free (released, or its lease expired) runs the
//! operation.
//!
//! The flow itself is `vow_idempotency::http::flow`, the one the crate's own entry points run;
//! this module is its adapter: vow's routes, its principals, its store as the flow's record
//! store (claiming the key in the write's own transaction), its metrics, and its handlers' write.
//!
//! # Layout
//! - `fault` (test-only feature `fault-hooks`): the crash tests' hook.
//! - `commit`: [`Commit`], the write that completes the record, and how the operation ended.
//! - `records`: vow's store as the flow's record store, counted in vow's metrics.
//! - [`route`]: the routes and what their fingerprint covers.
//! - [`respond`]: problems, stored responses, reading the headers.
//! - [`status`]: `GET /api/v1/idempotency-key/{key}`.

mod commit;
#[cfg(feature = "fault-hooks")]
mod fault;
mod records;
pub mod respond;
pub mod route;
pub mod status;

use std::future::Future;
use std::time::Duration;

use axum::extract::{FromRequestParts, MatchedPath, RawPathParams};
use axum::http::header::RETRY_AFTER;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use vow_core::AppId;
use vow_idempotency::http::{flow, Head, Keyed, Settled};
use vow_idempotency::Problem;
use vow_store::StoreError;

use crate::error::{ApiError, ApiResult};
use crate::http::principal::Principal;
use crate::state::AppState;
pub use commit::Commit;
use records::Records;
pub use respond::{json, problem};
pub use route::{Route, ROUTES};

/// The principal a request's records are scoped to, from the [`Principal`] the authentication
/// middleware left in its extensions.
fn principal_of(parts: &Parts) -> ApiResult<&'static str> {
    parts
        .extensions
        .get::<Principal>()
        .map(Principal::idempotency_scope)
        .ok_or_else(|| ApiError::Internal("a keyed route without a principal".into()))
}

/// The headers a keyed route reads, for its OpenAPI operation (`params(KeyedHeaders)`).
pub struct KeyedHeaders;

impl utoipa::IntoParams for KeyedHeaders {
    fn into_params(
        _: impl Fn() -> Option<utoipa::openapi::path::ParameterIn>,
    ) -> Vec<utoipa::openapi::path::Parameter> {
        use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
        use utoipa::PartialSchema;
        let header = |name: &str, description: &str| {
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Header)
                .description(Some(description))
                .schema(Some(String::schema()))
                .build()
        };
        vec![
            header(
                "idempotency-key",
                "Makes a retry safe: the same key with the same request answers with the first \
                 response (`Idempotent-Replayed: true`) instead of doing the work again.",
            ),
            header(
                "prefer",
                "`wait=<seconds>`: while the first request with this key is still running, wait up to \
                 that long for its outcome instead of getting 409 at once.",
            ),
        ]
    }
}

/// The `Idempotency-Key` side of a request to a keyed route, read from its head: the route,
/// the key, `Prefer: wait`, the target and query its fingerprint covers, and who sent it.
#[derive(Debug, Clone)]
pub struct Once {
    head: Head,
    principal: &'static str,
}

impl FromRequestParts<AppState> for Once {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let template = parts
            .extensions
            .get::<MatchedPath>()
            .map(MatchedPath::as_str);
        let principal = principal_of(parts).map_err(IntoResponse::into_response)?;
        let Some(route) = template.and_then(route::at) else {
            let detail = format!("{template:?} is not a route that honours Idempotency-Key");
            return Err(ApiError::Internal(detail.into()).into_response());
        };
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let (headers, query) = (&parts.headers, parts.uri.query());
        let head = Head::read(route, headers, query, route::APPLICATION, params.iter())
            .map_err(problem)?;
        if head.key().is_none() && state.settings.requires_idempotency_key(route.name) {
            return Err(problem(Problem::KeyMissing));
        }
        Ok(Self { head, principal })
    }
}

impl Once {
    /// Replays the outcome for at most `window` (and less when the configured retention is
    /// shorter), then frees the key with no tombstone, so a retry after it runs afresh: for an
    /// answer that stops being true, such as a pull claim whose leases end after `window`. The
    /// record is timed from before the operation runs, so it never outlives what it answers.
    pub fn replayed_within(self, window: Duration) -> Self {
        Self {
            head: self.head.replayed_within(window),
            principal: self.principal,
        }
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
        let configured = state.settings.idempotency;
        let keyed = match self.head.key() {
            Some(_) => {
                let application = app.map(|a| a.to_string());
                self.head
                    .keyed(self.principal, application, "POST", raw, configured)
            }
            None => None,
        };
        let Some(request) = keyed else {
            return op(Commit::plain(state.clone())).await;
        };
        let state = state.clone();
        tokio::spawn(async move { run_keyed(&state, request, op).await })
            .await
            .unwrap_or_else(|e| Err(ApiError::Internal(Box::new(e))))
    }
}

/// Runs `op` at most once for `request`, on the flow, over vow's store.
async fn run_keyed<F, Fut>(state: &AppState, request: Keyed, op: F) -> ApiResult<Response>
where
    F: FnOnce(Commit) -> Fut,
    Fut: Future<Output = ApiResult<Response>>,
{
    let records = Records(state);
    let in_flight = Some(&state.in_flight);
    let settled = flow::run(&records, &request, in_flight, |owner| {
        commit::owned(state, owner, op)
    })
    .await;
    match settled {
        Settled::Ran { answer, expires_at } => answer.map(|out| respond::expiring(out, expires_at)),
        Settled::Answered(out) => Ok(out),
        Settled::Failed(e) => Err(e),
        Settled::Unavailable(cause) => Ok(unavailable(&request, &cause)),
    }
}

/// 503 with `Retry-After`: the records cannot be read or written, or the store is over its
/// write capacity, so nothing runs (fail closed).
fn unavailable(request: &Keyed, cause: &StoreError) -> Response {
    if matches!(cause, StoreError::Overloaded { .. }) {
        metrics::counter!(crate::metrics::REQUESTS_SHED).increment(1);
    } else {
        tracing::warn!(error = %cause, key = %request.scope.key.hash(),
            "idempotency records unavailable; refusing the request");
    }
    let mut response = problem(Problem::StoreUnavailable);
    if let Some(secs) = cause.retry_after_secs() {
        response.headers_mut().insert(RETRY_AFTER, secs.into());
    }
    response
}
