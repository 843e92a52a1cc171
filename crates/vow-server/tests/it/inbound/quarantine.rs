//! A reused event id with another payload: quarantined (202, its own durable row, an
//! operational event), then released or discarded by an operator; and retention of payloads.

use chrono::{Duration, Utc};
use serde_json::{json, Value};
use vow_core::InboundEventId;
use vow_store::inbound::InboundState;
use vow_store::{Order, Seek};

use super::support::*;
use crate::helpers::{test_config, Backend, TestApp};

on_both_stores!(
    a_changed_payload_under_the_same_id_is_quarantined_with_a_202,
    a_quarantined_event_is_released_or_discarded_through_the_api,
    the_cleaner_removes_old_inbound_payloads_but_keeps_the_events,
);

async fn a_changed_payload_under_the_same_id_is_quarantined_with_a_202(app: TestApp) {
    let source = stripe_source(&app).await;
    let first = br#"{"id":"evt_1","amount":100}"#;
    let changed = br#"{"id":"evt_1","amount":999}"#;
    let (status, out) = stripe_delivery(&app, source, now(), first).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("received")),
        "{out}"
    );
    let claim = out["id"].as_str().unwrap().to_owned();
    let (status, out) = stripe_delivery(&app, source, now(), changed).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (202, Some("quarantined")),
        "{out}"
    );
    let quarantined = InboundEventId::parse(out["id"].as_str().unwrap()).unwrap();
    let (status, out) = stripe_delivery(&app, source, now(), first).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("duplicate")),
        "{out}"
    );

    let all = stored_events(&app, source, None).await;
    assert_eq!(
        all.len(),
        2,
        "the claim and the quarantined payload, nothing else"
    );
    let held = stored_events(&app, source, Some(InboundState::Quarantined)).await;
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].id, quarantined);
    assert_eq!(held[0].conflicts_with.map(|c| c.to_string()), Some(claim));
    let stored = app
        .inbound
        .get_inbound_event(source, quarantined)
        .await
        .unwrap();
    assert_eq!(
        stored.unwrap().content.unwrap().payload,
        changed,
        "durable, for an operator"
    );
    let (_, metrics) = app.get("/metrics").await;
    assert!(metrics
        .as_str()
        .unwrap_or_default()
        .contains("vow_inbound_quarantined_total"));
}

async fn a_quarantined_event_is_released_or_discarded_through_the_api(app: TestApp) {
    let (source, held) = two_quarantined(&app).await;
    let events = format!("/api/v1/source/{source}/event");
    let (status, listed) = app.get(&format!("{events}?state=quarantined")).await;
    assert_eq!(status, 200, "{listed}");
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [held[1].as_str(), held[0].as_str()], "newest first");
    assert!(
        listed["data"][0].get("payload").is_none(),
        "lists leave content out"
    );
    let (status, one) = app.get(&format!("{events}/{}", held[0])).await;
    assert_eq!(status, 200);
    assert_eq!(one["payload"], r#"{"id":"evt_1","v":2}"#);
    assert_eq!(one["state"], "quarantined");

    let (status, released) = app
        .post(&format!("{events}/{}/release", held[0]), json!({}))
        .await;
    assert_eq!(
        (status, released["state"].as_str()),
        (200, Some("received")),
        "{released}"
    );
    let (status, discarded) = app
        .post(&format!("{events}/{}/discard", held[1]), json!({}))
        .await;
    assert_eq!(
        (status, discarded["state"].as_str()),
        (200, Some("discarded")),
        "{discarded}"
    );
    let (status, again) = app
        .post(&format!("{events}/{}/discard", held[0]), json!({}))
        .await;
    assert_eq!(status, 409, "{again}");
    let (status, _) = app
        .post(
            &format!("{events}/{}/release", InboundEventId::new()),
            json!({}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(app.get(&format!("{events}?state=bogus")).await.0, 422);

    assert_eq!(
        stored_events(&app, source, Some(InboundState::Received))
            .await
            .len(),
        2
    );
    assert_eq!(
        stored_events(&app, source, Some(InboundState::Discarded))
            .await
            .len(),
        1
    );
    assert!(stored_events(&app, source, Some(InboundState::Quarantined))
        .await
        .is_empty());
}

async fn the_cleaner_removes_old_inbound_payloads_but_keeps_the_events(app: TestApp) {
    let source = github_source(&app).await;
    github_delivery(&app, source, Some("old"), b"{}").await;
    deliver(&app, &format!("/in/{source}"), &[], b"{}").await;
    let stores = app.stores();
    let config = test_config(&[]);
    let days = i64::from(config.inbound_retention_days);
    let cleaner = vow_server::retention::Cleaner::new(stores, config.retention());
    cleaner.sweep(Utc::now() + Duration::days(days - 1)).await;
    let event = stored_events(&app, source, None).await[0].id;
    let kept = app
        .inbound
        .get_inbound_event(source, event)
        .await
        .unwrap()
        .unwrap();
    assert!(kept.content.is_some(), "within the retention");
    cleaner.sweep(Utc::now() + Duration::days(days + 1)).await;
    let purged = app
        .inbound
        .get_inbound_event(source, event)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(purged.content, None, "the payload is gone");
    assert!(
        rejections(&app, source).await.is_empty(),
        "old rejections too"
    );
    let (status, out) = github_delivery(&app, source, Some("old"), b"{}").await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("duplicate")),
        "the id still counts"
    );
}

async fn a_quarantine_is_reported_as_an_operational_event(backend: Backend) {
    let config = test_config(&[("operational_webhook_url", "https://ops.example/vow")]);
    let app = TestApp::spawn_with(backend, config).await;
    let source = stripe_source(&app).await;
    stripe_delivery(&app, source, now(), br#"{"id":"evt_1","n":1}"#).await;
    let (status, out) = stripe_delivery(&app, source, now(), br#"{"id":"evt_1","n":2}"#).await;
    assert_eq!(status, 202, "{out}");
    let ops = vow_store::AppKey::Uid(vow_server::delivery::operational::APP_UID.into());
    let ops = app
        .store
        .get_application(&ops)
        .await
        .unwrap()
        .expect("the operational app")
        .id;
    let filter = vow_store::MessageFilter::default();
    let seek = Seek::for_iterator(None, Order::Descending, 10);
    // Stored before the 202 went out.
    let messages = app.store.list_messages(ops, &filter, &seek).await.unwrap();
    assert_eq!(messages.len(), 1, "one operational event");
    assert_eq!(messages[0].event_type, "source.event.quarantined");
    let payload: Value = serde_json::from_str(messages[0].payload.as_deref().unwrap()).unwrap();
    assert_eq!(payload["data"]["inboundEventId"], out["id"]);
    assert_eq!(payload["data"]["eventId"], "evt_1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_quarantine_is_reported_as_an_operational_event() {
    a_quarantine_is_reported_as_an_operational_event(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_quarantine_is_reported_as_an_operational_event() {
    a_quarantine_is_reported_as_an_operational_event(Backend::Postgres).await
}
