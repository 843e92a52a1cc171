//! How long `Idempotency-Key` records live, configured: with a 5 s lease, 1 h of replay and a
//! 2 day tombstone (not the defaults' 30 s, 24 h and 7 days), `Idempotency-Expires` and the key's
//! status tell the configured expiry and the key expires then; its tombstone refuses it for the
//! configured days, after which it runs again; and a claim is taken over once the configured
//! lease has run out. Time moves by the server's clock ([`TestApp::clock`]); the cleaner is
//! swept at the clock's time.

use chrono::{DateTime, Duration, Utc};
use reqwest::{Method, Response};
use serde_json::{json, Value};
use vow_core::AppId;
use vow_idempotency::fingerprint::canonical_body;
use vow_idempotency::http::http_date;
use vow_idempotency::IdempotencyKey;
use vow_server::retention::{Cleaner, Kept};
use vow_server::Config;
use vow_store::idempotency::{Begun, Fingerprint, Scope, Settings};
use vow_store::{MessageFilter, Order, Seek};

use crate::helpers::{test_config_toml, TestApp};

const ROUTE: &str = "/api/v1/app/{app_id}/msg";

/// A 5 s lease, 1 h of replay, a 2 day tombstone.
fn config() -> Config {
    test_config_toml(
        "idempotency_lease_seconds = 5\n\
         idempotency_retention_hours = 1\n\
         idempotency_tombstone_days = 2",
    )
}

/// A server like `app`'s (same backend, a fresh store) with [`config`].
async fn configured(app: TestApp) -> TestApp {
    let backend = app.backend;
    drop(app);
    TestApp::spawn_with(backend, config()).await
}

fn message(amount: i64) -> Value {
    json!({"eventType": "invoice.paid", "payload": {"amount": amount}})
}

/// POSTs `body` as a message of `app_id` with `Idempotency-Key: key`.
async fn send(app: &TestApp, app_id: &str, key: &str, body: &Value) -> Response {
    app.request(Method::POST, &format!("/api/v1/app/{app_id}/msg"))
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .unwrap()
}

fn header<'a>(r: &'a Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).map(|v| v.to_str().unwrap())
}

/// `GET /api/v1/idempotency-key/{key}` for `app_id`'s message creates.
async fn key_status(app: &TestApp, app_id: &str, key: &str) -> (u16, Value) {
    app.get(&format!(
        "/api/v1/idempotency-key/{key}?route=message.create&app_id={app_id}"
    ))
    .await
}

fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().expect("a time"))
        .unwrap()
        .with_timezone(&Utc)
}

/// The ids of an application's stored messages, newest first.
async fn stored(app: &TestApp, app_id: &str) -> Vec<String> {
    let seek = Seek::for_iterator(None, Order::Descending, 100);
    let rows = app
        .store
        .list_messages(
            AppId::parse(app_id).unwrap(),
            &MessageFilter::default(),
            &seek,
        )
        .await
        .unwrap();
    rows.into_iter().map(|m| m.id.to_string()).collect()
}

/// Moves the server's clock to `at`.
fn move_to(app: &TestApp, at: DateTime<Utc>) {
    app.clock.advance(at - app.clock.now());
}

/// The first request with `key`: its message id, and the key's `expiresAt` and
/// `tombstoneUntil` as its status tells them, checked against the configured 1 h and 2 days
/// and against the response's `Idempotency-Expires`.
async fn first_request(app: &TestApp, app_id: &str, key: &str) -> (String, [DateTime<Utc>; 2]) {
    let before = app.clock.now();
    let first = send(app, app_id, key, &message(1)).await;
    let after = app.clock.now();
    assert_eq!(first.status(), 202);
    let told = header(&first, "idempotency-expires").unwrap().to_owned();
    let id = first.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, out) = key_status(app, app_id, key).await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("completed")),
        "{out}"
    );
    let (expires_at, tombstone_until) = (time(&out["expiresAt"]), time(&out["tombstoneUntil"]));
    assert!(
        before + Duration::hours(1) <= expires_at && expires_at <= after + Duration::hours(1),
        "replayed for the configured 1 h, not 24 h: {before} → {expires_at}"
    );
    assert_eq!(
        told,
        http_date(expires_at),
        "the header tells the same expiry"
    );
    assert_eq!(tombstone_until - expires_at, Duration::days(2));
    (id, [expires_at, tombstone_until])
}

/// A key is replayed until the configured retention ends (1 h), then refused as expired: the
/// header and the key's status told that expiry, and nothing runs twice.
async fn a_key_is_replayed_for_the_configured_retention_then_expires(app: TestApp) {
    let app = configured(app).await;
    let app_id = app.create_app("Shop").await;
    let (id, [expires_at, _]) = first_request(&app, &app_id, "ttl-1").await;

    move_to(&app, expires_at - Duration::seconds(2));
    let again = send(&app, &app_id, "ttl-1", &message(1)).await;
    assert_eq!(again.status(), 202);
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(
        header(&again, "idempotency-expires"),
        Some(http_date(expires_at).as_str())
    );
    assert_eq!(again.json::<Value>().await.unwrap()["id"], id.as_str());

    move_to(&app, expires_at);
    let late = send(&app, &app_id, "ttl-1", &message(1)).await;
    assert_eq!(late.status(), 422);
    let problem: Value = late.json().await.unwrap();
    assert_eq!(problem["type"], "urn:vow:problem:idempotency-key-expired");
    let (status, out) = key_status(&app, &app_id, "ttl-1").await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("expired")),
        "{out}"
    );
    assert_eq!(time(&out["expiresAt"]), expires_at);
    assert_eq!(stored(&app, &app_id).await, vec![id], "run once");
}

