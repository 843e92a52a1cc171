//! The request that forwards one inbound event to one destination: the provider's exact
//! bytes, its non-secret headers (credentials and signatures were never stored), and vow's
//! Standard Webhooks signature made with the destination's secret. A relay destination's
//! (`vow listen --source`, [`crate::relay`]) is handed to its listener through the [`Hub`]
//! instead, the same bytes signed the same way; with no listener connected it fails as an
//! unreachable destination does (retryable: nothing was sent).
//!
//! Each forward is an `inbound.forward` span, a child of the provider's `traceparent` when it
//! sent one; the destination gets the forward's own trace context ([`trace_context`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderValue};
use bytes::Bytes;
use vow_core::SignatureStyle;
use vow_egress::{EgressClient, EgressError, EgressResponse};
use vow_store::inbound::{Destination, InboundContent, InboundEvent};
use vow_store::relay::RelayTarget;
use vow_store::EndpointSecret;

use tracing::Instrument;

use crate::delivery::request;
use crate::relay::{is_relay, Handed, Hub};
use crate::telemetry::trace_context::{self, traced, TRACEPARENT};

/// The header naming the source an event came through.
pub const SOURCE_HEADER: &str = "vow-source";
/// The header carrying the provider's own event id.
pub const EVENT_ID_HEADER: &str = "vow-event-id";

/// Stored headers that describe the provider's connection to vow, not the event: never
/// forwarded.
const HOP_HEADERS: [&str; 12] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "accept-encoding",
    "x-forwarded-for",
    "x-forwarded-host",
];

/// Whom a forward goes through: the SSRF-guarded HTTP client, or a relay destination's listener.
#[derive(Clone)]
pub struct Senders {
    /// HTTP destinations.
    pub egress: EgressClient,
    /// Relay destinations.
    pub relay: Arc<Hub>,
}

/// Sends `event` to `destination`, signed at unix time `timestamp`, within an `inbound.forward`
/// span.
pub async fn send(
    senders: &Senders,
    timeout: Duration,
    event: &InboundEvent,
    content: &InboundContent,
    destination: &Destination,
    timestamp: u64,
) -> Result<EgressResponse, EgressError> {
    let span = traced(|| {
        tracing::info_span!(
            "inbound.forward",
            source_id = %event.source_id,
            event_id = %event.id,
            destination_id = %destination.id,
            status_code = tracing::field::Empty,
        )
    });
    let provider = content
        .headers
        .iter()
        .find(|(name, _)| name == TRACEPARENT)
        .map(|(_, value)| value.as_str());
    trace_context::follow(&span, provider);
    let sent = async {
        let mut headers = headers(event, content, destination, timestamp)?;
        trace_context::outbound(&span, provider, &mut headers);
        forward(senders, timeout, event, content, destination, headers).await
    }
    .instrument(span.clone())
    .await;
    if let Ok(response) = &sent {
        span.record("status_code", response.status);
    }
    sent
}

/// Sends the signed `headers` and `event`'s bytes to `destination`.
async fn forward(
    senders: &Senders,
    timeout: Duration,
    event: &InboundEvent,
    content: &InboundContent,
    destination: &Destination,
    headers: HeaderMap,
) -> Result<EgressResponse, EgressError> {
    if is_relay(&destination.url) {
        let handed = Handed {
            target: RelayTarget::Destination {
                source: event.source_id,
                id: destination.id,
            },
            msg_id: event.id.to_string(),
            event_type: event.event_id.as_deref().unwrap_or("inbound"),
            attempt: event.attempts,
        };
        let relayed = senders
            .relay
            .attempt(handed, &headers, &content.payload, timeout)
            .await;
        return relayed.unwrap_or_else(|| {
            let reason = "no `vow listen` is connected to this relay destination";
            Err(EgressError::Connect {
                reason: reason.into(),
                source: reason.into(),
            })
        });
    }
    let url = url::Url::parse(&destination.url).map_err(|e| EgressError::InvalidUrl {
        reason: e.to_string(),
    })?;
    let body = Bytes::copy_from_slice(&content.payload);
    senders
        .egress
        .post(&url, headers, body, Some(timeout))
        .await
}

/// The signed headers of `event` for `destination` at unix time `timestamp`.
fn headers(
    event: &InboundEvent,
    content: &InboundContent,
    destination: &Destination,
    timestamp: u64,
) -> Result<HeaderMap, EgressError> {
    let mut custom: BTreeMap<String, String> = content
        .headers
        .iter()
        .filter(|(name, _)| {
            !HOP_HEADERS.contains(&name.as_str()) && !name.starts_with("x-forwarded-")
        })
        .cloned()
        .collect();
    custom.insert(SOURCE_HEADER.into(), event.source_id.to_string());
    if let Some(id) = &event.event_id {
        custom.insert(EVENT_ID_HEADER.into(), id.clone());
    }
    let secret = [EndpointSecret {
        key: destination.secret.clone(),
        valid_until: None,
    }];
    let id = event.id.to_string();
    let mut headers = request::headers(
        SignatureStyle::StandardWebhooks,
        &id,
        timestamp,
        &content.payload,
        &secret,
        &custom,
    )
    .map_err(|e| EgressError::InvalidUrl {
        reason: e.to_string(),
    })?;
    // The provider's content type, not the JSON default: a form body stays a form body.
    let kind = content.headers.iter().find(|(n, _)| n == "content-type");
    if let Some(value) = kind.and_then(|(_, v)| HeaderValue::from_str(v).ok()) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    Ok(headers)
}
