//! A key in flight on one node, seen from another: two stores (two pools, as two vow processes
//! have) on one database. While the first node's keyed message create is blocked in its write
//! (`messages` locked from a third connection), the second node's claim of the same key and its
//! begin answer at once (`Fenced`, `InProgress`) instead of waiting on the first node's
//! uncommitted record; once the lock goes, the first write commits and the second node replays.

use std::time::Duration;

use vow_store::idempotency::{
    Begun, Completion, Fingerprint, FreshClaim, LeaseToken, Render, Scope, Settings, StoredResponse,
};
use vow_store::prelude::*;
use vow_store::{MessageFilter, Order, Seek, StoreError};
use vow_store_postgres::testing::fresh_store;
use vow_store_postgres::PgStore;

use crate::support::{app, blocked_by, endpoint, endpoint_fields, message, now, raw};

/// Far above what an answer that does not wait takes: reaching it means a node waited.
const HANG: Duration = Duration::from_secs(20);

fn scope(app: &str) -> Scope {
    Scope {
        principal: "admin".into(),
        application: Some(app.into()),
        method: "POST".into(),
        route: "/api/v1/app/{app_id}/msg".into(),
        key: vow_idempotency::IdempotencyKey::parse("node-key").unwrap(),
    }
}

const BODY: &[u8] = br#"{"eventType":"t","payload":{}}"#;

/// A keyed message create of `new` as the server's hot path makes it: the key claimed in the
/// write's transaction, with the response rendered before the write.
fn keyed_create(
    store: &PgStore,
    app: vow_core::AppId,
    scope: Scope,
) -> impl std::future::Future<Output = Result<(), StoreError>> + Send + 'static {
    let store = store.clone();
    let new = message(app, "t", None);
    let body = serde_json::from_slice(BODY).unwrap();
    async move {
        let response = StoredResponse::json(202, &serde_json::json!({"id": new.id.to_string()}));
        let completion = Completion {
            scope,
            token: LeaseToken::generate(),
            fresh: Some(FreshClaim {
                fingerprint: Fingerprint::of("POST", "/api/v1/app/{app_id}/msg", BODY),
                canonical_body: vow_idempotency::fingerprint::canonical(&body),
                on_takeover: None,
            }),
            now: now(),
            settings: Settings::default(),
            render: Render::Ready(response),
        };
        let create = MessageCreate {
            new,
            only: None,
            app: None,
        };
        (store.create_message_keyed(create, Some(completion)).await).map(drop)
    }
}

/// Waits until a transaction that waits behind backend `holder` holds a key's scope lock (an
/// advisory lock): its key is in flight.
async fn key_in_flight(watcher: &mut sqlx::PgConnection, holder: i32) {
    let held = async {
        loop {
            let held: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
                 AND $1 = ANY(pg_blocking_pids(pid))",
            )
            .bind(holder)
            .fetch_one(&mut *watcher)
            .await
            .unwrap();
            if held > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(HANG, held)
        .await
        .expect("the first node's write waits with its key claimed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_do_not_block_each_other_on_a_key_in_flight() {
    let (first, url) = fresh_store().await;
    let second = PgStore::connect(&url, 4).await.unwrap();
    let a = app(&first, None).await;
    endpoint(&first, a.id, endpoint_fields("https://example.com")).await;
    let scope = scope(&a.id.to_string());

    let mut locker = raw(&url).await;
    let holder: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut locker)
        .await
        .unwrap();
    sqlx::raw_sql("BEGIN; LOCK TABLE messages IN EXCLUSIVE MODE")
        .execute(&mut locker)
        .await
        .unwrap();
    let in_flight = tokio::spawn(keyed_create(&first, a.id, scope.clone()));
    blocked_by(&mut raw(&url).await, holder, 1).await;
    key_in_flight(&mut raw(&url).await, holder).await;

    // The second node: its claim rolls back at once, and its begin says "in progress".
    let claimed = tokio::time::timeout(HANG, keyed_create(&second, a.id, scope.clone()))
        .await
        .expect("the claim does not wait on the first node's");
    assert!(matches!(claimed, Err(StoreError::Fenced)), "{claimed:?}");
    let body = serde_json::from_slice(BODY).unwrap();
    let canonical = vow_idempotency::fingerprint::canonical(&body);
    let fp = Fingerprint::of("POST", "/api/v1/app/{app_id}/msg", BODY);
    let settings = Settings::default();
    let begun = tokio::time::timeout(
        HANG,
        second.begin_idempotent(&scope, &fp, &canonical, now(), &settings),
    )
    .await
    .expect("begin does not wait on the first node's claim")
    .unwrap();
    assert!(matches!(begun, Begun::InProgress { .. }), "{begun:?}");
    assert!(!in_flight.is_finished(), "the first write still waits");

    sqlx::raw_sql("ROLLBACK")
        .execute(&mut locker)
        .await
        .unwrap();
    in_flight.await.unwrap().unwrap();
    let begun = second
        .begin_idempotent(&scope, &fp, &canonical, now(), &settings)
        .await
        .unwrap();
    assert!(matches!(begun, Begun::Replay { .. }), "{begun:?}");
    let seek = Seek::for_iterator(None, Order::Descending, 10);
    let stored = second
        .list_messages(a.id, &MessageFilter::default(), &seek)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1, "one message, the first node's");
}
