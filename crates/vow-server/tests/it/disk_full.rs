//! A full disk on SQLite (`SQLITE_FULL`, made with the write connection's page limit:
//! `vow_store_sqlite::testing::fill_up`), end to end: every message create is then a 503 with
//! `Retry-After` and the code `store_unavailable` (a keyed one: the idempotency problem, its key
//! left free), nothing half-written survives, the database passes `PRAGMA integrity_check`,
//! and once space returns vow takes messages again by itself and every acknowledged one is
//! delivered once. (PostgreSQL's own disk is the server's; its restart is another fault.)

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{json, Value};
use vow_server::stores::Stores;
use vow_store_sqlite::testing::{fill_up, fresh_store};

use crate::delivery::setup;
use crate::helpers::{delivery_config, eventually, Backend, TestApp};
use crate::receiver::Receiver;

/// Posts message `i` (keyed with `key-i` when `keyed`); the status, `Retry-After` and body.
async fn post(app: &TestApp, app_id: &str, i: usize, keyed: bool) -> (u16, Option<String>, Value) {
    let mut request = app
        .request(reqwest::Method::POST, &format!("/api/v1/app/{app_id}/msg"))
        .json(&json!({"eventType": "a.b", "eventId": format!("evt-{i}"), "payload": {"pad": "x".repeat(2000)}}));
    if keyed {
        request = request.header("idempotency-key", format!("key-{i}"));
    }
    let response = request.send().await.unwrap();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let status = response.status().as_u16();
    (
        status,
        retry_after,
        response.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_full_disk_is_a_503_that_loses_nothing_and_heals_when_space_returns() {
    let receiver = Receiver::start(&[]).await;
    let (store, dir) = fresh_store();
    let path = store.path().to_owned();
    let store = std::sync::Arc::new(store);
    // A delivery whose outcome the full disk refused is attempted again once its lease (here
    // 2 s) runs out.
    let mut config = delivery_config("1s,1s,1s,1s,1s", &[]);
    config.delivery_lease_seconds = 2;
    let app = TestApp::spawn_on(
        Backend::Sqlite,
        config,
        Stores::from_arc(store.clone()),
        Box::new(dir),
    )
    .await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let mut acked = Vec::new();
    for i in 0..5 {
        let (status, _, body) = post(&app, &s.app_id, i, false).await;
        assert_eq!(status, 202, "{body}");
        acked.push(i);
    }
    eventually(
        "the first five delivered",
        Duration::from_millis(50),
        Duration::from_secs(10),
        || async { (receiver.received().len() == 5).then_some(()) },
    )
    .await;

    // The disk fills: a few more pages, then none.
    let pages = fill_up(&store, None).await;
    fill_up(&store, Some(pages + 8)).await;
    let mut full = Vec::new();
    let mut acked_while_full = 0;
    for i in 5..200_usize {
        let keyed = !i.is_multiple_of(2);
        let (status, retry_after, body) = post(&app, &s.app_id, i, keyed).await;
        match status {
            202 => {
                acked.push(i);
                acked_while_full += 1;
            }
            503 => {
                assert_eq!(retry_after.as_deref(), Some("1"), "{body}");
                if keyed {
                    assert_eq!(
                        body["type"],
                        "urn:vow:problem:idempotency-store-unavailable"
                    );
                } else {
                    assert_eq!(body["code"], "store_unavailable", "{body}");
                }
                full.push((i, keyed));
            }
            other => panic!("message {i}: {other} {body}"),
        }
    }
    assert!(
        full.len() >= 150,
        "the disk stayed full: {} refused",
        full.len()
    );
    // Nothing half-written: each refused message is absent, each acknowledged one present.
    for i in 0..200 {
        let (status, _) = app
            .get(&format!("/api/v1/app/{}/msg/evt-{i}", s.app_id))
            .await;
        let expected = if acked.contains(&i) { 200 } else { 404 };
        assert_eq!(status, expected, "evt-{i}");
    }
    let check = rusqlite::Connection::open(&path).unwrap();
    let integrity: String = check
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");

    // Space returns: vow takes the refused messages again (a keyed one under its own key).
    fill_up(&store, None).await;
    for (i, keyed) in &full {
        let (status, _, body) = post(&app, &s.app_id, *i, *keyed).await;
        assert_eq!(status, 202, "evt-{i}: {body}");
        acked.push(*i);
    }
    let received = eventually(
        "every acknowledged message delivered",
        Duration::from_millis(100),
        Duration::from_secs(60),
        || async {
            let received = receiver.received();
            let ids: HashSet<String> = received
                .iter()
                .map(|r| r.header("webhook-id").to_string())
                .collect();
            (ids.len() >= acked.len()).then_some(received)
        },
    )
    .await;
    assert_eq!(acked.len(), 200);
    let ids: HashSet<&str> = received.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(
        ids.len(),
        200,
        "every acknowledged message, and nothing else"
    );
    // A duplicate is a delivery made while the disk was full whose outcome could not be
    // recorded: attempted again after its lease. Only a message acknowledged while full can
    // have one.
    let duplicates = received.len() - ids.len();
    assert!(
        duplicates <= acked_while_full,
        "{duplicates} duplicates, {acked_while_full} acknowledged while full"
    );
}
