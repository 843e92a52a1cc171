//! The dead-letter rate alert end to end: an endpoint whose deliveries dead-letter past the
//! threshold within the window gets one signed `endpoint.dead_letters.alert` at the operator's
//! URL, and one `endpoint.dead_letters.recovered` once the window's count falls below half the
//! threshold; an endpoint below the threshold gets none; the gauges follow. On PostgreSQL two
//! nodes checking the same database raise and clear the alert once.

use std::time::Duration;

use serde_json::{json, Value};
use vow_server::config::Config;
use vow_server::stores::Stores;

use crate::delivery::{send, setup};
use crate::helpers::{delivery_config, eventually, Backend, TestApp};
use crate::operators::{sample, scrape};
use crate::receiver::{standard_signature_ok, Received, Receiver};

const ALERT: &str = "endpoint.dead_letters.alert";
const RECOVERED: &str = "endpoint.dead_letters.recovered";
const COUNTER: &str = "vow_dead_letter_alerts_total";

/// One attempt per delivery, so each failure dead-letters at once; an alert at 3 dead-letters
/// within 3 s; no auto-disabling, so every message is attempted.
fn alert_config(ops: &Receiver) -> Config {
    let mut config = delivery_config("none", &[("operational_webhook_url", &ops.url)]);
    config.dead_letter_alert_threshold = 3;
    config.dead_letter_alert_window_seconds = 3;
    config.disable_after_dead_letters = 0;
    config
}

/// The operational events of `event_type` received so far, as JSON bodies.
fn events(ops: &Receiver, event_type: &str) -> Vec<(Received, Value)> {
    ops.received()
        .into_iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            (r, body)
        })
        .filter(|(_, body)| body["type"] == event_type)
        .collect()
}

/// Waits for the first event of `event_type`.
async fn first(ops: &Receiver, event_type: &str) -> (Received, Value) {
    eventually(
        event_type,
        Duration::from_millis(100),
        Duration::from_secs(20),
        || async { events(ops, event_type).into_iter().next() },
    )
    .await
}

/// Sends `n` messages to a failing endpoint of a new application; returns its setup.
async fn failing_endpoint(app: &TestApp, failing: &Receiver, n: usize) -> crate::delivery::Setup {
    let s = setup(app, &failing.url, json!({})).await;
    for _ in 0..n {
        send(app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    }
    s
}

async fn a_dead_letter_pile_up_alerts_once_and_recovers_once(app: TestApp) {
    let ops = Receiver::start(&[]).await;
    let failing = Receiver::start(&[]).await;
    failing.answer_status(Some(500));
    let app = TestApp::spawn_with(app.backend, alert_config(&ops)).await;
    // The counters are the process's, shared by tests running at once: compared, not read.
    let recovered_before = sample(&scrape(&app).await, COUNTER, &[("event", RECOVERED)]);
    let quiet = failing_endpoint(&app, &failing, 2).await;
    let loud = failing_endpoint(&app, &failing, 3).await;

    let (alert, body) = first(&ops, ALERT).await;
    let (_, secret) = app
        .get("/api/v1/app/vow-operational/endpoint/operational/secret")
        .await;
    assert!(standard_signature_ok(
        &alert,
        secret["key"].as_str().unwrap()
    ));
    assert_eq!(body["data"]["appId"], loud.app_id.as_str());
    assert_eq!(body["data"]["endpointId"], loud.endpoint.as_str());
    assert_eq!(body["data"]["deadLetters"], 3);
    assert_eq!(body["data"]["threshold"], 3);
    assert_eq!(body["data"]["windowSeconds"], 3);
    let metrics = scrape(&app).await;
    // Gauges are the process's too, set by every server's check: only their presence is
    // this test's to see.
    for gauge in [
        "vow_dead_letter_alerts_raised ",
        "vow_dead_letters_in_window ",
    ] {
        assert!(metrics.contains(gauge), "{metrics}");
    }

    let (_, body) = first(&ops, RECOVERED).await;
    assert_eq!(body["data"]["endpointId"], loud.endpoint.as_str());
    assert_eq!(body["data"]["deadLetters"], 0, "the window has passed");
    // Every failure was attempted and dead-lettered (the exhaustion events say so), yet one
    // alert and one recovery, for the loud endpoint only.
    assert_eq!(failing.received().len(), 5);
    assert_eq!(events(&ops, "message.attempt.exhausted").len(), 5);
    let alerts = events(&ops, ALERT);
    assert_eq!(alerts.len(), 1, "one alert");
    assert_eq!(events(&ops, RECOVERED).len(), 1, "one recovery");
    assert!(alerts
        .iter()
        .all(|(_, b)| b["data"]["endpointId"] != quiet.endpoint.as_str()));
    let metrics = scrape(&app).await;
    let recovered = sample(&metrics, COUNTER, &[("event", RECOVERED)]);
    assert!(recovered > recovered_before, "{metrics}");
}

on_both_stores!(a_dead_letter_pile_up_alerts_once_and_recovers_once);

/// Two nodes on one PostgreSQL database, each with its own pool and its own check: the alert
/// is raised once and cleared once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_nodes_raise_and_clear_an_alert_once() {
    let ops = Receiver::start(&[]).await;
    let failing = Receiver::start(&[]).await;
    failing.answer_status(Some(500));
    let (store, url) = vow_store_postgres::testing::fresh_store().await;
    let a = TestApp::spawn_on(
        Backend::Postgres,
        alert_config(&ops),
        Stores::new(store),
        Box::new(()),
    )
    .await;
    let second = vow_store_postgres::PgStore::connect(&url, 4).await.unwrap();
    let _b = TestApp::spawn_on(
        Backend::Postgres,
        alert_config(&ops),
        Stores::new(second),
        Box::new(()),
    )
    .await;
    let loud = failing_endpoint(&a, &failing, 4).await;
    let (_, body) = first(&ops, ALERT).await;
    assert_eq!(body["data"]["endpointId"], loud.endpoint.as_str());
    first(&ops, RECOVERED).await;
    // Both nodes have checked several times since (every second).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(events(&ops, ALERT).len(), 1, "raised once");
    assert_eq!(events(&ops, RECOVERED).len(), 1, "cleared once");
}
