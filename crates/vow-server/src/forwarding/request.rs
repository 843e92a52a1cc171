//! The request that forwards one inbound event to one destination: the provider's exact
//! bytes, its non-secret headers (credentials and signatures were never stored), and vow's
//! Standard Webhooks signature made with the destination's secret.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::{header, HeaderValue};
use bytes::Bytes;
use vow_core::SignatureStyle;
use vow_egress::{EgressClient, EgressError, EgressResponse};
use vow_store::inbound::{Destination, InboundContent, InboundEvent};
use vow_store::EndpointSecret;

use crate::delivery::request;

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

/// POSTs `event` to `destination`, signed at unix time `timestamp`.
pub async fn send(
    egress: &EgressClient,
    timeout: Duration,
    event: &InboundEvent,
    content: &InboundContent,
    destination: &Destination,
    timestamp: u64,
) -> Result<EgressResponse, EgressError> {
    let url = url::Url::parse(&destination.url).map_err(|e| EgressError::InvalidUrl {
        reason: e.to_string(),
    })?;
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
    let body = Bytes::copy_from_slice(&content.payload);
    egress.post(&url, headers, body, Some(timeout)).await
}
