//! Retention of whole messages: past `message_retention_minutes` the cleaner deletes a message
//! whose deliveries all ended, with its deliveries and attempts, so the API no longer finds it;
//! one still retrying stays until it ends.

use std::str::FromStr;

use chrono::{Duration, Utc};
use serde_json::json;
use vow_core::{AppId, MessageId};
use vow_server::retention::Cleaner;

use crate::delivery::{attempts, send, setup};
use crate::helpers::{delivery_config, test_config_toml, TestApp};
use crate::operators::{sample, scrape};
use crate::receiver::Receiver;

const PURGED: &str = "vow_retention_purged_total";

/// Retention sweeps timed so far, by every server of this test process.
async fn swept(app: &TestApp) -> f64 {
    sample(&scrape(app).await, "vow_retention_sweep_seconds_count", &[])
}

/// Whether the API still finds the message, and how many delivery rows the store holds for it.
async fn found(app: &TestApp, app_id: &str, msg: &str) -> (bool, usize) {
    let (status, _) = app.get(&format!("/api/v1/app/{app_id}/msg/{msg}")).await;
    assert!(status == 200 || status == 404, "{status}");
    let (app_id, msg) = (
        AppId::from_str(app_id).unwrap(),
        MessageId::from_str(msg).unwrap(),
    );
    let deliveries = app
        .store
        .list_deliveries(app_id, msg)
        .await
        .unwrap_or_default();
    (status == 200, deliveries.len())
}

async fn old_messages_go_whole_once_their_deliveries_ended(app: TestApp) {
    let receiver = Receiver::start(&[200, 500]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let config = delivery_config("1d", &[]);
    let t0 = Utc::now();
    let delivered = send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{"n":1}}"#).await;
    assert_eq!(app.drain_at(&config, Utc::now()).await, 1);
    let retrying = send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{"n":2}}"#).await;
    assert_eq!(app.drain_at(&config, Utc::now()).await, 1);
    assert_eq!(receiver.received().len(), 2);

    let kept = test_config_toml("message_retention_minutes = 60").retention();
    let cleaner = Cleaner::new(app.stores(), kept);
    cleaner.sweep(t0 + Duration::minutes(59)).await;
    assert_eq!(
        found(&app, &s.app_id, &delivered).await,
        (true, 1),
        "not yet"
    );
    assert_eq!(attempts(&app, &s.app_id, &delivered).await.len(), 1);

    // Counters are per process and tests run in parallel: compare with a reading taken before.
    let purged = || async { sample(&scrape(&app).await, PURGED, &[("what", "messages")]) };
    let (purged_before, swept_before) = (purged().await, swept(&app).await);
    cleaner.sweep(t0 + Duration::minutes(61)).await;
    assert!(purged().await >= purged_before + 1.0, "counted");
    assert!(swept(&app).await >= swept_before + 1.0, "timed");
    assert_eq!(found(&app, &s.app_id, &delivered).await, (false, 0));
    assert!(attempts(&app, &s.app_id, &delivered).await.is_empty());
    let still = found(&app, &s.app_id, &retrying).await;
    assert_eq!(still, (true, 1), "still retrying");
    assert_eq!(attempts(&app, &s.app_id, &retrying).await.len(), 1);

    // Its retry delivers it; the next sweep takes it too.
    let later = t0 + Duration::days(2);
    assert_eq!(app.drain_at(&config, later).await, 1);
    assert_eq!(receiver.received().len(), 3);
    cleaner.sweep(later).await;
    assert_eq!(found(&app, &s.app_id, &retrying).await, (false, 0));
    assert!(attempts(&app, &s.app_id, &retrying).await.is_empty());
}

async fn with_0_messages_are_kept_forever(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    let config = delivery_config("1d", &[]);
    assert_eq!(app.drain_at(&config, Utc::now()).await, 1);
    let kept = test_config_toml("message_retention_minutes = 0").retention();
    Cleaner::new(app.stores(), kept)
        .sweep(Utc::now() + Duration::days(3650))
        .await;
    assert_eq!(found(&app, &s.app_id, &msg).await, (true, 1));
    assert_eq!(attempts(&app, &s.app_id, &msg).await.len(), 1);
}

on_both_stores!(
    old_messages_go_whole_once_their_deliveries_ended,
    with_0_messages_are_kept_forever,
);
