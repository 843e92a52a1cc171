//! What the inbound tests share: signing the way each provider documents it (HMAC computed
//! here, independently of vow-signature), sending deliveries, and reading what was stored.

use base64::Engine as _;
use chrono::Utc;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use vow_core::SourceId;
use vow_store::inbound::{InboundEvent, InboundFilter, InboundState, Rejection, StoredInbound};
use vow_store::{Order, Seek};

use crate::helpers::{into_parts, TestApp};

pub(crate) const GITHUB_SECRET: &str = "It's a Secret to Everybody";
pub(crate) const STRIPE_SECRET: &str = "whsec_test_secret";
pub(super) const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
pub(super) const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub(super) const ROTATED_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

pub(crate) fn mac_sha256(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`.
pub(crate) fn github_signature(secret: &str, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(mac_sha256(secret.as_bytes(), &[body]))
    )
}

/// Stripe: `Stripe-Signature: t=<ts>,v1=<hex HMAC-SHA256(secret, "<ts>." body)>`.
pub(crate) fn stripe_signature(secret: &str, ts: i64, body: &[u8]) -> String {
    let ts = ts.to_string();
    let mac = mac_sha256(secret.as_bytes(), &[ts.as_bytes(), b".", body]);
    format!("t={ts},v1={}", hex::encode(mac))
}

/// Slack: `X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:<ts>:" body)>`.
pub(super) fn slack_signature(secret: &str, ts: i64, body: &[u8]) -> String {
    let base = format!("v0:{ts}:");
    let mac = mac_sha256(secret.as_bytes(), &[base.as_bytes(), body]);
    format!("v0={}", hex::encode(mac))
}

/// Standard Webhooks: `v1,<base64 HMAC-SHA256(base64-decoded secret, "<id>.<ts>." body)>`.
pub(super) fn standard_signature(secret: &str, id: &str, ts: i64, body: &[u8]) -> String {
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let signed = format!("{id}.{ts}.");
    let mac = mac_sha256(&key, &[signed.as_bytes(), body]);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac)
    )
}

pub(super) fn now() -> i64 {
    Utc::now().timestamp()
}

/// Creates a source from `body`; returns its id and token path.
pub(crate) async fn create_source(app: &TestApp, body: Value) -> (SourceId, String) {
    let (status, out) = app.post("/api/v1/source", body).await;
    assert_eq!(status, 201, "{out}");
    let id = SourceId::parse(out["id"].as_str().unwrap()).unwrap();
    (id, out["tokenPath"].as_str().unwrap().to_owned())
}

pub(crate) async fn github_source(app: &TestApp) -> SourceId {
    let body = json!({"scheme": "github", "secrets": [GITHUB_SECRET]});
    create_source(app, body).await.0
}

pub(super) async fn stripe_source(app: &TestApp) -> SourceId {
    let body = json!({"scheme": "stripe", "secrets": [STRIPE_SECRET]});
    create_source(app, body).await.0
}

/// POSTs `body` with `headers` to `path` (no admin token: the ingest routes are public).
pub(crate) async fn deliver(
    app: &TestApp,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, Value) {
    let mut request = app
        .client
        .post(format!("{}{path}", app.base))
        .header("content-type", "application/json")
        .body(body.to_vec());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    into_parts(request.send().await.unwrap()).await
}

/// A GitHub delivery of `body` with delivery id `delivery` to `source`.
pub(crate) async fn github_delivery(
    app: &TestApp,
    source: SourceId,
    delivery: Option<&str>,
    body: &[u8],
) -> (u16, Value) {
    let mut headers = vec![
        ("x-hub-signature-256", github_signature(GITHUB_SECRET, body)),
        ("x-github-event", "push".to_owned()),
        ("x-github-hook-id", "42".to_owned()),
    ];
    if let Some(delivery) = delivery {
        headers.push(("x-github-delivery", delivery.to_owned()));
    }
    deliver(app, &format!("/in/{source}"), &headers, body).await
}

/// `n` identical GitHub deliveries of `body` (delivery id `delivery`, hook 42) sent at once;
/// their answers.
pub(super) async fn concurrent_github_deliveries(
    app: &TestApp,
    source: SourceId,
    delivery: &str,
    body: &[u8],
    n: usize,
) -> Vec<(u16, Value)> {
    let signature = github_signature(GITHUB_SECRET, body);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let request = app
            .client
            .post(format!("{}/in/{source}", app.base))
            .header("x-hub-signature-256", &signature)
            .header("x-github-event", "push")
            .header("x-github-hook-id", "42")
            .header("x-github-delivery", delivery)
            .body(body.to_vec());
        tasks.spawn(async move { into_parts(request.send().await.unwrap()).await });
    }
    tasks.join_all().await
}

/// A Stripe delivery of `body` signed at `ts`.
pub(super) async fn stripe_delivery(
    app: &TestApp,
    source: SourceId,
    ts: i64,
    body: &[u8],
) -> (u16, Value) {
    let headers = [(
        "stripe-signature",
        stripe_signature(STRIPE_SECRET, ts, body),
    )];
    deliver(app, &format!("/in/{source}"), &headers, body).await
}

/// A Stripe source with `evt_1` received and two other payloads under that id quarantined;
/// the source and the quarantined events' ids, oldest first.
pub(super) async fn two_quarantined(app: &TestApp) -> (SourceId, Vec<String>) {
    let source = stripe_source(app).await;
    stripe_delivery(app, source, now(), br#"{"id":"evt_1","v":1}"#).await;
    let mut held = Vec::new();
    for body in [&br#"{"id":"evt_1","v":2}"#[..], br#"{"id":"evt_1","v":3}"#] {
        let (status, out) = stripe_delivery(app, source, now(), body).await;
        assert_eq!(status, 202, "{out}");
        held.push(out["id"].as_str().unwrap().to_owned());
    }
    (source, held)
}

pub(super) async fn stored_events(
    app: &TestApp,
    source: SourceId,
    state: Option<InboundState>,
) -> Vec<InboundEvent> {
    let seek = Seek::for_iterator(None, Order::Ascending, 1000);
    let filter = InboundFilter { state };
    app.inbound
        .list_inbound_events(source, &filter, &seek)
        .await
        .unwrap()
}

/// Event `id` of `source` with its content and outcomes; it must exist.
pub(super) async fn stored_event(
    app: &TestApp,
    source: SourceId,
    id: vow_core::InboundEventId,
) -> StoredInbound {
    let stored = app.inbound.get_inbound_event(source, id).await.unwrap();
    stored.expect("the event is stored")
}

pub(super) async fn rejections(app: &TestApp, source: SourceId) -> Vec<Rejection> {
    let seek = Seek::for_iterator(None, Order::Ascending, 1000);
    app.inbound.list_rejections(source, &seek).await.unwrap()
}

/// Asserts `outcome` is a refusal with `status` and `code`.
#[track_caller]
pub(super) fn assert_refused(outcome: &(u16, Value), status: u16, code: &str) {
    assert_eq!(outcome.0, status, "{}", outcome.1);
    assert_eq!(outcome.1["code"], code, "{}", outcome.1);
}
