//! The HTTP layer: the router, shared state, and the request middleware.
//!
//! Handlers live in [`api`] (the admin API) and [`inbound`] (the public ingest routes of inbound
//! webhooks, outside the admin token); they parse input with the [`extract`] extractors into `vow-core`
//! types, call one [`Store`](vow_store::Store) method, and map the result to Svix's wire shapes.
//! [`request_context`] gives every request an id, logs every error once with its cause chain, and
//! makes 5xx bodies carry that id instead of internals.

pub mod api;
pub mod extract;
pub mod idempotency;
pub mod inbound;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json, Router};
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use vow_store::Store;

use crate::auth::{self, TokenHash};
use crate::error::{ApiError, ErrorReport};
use extract::BodyLimit;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The delivery queue (the same backend as `store`).
    pub queue: Arc<dyn vow_store::DeliveryQueue>,
    /// Inbound sources and events (the same backend as `store`).
    pub inbound: Arc<dyn vow_store::InboundStore>,
    /// API settings.
    pub settings: Arc<ApiSettings>,
    /// Wakes this process's delivery workers when work becomes due.
    pub wake: Arc<tokio::sync::Notify>,
    /// Wakes this process's inbound workers when an inbound event becomes due.
    pub inbound_wake: Arc<tokio::sync::Notify>,
    /// Where operational events go, when an operational webhook URL is configured.
    pub operational: Option<crate::delivery::operational::Operational>,
    /// The time handlers work in ([`AppState::now`]).
    pub clock: Clock,
    /// The keyed requests running on this node ([`idempotency::in_flight`]).
    pub in_flight: Arc<idempotency::in_flight::InFlight>,
}

/// The time the API works in: the wall clock at the store's (microsecond) precision, moved by an
/// offset that only tests set ([`Clock::advance`]), so that a test reaches an expiry hours away
/// without waiting for it. Clones share the offset.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_micros: Arc<AtomicI64>,
}

impl Clock {
    /// The wall clock plus the offset, truncated to microseconds.
    pub fn now(&self) -> DateTime<Utc> {
        let offset = TimeDelta::microseconds(self.offset_micros.load(Ordering::Relaxed));
        (Utc::now() + offset).trunc_subsecs(6)
    }

    /// Moves this clock (and every clone of it) `by` ahead (tests).
    pub fn advance(&self, by: TimeDelta) {
        let micros = by.num_microseconds().expect("a test's step fits in i64 µs");
        self.offset_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

/// Settings the handlers need.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Default grace period of a rotated-out secret.
    pub secret_rotation_grace: Duration,
    /// Days a payload is kept when a message does not say.
    pub payload_retention_days: i64,
    /// Route names on which `Idempotency-Key` is required (see [`idempotency::ROUTES`]).
    pub idempotency_required: Vec<String>,
    /// When a pull consumer's retryable failure is due again (the delivery schedule).
    pub retry_schedule: vow_core::RetrySchedule,
    /// How long `Idempotency-Key` records live (lease, replay, tombstone).
    pub idempotency: vow_store::idempotency::Settings,
    /// Rejection rows kept per source.
    pub rejections_kept: u32,
}

impl ApiSettings {
    /// Whether a request to `route` (e.g. `message.create`) must carry `Idempotency-Key`.
    pub fn requires_idempotency_key(&self, route: &str) -> bool {
        self.idempotency_required.iter().any(|r| r == route)
    }
}

impl AppState {
    /// The current time, at the store's (microsecond) precision ([`Clock::now`]).
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}

/// The whole HTTP application.
pub fn router(state: AppState, admin: TokenHash) -> Router {
    let limit = state.settings.max_body_bytes;
    crate::metrics::recorder();
    let authenticated = api::routes()
        .merge(idempotency::status::routes())
        .merge(crate::metrics::routes())
        .route_layer(middleware::from_fn_with_state(admin, auth::require_admin));
    Router::new()
        .merge(api::health::routes())
        .merge(inbound::routes())
        .merge(authenticated)
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .with_state(state)
        .layer(DefaultBodyLimit::max(limit))
        .layer(Extension(BodyLimit(limit)))
        .layer(middleware::from_fn(request_context))
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then finishes in-flight requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

const REQUEST_ID: &str = "x-request-id";

/// Gives the request an id (the client's `x-request-id` if sane, else a new one), logs any error
/// the handler returned with its cause chain, and writes 5xx bodies.
pub async fn request_context(req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string)
        .unwrap_or_else(|| format!("req_{}", ulid::Ulid::new()));
    let span =
        tracing::info_span!("request", id = %id, method = %req.method(), path = %req.uri().path());
    let mut response = next.run(req).instrument(span.clone()).await;
    let status = response.status();
    if let Some(report) = response.extensions().get::<ErrorReport>().cloned() {
        let _enter = span.enter();
        if status.is_server_error() {
            tracing::error!(status = status.as_u16(), error = ?report.chain, "request failed");
            response = server_error_body(status, report.code, &id);
        } else {
            tracing::info!(status = status.as_u16(), error = ?report.chain, "request rejected");
        }
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, v);
    }
    response
}

fn server_error_body(status: StatusCode, code: &str, id: &str) -> Response {
    let detail = if status == StatusCode::SERVICE_UNAVAILABLE {
        "the store is unavailable; retry later"
    } else {
        "internal error; quote the request id when reporting it"
    };
    (
        status,
        Json(serde_json::json!({ "code": code, "detail": detail, "requestId": id })),
    )
        .into_response()
}
