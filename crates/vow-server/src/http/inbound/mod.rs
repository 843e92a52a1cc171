//! The public ingest routes of inbound webhooks (issue 5, ADR 7): `POST /in/{source_id}` and
//! `POST /in/t/{token}`, outside the admin token.
//!
//! A request is answered in this order: an unknown source is 404; a body over the configured
//! limit is 413; then the signature is verified on the exact raw bytes, before anything parses
//! them, with every current secret of the source (`vow_signature::provider::verify`): missing
//! or malformed → 400, wrong or stale (either direction) → 401, a source that cannot work →
//! 500. A delivery of a source that orders by version whose version is neither a number nor an
//! RFC 3339 time is 422 `version_unorderable` (vow will not guess an order). A verified provider handshake (Slack's `url_verification`, Discord's PING) is answered
//! and not stored. Everything else is claimed in ONE store transaction
//! ([`vow_store::inbound::InboundEvents::claim_inbound`]) and answered only once that has committed:
//! 200 for a new event or a duplicate (same id, same payload), 202 for a quarantined one (same
//! id, another payload; `source.event.quarantined` goes to the operational webhook), 409 for a
//! replay the source's replay guard refuses (a new id, signed content it accepted within its
//! window; nothing is stored, see [`replay`]), 503 with `Retry-After` when the store is over its
//! write capacity (graceful overload; nothing is stored, the provider retries). Every
//! refusal of a known source is recorded (reason, status, body size; never a secret, a
//! signature or the body) in the source's bounded log (its newest `inbound_rejections_kept`
//! rows, with exact counts by reason), and every refusal is counted
//! (`vow_inbound_rejections_total`).
//!
//! # Layout
//! - [`scheme`]: a source's stored scheme as a `vow_signature` scheme.
//! - [`identity`]: event id, account, version and entity; handshakes; which headers are kept.
//! - [`replay`]: what each scheme guarantees against replays; the replay guard's window.

pub mod identity;
pub mod replay;
pub mod scheme;

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use sha2::{Digest, Sha256};
use vow_core::{InboundEventId, RejectionId, SourceId};
use vow_signature::provider::{verify, HeaderFn, Request as Signed, Scheme};
use vow_store::inbound::{Claim, InboundEvent, NewInboundEvent, NewRejection, Source};
use vow_store::StoreResult;

use crate::error::ApiError;
use crate::metrics as names;
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The ingest routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(ingest_by_id))
        .routes(routes!(ingest_by_token))
}

/// Receive a provider's webhook for a source, by the source's id.
#[utoipa::path(post, path = "/in/{source_id}", tag = "Ingest", operation_id = "v1.ingest.by-id", request_body(content = String, description = "The provider's webhook, as it signed it.", content_type = "*/*"),
    responses((status = 200, description = "Received (or a duplicate of an event received before).", body = IngestOut), (status = 202, description = "Quarantined.", body = IngestOut)))]
async fn ingest_by_id(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
    request: Request,
) -> Response {
    let found = match SourceId::parse(&source_id) {
        Ok(id) => state.inbound.get_source(id).await,
        Err(_) => Ok(None),
    };
    ingest(state, found, request).await
}

/// Receive a provider's webhook for a source, by its ingest token.
#[utoipa::path(post, path = "/in/t/{token}", tag = "Ingest", operation_id = "v1.ingest.by-token", request_body(content = String, description = "The provider's webhook, as it signed it.", content_type = "*/*"),
    responses((status = 200, description = "Received (or a duplicate of an event received before).", body = IngestOut), (status = 202, description = "Quarantined.", body = IngestOut)))]
async fn ingest_by_token(
    State(state): State<AppState>,
    Path(token): Path<String>,
    request: Request,
) -> Response {
    let found = state.inbound.get_source_by_token(&token).await;
    ingest(state, found, request).await
}

