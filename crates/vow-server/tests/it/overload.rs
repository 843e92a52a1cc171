//! Graceful overload on both stores, end to end. The store's bound: past the store's write capacity a new message is
//! refused at once with 503, `Retry-After` and the code `overloaded` (a keyed one with the
//! idempotency problem, its key left free), nothing of it is written, and
//! `vow_requests_shed_total` counts it; every message acknowledged is delivered once, and a
//! refused one sent again is accepted. The limit here is a microsecond, so on SQLite every
//! message that finds another waiting for the writer is refused, and on PostgreSQL every one
//! that finds the intake's connections all taken.
//!
//! The delivery backlog's bound (`overload_max_due_deliveries`, `overload_max_due_wait_ms`):
//! once that many deliveries are due, or a new one would wait that long, new messages and
//! inbound deliveries are refused before their body is read (and
//! `vow_intake_refused_share` reads 1), other routes answer, and once deliveries bring the
//! backlog down intake opens again by itself. A slow endpoint's backlog refuses nothing: its
//! deliveries wait on the endpoint, not on vow (and `vow_intake_slow_endpoints` counts it).

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{json, Value};
use vow_server::config::Config;
use vow_server::stores::Stores;

use crate::delivery::{send, setup};
use crate::helpers::{delivery_config, eventually, Backend, TestApp};
use crate::operators::{sample, scrape};
use crate::receiver::Receiver;

const SHED: &str = "vow_requests_shed_total";
const REFUSED_SHARE: &str = "vow_intake_refused_share";
const SLOW_ENDPOINTS: &str = "vow_intake_slow_endpoints";

/// Held while a test sheds, so the process-wide counter's growth is one test's.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const MESSAGES: usize = 400;

/// Waits until the gauge `name` reads 1. Gauges are the process's: a server of a test running
/// beside this one sets them to 0 as it starts, and the server under test sets them again at
/// its next backlog read.
async fn gauge_reads_one(app: &TestApp, name: &str) {
    eventually(
        &format!("{name} reads 1"),
        Duration::from_millis(50),
        Duration::from_secs(5),
        || async { (sample(&scrape(app).await, name, &[]) == 1.0).then_some(()) },
    )
    .await;
}

/// What one create answered.
struct Answer {
    event_id: String,
    keyed: bool,
    status: u16,
    retry_after: Option<String>,
    content_type: String,
    body: Value,
}

/// The create of message `i` (every other one keyed).
fn create(app: &TestApp, app_id: &str, i: usize) -> reqwest::RequestBuilder {
    let request = app
        .request(reqwest::Method::POST, &format!("/api/v1/app/{app_id}/msg"))
        .json(&json!({"eventType": "a.b", "eventId": format!("evt-{i}"), "payload": {"i": i}}));
    if i.is_multiple_of(2) {
        request.header("idempotency-key", format!("key-{i}"))
    } else {
        request
    }
}

