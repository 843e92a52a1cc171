//! The HTTP layer: the router and the request middleware. The state handlers share is
//! [`crate::state`] (re-exported here).
//!
//! Handlers live in [`api`] (the management API, for the admin token and, within their
//! application, app portal tokens: [`principal`], [`portal_scope`]), [`inbound`] (the public
//! ingest routes of inbound webhooks, outside any token) and [`console`] (the operator console's
//! pages, behind their own session); they parse input with the [`extract`] extractors into
//! `vow-core` types, call one [`Store`](vow_store::Store) method, and map the result to Svix's
//! wire shapes.
//! Every route but the console's is declared with its OpenAPI operation ([`openapi`]), served at
//! `GET /api/v1/openapi.json` and rendered for people at `GET /docs` ([`reference`]); a query
//! parameter an operation does not declare is refused ([`query_guard`]).
//! [`request_context`] gives every request an id, logs every error once with its cause chain, and
//! makes 5xx bodies carry that id instead of internals; it logs paths with any portal token in
//! them masked. Its `http.request` span continues the caller's trace (`traceparent`) and names
//! the route template and the status.

pub mod api;
pub mod console;
pub mod extract;
pub mod idempotency;
pub mod inbound;
pub mod openapi;
pub mod portal_scope;
pub mod principal;
pub mod query_guard;
pub mod reference;

pub use crate::state::{ApiSettings, AppState, Clock};

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use axum::{Extension, Json, Router};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::auth::TokenHash;
use crate::error::{ApiError, ErrorReport, HttpErrorOut, OVERLOADED};
use extract::BodyLimit;

/// The whole HTTP application.
pub fn router(state: AppState, admin: TokenHash) -> Router {
    let limit = state.settings.max_body_bytes;
    let admission = state.admission.clone();
    let console = console::routes(
        admin,
        state.settings.console.clone(),
        &state.settings.portal,
    );
    crate::metrics::recorder();
    let gate = principal::Gate::new(admin, state.clone());
    let authenticated = openapi::require_bearer(
        api::routes()
            .merge(idempotency::status::routes())
            .merge(crate::metrics::routes()),
    )
    .route_layer(middleware::from_fn_with_state(
        gate,
        principal::authenticate,
    ));
    let (api, doc) = openapi::base()
        .merge(api::health::routes())
        .merge(inbound::routes())
        .merge(authenticated)
        .split_for_parts();
    let doc = openapi::finish(doc);
    let api = api.route_layer(middleware::from_fn_with_state(
        query_guard::DeclaredQuery::of(&doc),
        query_guard::refuse_undeclared,
    ));
    Router::new()
        .merge(api)
        .merge(openapi::routes(&doc))
        .merge(console)
        .route_layer(middleware::from_fn(crate::metrics::time_request))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .with_state(state)
        .layer(middleware::from_fn_with_state(
            admission,
            crate::admission::shed,
        ))
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
    // The peer address lets the console slow repeated failed logins per client.
    let app = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    // Small writes go out at once (a stream's events, a short answer), not after the peer's
    // delayed acknowledgement of the previous one.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    });
    axum::serve(listener, app)
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
    let path = crate::portal::redact_path(req.uri().path());
    let span = tracing::info_span!(
        "http.request",
        id = %id,
        method = %req.method(),
        path = %path,
        route = tracing::field::Empty,
        status = tracing::field::Empty,
    );
    crate::telemetry::trace_context::continue_from(&span, req.headers());
    let mut response = next.run(req).instrument(span.clone()).await;
    let status = response.status();
    span.record("status", status.as_u16());
    if let Some(report) = response.extensions().get::<ErrorReport>().cloned() {
        let _enter = span.enter();
        if report.code == OVERLOADED {
            // Shedding is vow working as configured, not a failure: counted, not logged.
            metrics::counter!(crate::metrics::REQUESTS_SHED).increment(1);
            response = server_error_body(status, &report, &id);
        } else if status.is_server_error() {
            tracing::error!(status = status.as_u16(), error = ?report.chain, "request failed");
            response = server_error_body(status, &report, &id);
        } else {
            tracing::info!(status = status.as_u16(), error = ?report.chain, "request rejected");
        }
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, v);
    }
    response
}

fn server_error_body(status: StatusCode, report: &ErrorReport, id: &str) -> Response {
    let detail = match (status, report.code) {
        (_, OVERLOADED) => "vow is over its write capacity; nothing was written, retry later",
        (StatusCode::SERVICE_UNAVAILABLE, _) => "the store is unavailable; retry later",
        _ => "internal error; quote the request id when reporting it",
    };
    let body = HttpErrorOut::server_error(report.code, detail, id);
    let mut response = (status, Json(body)).into_response();
    if let Some(secs) = report.retry_after {
        response.headers_mut().insert(RETRY_AFTER, secs.into());
    }
    response
}