/// Verifies, identifies and claims one delivery to the source `found`.
async fn ingest(state: AppState, found: StoreResult<Option<Source>>, request: Request) -> Response {
    let source = match found {
        Ok(Some(source)) => source,
        Ok(None) => {
            ::metrics::counter!(names::INBOUND_REJECTIONS, "reason" => "unknown_source")
                .increment(1);
            return refusal(StatusCode::NOT_FOUND, "unknown_source", "no such source");
        }
        Err(e) => return ApiError::from(e).into_response(),
    };
    let headers = request.headers().clone();
    let url = public_url(&headers, request.uri());
    let body = match Bytes::from_request(request, &state).await {
        Ok(body) => body,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let limit = state.settings.max_body_bytes as u64;
            let size = content_length(&headers).unwrap_or(limit).max(limit);
            let detail = format!("the body is over the limit of {limit} bytes");
            let refused = Refused::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", detail);
            return refused.record(&state, &source, size).await;
        }
        Err(e) => {
            let refused = Refused::new(StatusCode::BAD_REQUEST, "unreadable_body", e.to_string());
            return refused.record(&state, &source, 0).await;
        }
    };
    let scheme = match scheme::of(&source.fields) {
        Ok(scheme) => scheme,
        Err(e) => {
            let refused = Refused::new(StatusCode::INTERNAL_SERVER_ERROR, "invalid_config", e);
            return refused.record(&state, &source, body.len() as u64).await;
        }
    };
    let lookup = HeaderFn::new(|name: &str| headers.get(name).map(|v| v.as_bytes()));
    let now = state.now();
    let unix = u64::try_from(now.timestamp()).unwrap_or_default();
    let tolerance = source.fields.tolerance_secs.into();
    let signed = Signed::new(&lookup, &body, &url);
    let verified = match verify(&scheme, &source.fields.secrets, &signed, unix, tolerance) {
        Ok(verified) => verified,
        Err(e) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::UNAUTHORIZED);
            let refused = Refused::new(status, e.reason(), e);
            return refused.record(&state, &source, body.len() as u64).await;
        }
    };
    if let Some(reply) = identity::handshake(&scheme, &body) {
        return (StatusCode::OK, Json(reply)).into_response();
    }
    let who = identity::identify(&source.fields, &scheme, &verified, &lookup, &body);
    if let Some(detail) = identity::unorderable_version(&source.fields, &who) {
        let status = StatusCode::UNPROCESSABLE_ENTITY;
        let refused = Refused::new(status, "version_unorderable", detail);
        return refused.record(&state, &source, body.len() as u64).await;
    }
    let replay_guard = replay::guard(&source.fields, &scheme, &signed);
    let extra = match &scheme {
        Scheme::Hmac(config) => Some(config.signature_header()),
        _ => None,
    };
    let size = body.len() as u64;
    let new = NewInboundEvent {
        id: InboundEventId::new(),
        source_id: source.id,
        account: who.account,
        event_id: who.event_id,
        headers: identity::kept_headers(&headers, extra),
        sha256: hex::encode(Sha256::digest(&body)),
        payload: body.into(),
        version: who.version,
        entity: who.entity,
        replay_guard,
        now,
    };
    match state.inbound.claim_inbound(new).await {
        Ok(claim) => acknowledge(&state, &source, &scheme, claim, size).await,
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The 409 for a delivery the replay guard refused (nothing was stored), recorded as a
/// rejection `replayed`; the detail names the event the same signed content was accepted as.
async fn refuse_replay(
    state: &AppState,
    source: &Source,
    earlier: &InboundEvent,
    window_secs: u32,
    size: u64,
) -> Response {
    let detail = format!(
        "the same signed content was accepted as inbound event {} at {}; within the source's \
         replay window ({window_secs} s) a delivery of it under a new event id is refused as a \
         replay",
        earlier.id,
        earlier.received_at.to_rfc3339(),
    );
    Refused::new(StatusCode::CONFLICT, "replayed", detail)
        .record(state, source, size)
        .await
}

/// The 2xx for a committed claim, counted; a quarantine is reported first; a refused replay
/// is a 409. A new event of a source with destinations wakes the inbound workers.
/// What a provider hears back for a delivery vow took.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct IngestOut {
    /// The inbound event (for a duplicate: the one it duplicates).
    id: InboundEventId,
    /// `received`, `duplicate` or `quarantined`.
    outcome: &'static str,
}