/// Sends create `i` and reads its answer.
async fn answer(i: usize, request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let (retry_after, content_type) = (header("retry-after"), header("content-type"));
    Answer {
        event_id: format!("evt-{i}"),
        keyed: i.is_multiple_of(2),
        status: response.status().as_u16(),
        retry_after,
        content_type: content_type.unwrap_or_default(),
        body: response.json().await.unwrap_or(Value::Null),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_past_the_write_capacity_new_messages_are_refused_with_retry_after() {
    let (store, dir) = vow_store_sqlite::testing::fresh_store();
    store.shed_intake_after(Some(LIMIT));
    refused_with_retry_after_and_none_lost(Backend::Sqlite, Stores::new(store), Box::new(dir))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_past_the_write_capacity_new_messages_are_refused_with_retry_after() {
    let (store, _url) = vow_store_postgres::testing::fresh_store().await;
    store.shed_intake_after(Some(LIMIT));
    refused_with_retry_after_and_none_lost(Backend::Postgres, Stores::new(store), Box::new(()))
        .await;
}

const LIMIT: Duration = Duration::from_micros(1);

async fn refused_with_retry_after_and_none_lost(
    backend: Backend,
    stores: Stores,
    guard: Box<dyn std::any::Any + Send>,
) {
    let receiver = Receiver::start(&[]).await;
    let app = TestApp::spawn_on(backend, delivery_config("none", &[]), stores, guard).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    // The counter is the process's, and the other store's test sheds too: each counts only
    // while it holds the lock.
    let alone = ALONE.lock().await;
    let shed_before = sample(&scrape(&app).await, SHED, &[]);

    let mut sends = tokio::task::JoinSet::new();
    for i in 0..MESSAGES {
        sends.spawn(answer(i, create(&app, &s.app_id, i)));
    }
    let answers = sends.join_all().await;
    let (accepted, refused): (Vec<_>, Vec<_>) = answers.iter().partition(|a| a.status == 202);
    assert!(
        !accepted.is_empty() && !refused.is_empty(),
        "{} accepted",
        accepted.len()
    );
    for a in &refused {
        assert_eq!(a.status, 503, "{}: {}", a.event_id, a.body);
        assert_eq!(a.retry_after.as_deref(), Some("1"), "{}", a.event_id);
        if a.keyed {
            assert_eq!(a.content_type, "application/problem+json", "{}", a.event_id);
        } else {
            assert_eq!(a.body["code"], "overloaded", "{}", a.body);
        }
    }
    let shed = sample(&scrape(&app).await, SHED, &[]) - shed_before;
    assert_eq!(shed, refused.len() as f64);
    drop(alone);

    // Nothing of a refused message was written; every accepted one was.
    for a in &answers {
        let (status, _) = app
            .get(&format!("/api/v1/app/{}/msg/{}", s.app_id, a.event_id))
            .await;
        assert_eq!(
            status,
            if a.status == 202 { 200 } else { 404 },
            "{}",
            a.event_id
        );
    }
    // Sent again, one at a time (nothing waits then), each refused message is accepted; a keyed
    // one under its same key, which the refusal left free.
    for a in &refused {
        let i: usize = a.event_id["evt-".len()..].parse().unwrap();
        let again = answer(i, create(&app, &s.app_id, i)).await;
        assert_eq!(again.status, 202, "{}: {}", a.event_id, again.body);
    }

    // Every message is delivered once.
    let received = eventually(
        "every message delivered",
        Duration::from_millis(100),
        Duration::from_secs(30),
        || async { Some(receiver.received()).filter(|r| r.len() >= MESSAGES) },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ids: HashSet<String> = received
        .iter()
        .map(|r| r.header("webhook-id").to_string())
        .collect();
    assert_eq!(receiver.received().len(), MESSAGES);
    assert_eq!(ids.len(), MESSAGES);
}

async fn past_the_due_count_limit_intake_is_refused_before_its_body_is_read(app: TestApp) {
    refused_past_the_due_bound(app, |config| config.overload_max_due_deliveries = 2).await;
}

async fn past_the_due_wait_limit_intake_is_refused_before_its_body_is_read(app: TestApp) {
    // Nothing is recorded while two are due beyond the one claim held at once, so the drain
    // rate reads its floor of one a second: the one queued waits 1 s.
    refused_past_the_due_bound(app, |config| {
        config.overload_max_due_deliveries = 0;
        config.overload_max_due_wait_ms = 1_000;
        config.delivery_max_in_flight = 1;
    })
    .await;
}

/// Two messages due are past the bound `bound` sets (two due, or a wait of 1 s), and one is not
/// (none refused at half the bound, so the second send is accepted): intake is refused until
/// they are delivered.
async fn refused_past_the_due_bound(app: TestApp, bound: impl FnOnce(&mut Config)) {
    // The refused share is a process-wide gauge.
    let _alone = ALONE.lock().await;
    let receiver = Receiver::start(&[]).await;
    // The workers run (the bound watches where they do), but the server's clock is an hour
    // ahead of theirs: what is sent is due at the server's time and not yet at the workers',
    // a backlog that waits on vow, not on the endpoint.
    let mut config = delivery_config("none", &[]);
    bound(&mut config);
    let app = TestApp::spawn_with(app.backend, config).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    app.clock.advance(chrono::Duration::hours(1));
    let path = format!("/api/v1/app/{}/msg", s.app_id);
    for _ in 0..2 {
        send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    }
    let not_json = || {
        app.request(reqwest::Method::POST, &path)
            .header("content-type", "application/json")
            .body("not json")
    };
    // The backlog is read ten times a second; a body that is not JSON shows nothing read it.
    let refused = eventually(
        "intake refused",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || async {
            let response = not_json().send().await.unwrap();
            (response.status() == 503).then_some(response)
        },
    )
    .await;
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "overloaded", "{body}");
    gauge_reads_one(&app, REFUSED_SHARE).await;
    let inbound = app
        .request(reqwest::Method::POST, "/in/src_none")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(inbound.status(), 503, "inbound deliveries are intake too");
    // The rest of the API answers.
    assert_eq!(app.get(&path).await.0, 200);
    app.create_app("Other").await;

    // Delivering brings the backlog down, and intake opens again by itself.
    let delivering = delivery_config("none", &[]);
    assert_eq!(app.drain_at(&delivering, app.clock.now()).await, 2);
    eventually(
        "intake open again",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || async { (not_json().send().await.unwrap().status() == 400).then_some(()) },
    )
    .await;
    assert_eq!(sample(&scrape(&app).await, REFUSED_SHARE, &[]), 0.0);
    send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    assert_eq!(receiver.received().len(), 2);
    let (_, listed) = app.get(&path).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 3);
}

/// An endpoint that answers slowly holds up its own deliveries: with more of them due than the
/// limit, for as long as its requests run, intake stays open and nothing is refused; once it
/// answers quickly again, everything sent is delivered.
async fn a_slow_endpoints_backlog_refuses_nothing(app: TestApp) {
    const LIMIT: u32 = 6;
    let _alone = ALONE.lock().await;
    let receiver = Receiver::start(&[]).await;
    receiver.answer_after(Duration::from_millis(1_000));
    let mut config = delivery_config("none", &[]);
    config.overload_max_due_deliveries = LIMIT;
    config.delivery_max_per_endpoint = 2;
    config.delivery_timeout_ms = 10_000;
    let app = TestApp::spawn_with(app.backend, config).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let message = r#"{"eventType":"a.b","payload":{}}"#;
    let mut sent = 16;
    for _ in 0..sent {
        send(&app, &s.app_id, message).await;
    }
    receiver.wait_for(1).await;
    gauge_reads_one(&app, SLOW_ENDPOINTS).await;
    // Through the first requests and into the next ones (each waits a second), the backlog
    // stays past the limit, and every message sent is accepted (`send` asserts its 202).
    for _ in 0..15 {
        let metrics = scrape(&app).await;
        let due = sample(&metrics, "vow_deliveries_due", &[]);
        assert!(due >= f64::from(LIMIT), "{due} due: past the limit");
        assert_eq!(sample(&metrics, REFUSED_SHARE, &[]), 0.0, "nothing refused");
        send(&app, &s.app_id, message).await;
        sent += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    receiver.answer_after(Duration::ZERO);
    let received = receiver.wait_for(sent).await;
    let ids: HashSet<&str> = received.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(
        (received.len(), ids.len()),
        (sent, sent),
        "each message delivered once"
    );
}

on_both_stores!(
    past_the_due_count_limit_intake_is_refused_before_its_body_is_read,
    past_the_due_wait_limit_intake_is_refused_before_its_body_is_read,
    a_slow_endpoints_backlog_refuses_nothing,
);