/// Purged into a tombstone, an expired key stays refused for the configured 2 days (not 7),
/// then is deleted, and the same request with it runs again as a new one.
async fn an_expired_key_is_refused_for_the_configured_tombstone_then_runs_again(app: TestApp) {
    let app = configured(app).await;
    let kept = Kept {
        messages: None,
        responses: Duration::days(30),
        inbound: Duration::days(30),
    };
    let cleaner = Cleaner::new(app.stores(), kept);
    let app_id = app.create_app("Shop").await;
    let (id, [expires_at, tombstone_until]) = first_request(&app, &app_id, "ttl-2").await;

    move_to(&app, expires_at + Duration::seconds(1));
    cleaner.sweep(app.clock.now()).await;
    let expired = |r: &Response| r.status() == 422;
    assert!(expired(&send(&app, &app_id, "ttl-2", &message(1)).await));

    move_to(&app, tombstone_until - Duration::seconds(2));
    cleaner.sweep(app.clock.now()).await;
    assert!(expired(&send(&app, &app_id, "ttl-2", &message(1)).await));
    let (status, out) = key_status(&app, &app_id, "ttl-2").await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("expired")),
        "{out}"
    );
    assert_eq!(time(&out["tombstoneUntil"]), tombstone_until);

    move_to(&app, tombstone_until + Duration::seconds(1));
    cleaner.sweep(app.clock.now()).await;
    assert_eq!(key_status(&app, &app_id, "ttl-2").await.0, 404, "free");
    let fresh = send(&app, &app_id, "ttl-2", &message(1)).await;
    assert_eq!(fresh.status(), 202);
    assert_eq!(header(&fresh, "idempotent-replayed"), None);
    let second = fresh.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(second, id);
    assert_eq!(stored(&app, &app_id).await, vec![second, id]);
}

/// Claims `key` for `body` through the store at the server's time with `settings`: a request
/// that began and has not finished.
async fn claim(app: &TestApp, app_id: &str, key: &str, body: &Value, settings: &Settings) {
    let scope = Scope {
        principal: "admin".into(),
        application: Some(app_id.to_owned()),
        method: "POST".into(),
        route: ROUTE.into(),
        key: IdempotencyKey::parse(key).unwrap(),
    };
    let raw = serde_json::to_vec(body).unwrap();
    let fingerprint = Fingerprint::of("POST", ROUTE, &raw);
    let begun = app
        .store
        .begin_idempotent(
            &scope,
            &fingerprint,
            &canonical_body(&raw),
            app.clock.now(),
            settings,
        )
        .await
        .unwrap();
    assert!(matches!(begun, Begun::Owner(_)), "{begun:?}");
}

/// The retry's 409 and its `Retry-After`.
async fn in_progress(app: &TestApp, app_id: &str, key: &str, body: &Value) -> u64 {
    let r = send(app, app_id, key, body).await;
    assert_eq!(r.status(), 409);
    header(&r, "retry-after").unwrap().parse().unwrap()
}

/// A claim begun with the configured 5 s lease (a request of this server that never finished)
/// is in progress, the retry told to come back when the lease ends, and is taken over at 5 s,
/// not 30. A claim with a longer lease (another configuration's) is never waited on for more
/// than the configured lease.
async fn a_claim_is_taken_over_once_the_configured_lease_has_run_out(app: TestApp) {
    let app = configured(app).await;
    let app_id = app.create_app("Shop").await;
    let body = message(5);
    claim(&app, &app_id, "lease-1", &body, &config().idempotency()).await;
    let start = app.clock.now();
    assert!(
        (4..=5).contains(&in_progress(&app, &app_id, "lease-1", &body).await),
        "the lease is 5 s"
    );
    move_to(&app, start + Duration::seconds(4));
    assert_eq!(in_progress(&app, &app_id, "lease-1", &body).await, 1);
    assert!(stored(&app, &app_id).await.is_empty());

    move_to(&app, start + Duration::seconds(5));
    let taken = send(&app, &app_id, "lease-1", &body).await;
    assert_eq!(taken.status(), 202, "taken over once the 5 s lease ran out");
    assert_eq!(header(&taken, "idempotent-replayed"), None);
    let id = taken.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(stored(&app, &app_id).await, vec![id]);

    claim(&app, &app_id, "lease-2", &body, &Settings::default()).await;
    assert_eq!(
        in_progress(&app, &app_id, "lease-2", &body).await,
        5,
        "at most the configured lease"
    );
}

on_both_stores!(
    a_key_is_replayed_for_the_configured_retention_then_expires,
    an_expired_key_is_refused_for_the_configured_tombstone_then_runs_again,
    a_claim_is_taken_over_once_the_configured_lease_has_run_out,
);