async fn acknowledge(
    state: &AppState,
    source: &Source,
    scheme: &Scheme,
    claim: Claim,
    size: u64,
) -> Response {
    let (status, outcome, counter, event) = match claim {
        Claim::Received(event) => (StatusCode::OK, "received", names::INBOUND_RECEIVED, event),
        Claim::Duplicate(event) => (
            StatusCode::OK,
            "duplicate",
            names::INBOUND_DUPLICATES,
            event,
        ),
        Claim::Replayed(earlier) => {
            let window = replay::window_secs(&source.fields, scheme).unwrap_or_default();
            return refuse_replay(state, source, &earlier, window, size).await;
        }
        Claim::Quarantined(event) => {
            report_quarantine(state, &event).await;
            (
                StatusCode::ACCEPTED,
                "quarantined",
                names::INBOUND_QUARANTINED,
                event,
            )
        }
    };
    ::metrics::counter!(counter).increment(1);
    if !source.fields.destinations.is_empty() && outcome == "received" {
        state.inbound_wake.notify_one();
    }
    (
        status,
        Json(IngestOut {
            id: event.id,
            outcome,
        }),
    )
        .into_response()
}

/// Logs the quarantine and, with an operational webhook, stores `source.event.quarantined`
/// before the 202 goes out (a rare path: the alert is durable when the provider hears back).
async fn report_quarantine(state: &AppState, event: &InboundEvent) {
    tracing::warn!(source = %event.source_id, event = %event.id,
        conflicts_with = ?event.conflicts_with, "inbound event id reused with another payload; quarantined");
    if let Some(operational) = &state.operational {
        operational.source_event_quarantined(event).await;
    }
}

/// A refusal: its status, stable reason code and explanation (never secret material).
struct Refused {
    status: StatusCode,
    reason: &'static str,
    detail: String,
}

impl Refused {
    fn new(status: StatusCode, reason: &'static str, detail: impl ToString) -> Self {
        Self {
            status,
            reason,
            detail: detail.to_string(),
        }
    }

    /// Counts it, records it against `source` (a failure to record is logged, the refusal
    /// still answered), and answers it.
    async fn record(self, state: &AppState, source: &Source, body_size: u64) -> Response {
        ::metrics::counter!(names::INBOUND_REJECTIONS, "reason" => self.reason).increment(1);
        if self.status.is_server_error() {
            tracing::warn!(source = %source.id, reason = self.reason, detail = %self.detail,
                "an inbound source is misconfigured; its deliveries are refused");
        } else {
            tracing::info!(source = %source.id, reason = self.reason, status = self.status.as_u16(),
                "inbound request refused");
        }
        let rejection = NewRejection {
            id: RejectionId::new(),
            source_id: source.id,
            reason: self.reason.to_owned(),
            status: self.status.as_u16(),
            body_size,
            now: state.now(),
        };
        let keep = state.settings.rejections_kept;
        if let Err(e) = state.inbound.record_rejection(rejection, keep).await {
            tracing::warn!(error = %e, source = %source.id, "could not record an inbound rejection");
        }
        refusal(self.status, self.reason, &self.detail)
    }
}

/// `{"code", "detail"}` with `status`.
fn refusal(status: StatusCode, code: &str, detail: &str) -> Response {
    (status, Json(json!({ "code": code, "detail": detail }))).into_response()
}

/// The URL the provider addressed (Square and Twilio sign it): the forwarded scheme and host
/// when a proxy says, else `http` and `Host`, with the request's path and query.
fn public_url(headers: &HeaderMap, uri: &Uri) -> String {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let proto = text("x-forwarded-proto").unwrap_or("http");
    let host = text("x-forwarded-host")
        .or_else(|| text(header::HOST.as_str()))
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .unwrap_or("localhost");
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    format!("{proto}://{host}{path}")
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_url_follows_the_proxy_headers_or_the_host() {
        let uri: Uri = "/in/src_1?x=1".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "vow.local:8071".parse().unwrap());
        assert_eq!(
            public_url(&headers, &uri),
            "http://vow.local:8071/in/src_1?x=1"
        );
        headers.insert("x-forwarded-proto", "https".parse().unwrap());
        headers.insert("x-forwarded-host", "hooks.example".parse().unwrap());
        assert_eq!(
            public_url(&headers, &uri),
            "https://hooks.example/in/src_1?x=1"
        );
    }
}
