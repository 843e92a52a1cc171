//! Ordering by version compares what versions mean (issue 13, defect 12), on both stores: RFC
//! 3339 times as instants whatever their offset or fraction, numbers as numbers (decimals
//! too); a version vow cannot order is refused at ingest. Every case counts the requests the
//! destination received and reads the stored rows.

use chrono::Utc;
use serde_json::json;
use vow_core::{InboundEventId, SourceId};
use vow_store::inbound::InboundState;

use super::support::*;
use crate::helpers::{delivery_config, TestApp};
use crate::receiver::Receiver;

on_both_stores!(
    rfc3339_versions_are_ordered_as_instants_whatever_their_offset_or_fraction,
    numeric_versions_are_ordered_as_numbers_decimals_included,
    a_version_that_is_neither_a_number_nor_a_time_is_refused_at_ingest,
);

/// A GitHub source ordering by `/version` per `/id`, forwarding to `destination`.
async fn ordered_source(app: &TestApp, destination: &Receiver) -> SourceId {
    let body = json!({"scheme": "github", "secrets": [GITHUB_SECRET],
        "versionPointer": "/version", "entityPointer": "/id",
        "destinations": [{"url": destination.url}]});
    create_source(app, body).await.0
}

/// Delivers `{"id":"cus_1","version":<version>}` (`version` is JSON) and forwards what is due;
/// the event and the state it ended in.
async fn deliver_and_forward(
    app: &TestApp,
    source: SourceId,
    delivery: &str,
    version: &str,
) -> (InboundEventId, InboundState) {
    let body = format!(r#"{{"id":"cus_1","version":{version}}}"#);
    let (status, out) = github_delivery(app, source, Some(delivery), body.as_bytes()).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("received")),
        "{out}"
    );
    let id = InboundEventId::parse(out["id"].as_str().unwrap()).unwrap();
    app.forward_at(&delivery_config("1m", &[]), Utc::now())
        .await;
    let stored = stored_event(app, source, id).await;
    (id, stored.event.state)
}

/// The `webhook-id`s (vow's event ids) the destination received, in order.
fn forwarded(destination: &Receiver) -> Vec<String> {
    let received = destination.received();
    received
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect()
}

async fn rfc3339_versions_are_ordered_as_instants_whatever_their_offset_or_fraction(app: TestApp) {
    let destination = Receiver::start(&[]).await;
    let source = ordered_source(&app, &destination).await;
    let (nine, state) = deliver_and_forward(&app, source, "d-1", r#""2026-01-01T09:00:00Z""#).await;
    assert_eq!(state, InboundState::Completed);
    // 10:00 at +02:00 is 08:00Z: older, though its text sorts after "09:00:00Z".
    let (eight, state) =
        deliver_and_forward(&app, source, "d-2", r#""2026-01-01T10:00:00+02:00""#).await;
    assert_eq!(
        state,
        InboundState::Superseded,
        "08:00Z is older than 09:00Z"
    );
    // Half a second later, though its text sorts before "09:00:00Z".
    let (later, state) =
        deliver_and_forward(&app, source, "d-3", r#""2026-01-01T09:00:00.5Z""#).await;
    assert_eq!(
        state,
        InboundState::Completed,
        "09:00:00.5Z is newer than 09:00:00Z"
    );
    let (same, state) =
        deliver_and_forward(&app, source, "d-4", r#""2026-01-01T11:00:00.500+02:00""#).await;
    assert_eq!(
        state,
        InboundState::Superseded,
        "the same instant is not newer"
    );
    assert_eq!(
        forwarded(&destination),
        [nine.to_string(), later.to_string()]
    );
    let superseded = stored_events(&app, source, Some(InboundState::Superseded)).await;
    let ids: Vec<_> = superseded.iter().map(|e| e.id).collect();
    assert_eq!(ids, [eight, same]);
}

async fn numeric_versions_are_ordered_as_numbers_decimals_included(app: TestApp) {
    let destination = Receiver::start(&[]).await;
    let source = ordered_source(&app, &destination).await;
    let (nine, state) = deliver_and_forward(&app, source, "d-1", "9").await;
    assert_eq!(state, InboundState::Completed);
    let (ten, state) = deliver_and_forward(&app, source, "d-2", "10").await;
    assert_eq!(state, InboundState::Completed, "10 is newer than 9");
    let (_, state) = deliver_and_forward(&app, source, "d-3", "9.5").await;
    assert_eq!(state, InboundState::Superseded, "9.5 is older than 10");
    let (_, state) = deliver_and_forward(&app, source, "d-4", r#""1e1""#).await;
    assert_eq!(state, InboundState::Superseded, "1e1 is 10");
    let (big, state) = deliver_and_forward(&app, source, "d-5", "18446744073709551617").await;
    assert_eq!(state, InboundState::Completed);
    let (_, state) = deliver_and_forward(&app, source, "d-6", "18446744073709551616").await;
    assert_eq!(
        state,
        InboundState::Superseded,
        "exact, not rounded through f64"
    );
    let expected = [nine.to_string(), ten.to_string(), big.to_string()];
    assert_eq!(forwarded(&destination), expected);
}

async fn a_version_that_is_neither_a_number_nor_a_time_is_refused_at_ingest(app: TestApp) {
    let destination = Receiver::start(&[]).await;
    let source = ordered_source(&app, &destination).await;
    let body = br#"{"id":"cus_1","version":"v3"}"#;
    let refused = github_delivery(&app, source, Some("d-1"), body).await;
    assert_refused(&refused, 422, "version_unorderable");
    let detail = refused.1["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("/version") && detail.contains("\"v3\""),
        "{detail}"
    );
    assert!(
        stored_events(&app, source, None).await.is_empty(),
        "nothing stored"
    );
    let recorded = rejections(&app, source).await;
    let reasons: Vec<(&str, u16)> = recorded
        .iter()
        .map(|r| (r.reason.as_str(), r.status))
        .collect();
    assert_eq!(reasons, [("version_unorderable", 422)]);
    // Without an entity there is nothing to order: the same version is stored.
    let unordered = br#"{"version":"v3"}"#;
    let (status, out) = github_delivery(&app, source, Some("d-2"), unordered).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("received")),
        "{out}"
    );
    app.forward_at(&delivery_config("1m", &[]), Utc::now())
        .await;
    assert_eq!(destination.received().len(), 1);
}
