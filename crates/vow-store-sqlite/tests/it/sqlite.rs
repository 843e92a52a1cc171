//! SQLite specifics: pragmas, data surviving a reopen, migrations on reopen, group commit.

use std::path::Path;

use chrono::{DateTime, Utc};
use vow_core::{AppId, EndpointId, MessageId};
use vow_store::prelude::*;
use vow_store::{
    AppKey, ApplicationFields, EndpointFields, EndpointKey, MessageKey, NewApplication,
    NewEndpoint, NewMessage, StoreError,
};
use vow_store_sqlite::testing::fresh_store;
use vow_store_sqlite::SqliteStore;

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp_micros(1_704_067_200_654_321).unwrap()
}

fn new_app(uid: Option<&str>) -> NewApplication {
    NewApplication {
        id: AppId::new(),
        fields: ApplicationFields {
            name: "App".into(),
            uid: uid.map(str::to_string),
            ..ApplicationFields::default()
        },
        now: t0(),
    }
}

fn new_message(app: AppId, event_id: Option<String>) -> NewMessage {
    NewMessage {
        id: MessageId::new(),
        app_id: app,
        event_id,
        event_type: "user.created".into(),
        channels: None,
        payload: r#"{"n":1}"#.into(),
        payload_expires_at: t0(),
        now: t0(),
        traceparent: None,
    }
}

#[tokio::test]
async fn the_write_connection_runs_wal_with_full_sync_and_foreign_keys() {
    let (store, _dir) = fresh_store();
    let settings = store.connection_settings().await.unwrap();
    assert_eq!(settings.journal_mode, "WAL");
    assert_eq!(settings.synchronous, "FULL");
    assert!(settings.foreign_keys);
    assert_eq!(store.backend(), "sqlite");
}

#[tokio::test]
async fn data_survives_closing_and_reopening_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("dirs").join("vow.db");
    let app = new_app(Some("kept"));
    let ep = EndpointId::new();
    let msg = new_message(app.id, Some("evt-1".into()));
    {
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.path(), path);
        store.create_application(app.clone()).await.unwrap();
        store
            .create_endpoint(NewEndpoint {
                id: ep,
                app_id: app.id,
                fields: EndpointFields {
                    url: "https://example.com".into(),
                    ..EndpointFields::default()
                },
                secret: "whsec_a2VwdA==".into(),
                now: t0(),
            })
            .await
            .unwrap();
        store.create_message(msg.clone()).await.unwrap();
        store.init_admin_token_hash("h").await.unwrap();
    }
    // Dropping the store closed it; the same file opens again (migrations are a no-op now).
    for _ in 0..2 {
        let store = SqliteStore::open(&path).unwrap();
        let read = store
            .get_application(&AppKey::Uid("kept".into()))
            .await
            .unwrap();
        assert_eq!(read.map(|a| a.id), Some(app.id));
        let endpoint = store
            .get_endpoint(app.id, &EndpointKey::Id(ep))
            .await
            .unwrap();
        assert!(endpoint.is_some());
        let message = store
            .get_message(app.id, &MessageKey::EventId("evt-1".into()))
            .await
            .unwrap();
        assert_eq!(message.and_then(|m| m.payload), Some(msg.payload.clone()));
        assert_eq!(
            store.list_deliveries(app.id, msg.id).await.unwrap().len(),
            1
        );
        assert_eq!(
            store.admin_token_hash().await.unwrap().as_deref(),
            Some("h")
        );
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .unwrap()
        .count();
    assert_eq!(version as usize, migrations, "each migration applied once");
}

#[tokio::test]
async fn a_path_that_cannot_hold_a_database_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let err = SqliteStore::open(&file.join("vow.db")).unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    let chain = std::error::Error::source(&err).unwrap().to_string();
    assert!(
        chain.contains("a-file"),
        "the error names the path: {chain}"
    );
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.db");
    std::fs::write(&path, vec![b'x'; 4096]).unwrap();
    assert!(SqliteStore::open(&path).is_err());
}

/// Many writes in flight at once, some of them doomed: the writer commits them in a few
/// transactions, and each failure is rolled back alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_transactions_and_a_failure_spares_its_batch_mates() {
    let (store, _dir) = fresh_store();
    let store = std::sync::Arc::new(store);
    store
        .create_application(new_app(Some("taken")))
        .await
        .unwrap();
    let before = store.write_stats();

    let mut tasks = tokio::task::JoinSet::new();
    let mut expected_ok = Vec::new();
    for i in 0..400 {
        // Every tenth create clashes on the uid.
        let new = if i % 10 == 0 {
            new_app(Some("taken"))
        } else {
            let new = new_app(Some(&format!("app-{i}")));
            expected_ok.push(new.id);
            new
        };
        let store = std::sync::Arc::clone(&store);
        tasks.spawn(async move { (i, store.create_application(new).await) });
    }
    while let Some(joined) = tasks.join_next().await {
        let (i, result) = joined.unwrap();
        match result {
            Ok(_) => assert_ne!(i % 10, 0),
            Err(StoreError::Conflict(_)) => assert_eq!(i % 10, 0),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    for id in &expected_ok {
        let read = store.get_application(&AppKey::Id(*id)).await.unwrap();
        assert!(read.is_some(), "a write next to a failed one was kept");
    }
    let after = store.write_stats();
    assert_eq!(after.writes - before.writes, 400);
    assert!(
        after.transactions - before.transactions < 400,
        "concurrent writes were grouped: {before:?} -> {after:?}"
    );
}

/// The deliveries and messages of many concurrent creates are all there, and match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_messages_is_stored_completely() {
    let (store, _dir) = fresh_store();
    let store = std::sync::Arc::new(store);
    let app = new_app(None);
    store.create_application(app.clone()).await.unwrap();
    for _ in 0..3 {
        store
            .create_endpoint(NewEndpoint {
                id: EndpointId::new(),
                app_id: app.id,
                fields: EndpointFields {
                    url: "https://example.com".into(),
                    ..EndpointFields::default()
                },
                secret: "whsec_eA==".into(),
                now: t0(),
            })
            .await
            .unwrap();
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000 {
        let store = std::sync::Arc::clone(&store);
        let new = new_message(app.id, Some(format!("evt-{i}")));
        tasks.spawn(async move { store.create_message(new).await.map(|c| c.deliveries) });
    }
    while let Some(joined) = tasks.join_next().await {
        assert_eq!(joined.unwrap().unwrap(), 3);
    }
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT count(*) FROM messages"), 1000);
    assert_eq!(
        count("SELECT count(*) FROM deliveries WHERE status = 'pending'"),
        3000
    );
    assert_eq!(count("SELECT count(*) FROM pragma_foreign_key_check"), 0);
}

/// A database written by the first schema opens with the queue schema: existing endpoints get
/// the default delivery options, existing deliveries are claimable with zeroed counters.
#[tokio::test]
async fn a_database_of_the_first_schema_is_migrated_with_its_rows() {
    use vow_store::queue::{ClaimRequest, EndpointRoom};
    use vow_store::{DeliveryOptions, DeliveryStatus};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let app = AppId::new();
    let ep = EndpointId::new();
    let msg = MessageId::new();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(include_str!("../../migrations/0001_initial.sql"))
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        let t = t0().timestamp_micros();
        conn.execute(
            "INSERT INTO applications VALUES (?1, NULL, 'Old', NULL, '{}', ?2, ?2)",
            rusqlite::params![app.to_string(), t],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO endpoints (id, app_id, uid, url, description, disabled, event_types,
             channels, throttle_rate, metadata, headers, created_at, updated_at)
             VALUES (?1, ?2, NULL, 'https://example.com', '', 0, NULL, NULL, NULL, '{}', '{}',
             ?3, ?3)",
            rusqlite::params![ep.to_string(), app.to_string(), t],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO endpoint_secrets (endpoint_id, key) VALUES (?1, 'whsec_b2xk')",
            [ep.to_string()],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO messages VALUES (?1, ?2, NULL, 'user.created', NULL, '{}', ?3, ?3)",
            rusqlite::params![msg.to_string(), app.to_string(), t],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO deliveries VALUES ('dlv_01HZZZZZZZZZZZZZZZZZZZZZZZ', ?1, ?2, ?3,
             'pending', 0, ?4, ?4)",
            rusqlite::params![app.to_string(), msg.to_string(), ep.to_string(), t],
        )
        .unwrap();
    }

    let store = SqliteStore::open(&path).unwrap();
    let endpoint = store.get_endpoint(app, &EndpointKey::Id(ep)).await.unwrap();
    assert_eq!(
        endpoint.unwrap().fields.delivery,
        DeliveryOptions::default()
    );
    let deliveries = store.list_deliveries(app, msg).await.unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].status, DeliveryStatus::Pending);
    assert_eq!(
        (deliveries[0].client_errors, deliveries[0].last_status),
        (0, None)
    );
    let req = ClaimRequest {
        now: t0(),
        lease: chrono::Duration::seconds(30),
        limit: 10,
        room: EndpointRoom::unlimited(),
    };
    let claimed = store.claim_deliveries(&req).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].endpoint.secrets.len(), 1);
}

/// A stored signature style or retry schedule this build cannot parse is corrupt data: reading
/// the endpoint is a `Backend` error naming the column's problem, not a panic or a default.
#[tokio::test]
async fn an_unparseable_stored_delivery_option_is_a_backend_error() {
    let (store, _dir) = fresh_store();
    let app = new_app(None);
    store.create_application(app.clone()).await.unwrap();
    let ep = EndpointId::new();
    store
        .create_endpoint(NewEndpoint {
            id: ep,
            app_id: app.id,
            fields: EndpointFields {
                url: "https://example.com".into(),
                ..EndpointFields::default()
            },
            secret: "whsec_eA==".into(),
            now: t0(),
        })
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let corrupt = [
        "UPDATE endpoints SET retry_schedule = 'soon-ish'",
        "UPDATE endpoints SET retry_schedule = NULL, signature_style = 'hmac'",
    ];
    for sql in corrupt {
        conn.execute(sql, []).unwrap();
        let err = store
            .get_endpoint(app.id, &EndpointKey::Id(ep))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Backend(_)), "{sql}: {err:?}");
        assert!(
            std::error::Error::source(&err).is_some(),
            "the cause is kept"
        );
    }
    conn.execute("UPDATE endpoints SET signature_style = 'sha256'", [])
        .unwrap();
    let fixed = store.get_endpoint(app.id, &EndpointKey::Id(ep)).await;
    let style = fixed.unwrap().unwrap().fields.delivery.signature_style;
    assert_eq!(style, vow_core::SignatureStyle::SeedSha256);
}

#[test]
fn the_store_is_shareable_across_tasks() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<SqliteStore>();
    let _: fn(&Path) -> Result<SqliteStore, StoreError> = SqliteStore::open;
}

/// Throughput probe, not a pass/fail test: `cargo test --release -p vow-store-sqlite --test it
/// -- --ignored --nocapture throughput`. Prints durable message creates per second with 256
/// concurrent callers and 2 endpoints per application.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a throughput probe; run by hand"]
async fn throughput_of_durable_message_creates() {
    let (store, _dir) = fresh_store();
    let store = std::sync::Arc::new(store);
    let app = new_app(None);
    store.create_application(app.clone()).await.unwrap();
    for _ in 0..2 {
        store
            .create_endpoint(NewEndpoint {
                id: EndpointId::new(),
                app_id: app.id,
                fields: EndpointFields {
                    url: "https://example.com".into(),
                    ..EndpointFields::default()
                },
                secret: "whsec_eA==".into(),
                now: t0(),
            })
            .await
            .unwrap();
    }
    let total = 50_000;
    let callers = 256;
    let started = std::time::Instant::now();
    let before = store.write_stats();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..callers {
        let store = std::sync::Arc::clone(&store);
        tasks.spawn(async move {
            for i in (c..total).step_by(callers) {
                let mut new = new_message(app.id, Some(format!("evt-{i}")));
                new.payload = format!(r#"{{"i":{i},"pad":"{}"}}"#, "x".repeat(300));
                store.create_message(new).await.unwrap();
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let after = store.write_stats();
    let txs = after.transactions - before.transactions;
    println!(
        "{total} messages in {secs:.2}s = {:.0}/s; {txs} transactions, {:.1} writes each",
        total as f64 / secs,
        (after.writes - before.writes) as f64 / txs as f64
    );
}

/// Throughput probe, not a pass/fail test: `cargo test --release -p vow-store-sqlite --test it
/// -- --ignored --nocapture throughput_of_claims`. Claims 256 deliveries at a time (4 workers at
/// once) and records them delivered with an attempt row each; prints claims and records per
/// second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a throughput probe; run by hand"]
async fn throughput_of_claims_and_records() {
    use vow_store::queue::{
        AttemptOutcome, AttemptTrigger, ClaimRequest, EndpointRoom, NewAttempt, NextState, Recorded,
    };

    let (store, _dir) = fresh_store();
    let store = std::sync::Arc::new(store);
    let app = new_app(None);
    store.create_application(app.clone()).await.unwrap();
    for _ in 0..4 {
        store
            .create_endpoint(NewEndpoint {
                id: EndpointId::new(),
                app_id: app.id,
                fields: EndpointFields {
                    url: "https://example.com".into(),
                    ..EndpointFields::default()
                },
                secret: "whsec_eA==".into(),
                now: t0(),
            })
            .await
            .unwrap();
    }
    let messages = 25_000;
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..64 {
        let store = std::sync::Arc::clone(&store);
        tasks.spawn(async move {
            for i in (c..messages).step_by(64) {
                let mut new = new_message(app.id, None);
                new.payload = format!(r#"{{"i":{i},"pad":"{}"}}"#, "x".repeat(300));
                store.create_message(new).await.unwrap();
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.unwrap();
    }

    let now = t0() + chrono::Duration::seconds(1);
    let started = std::time::Instant::now();
    let claim_time = std::sync::Arc::new(std::sync::Mutex::new(std::time::Duration::ZERO));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let store = std::sync::Arc::clone(&store);
        let claim_time = std::sync::Arc::clone(&claim_time);
        workers.spawn(async move {
            let (mut claims, mut done) = (0u64, 0u64);
            loop {
                let req = ClaimRequest {
                    now,
                    lease: chrono::Duration::seconds(60),
                    limit: 256,
                    room: EndpointRoom::unlimited(),
                };
                let began = std::time::Instant::now();
                let claimed = store.claim_deliveries(&req).await.unwrap();
                *claim_time.lock().unwrap() += began.elapsed();
                if claimed.is_empty() {
                    return (claims, done);
                }
                claims += 1;
                let outcomes = claimed
                    .iter()
                    .map(|c| AttemptOutcome {
                        delivery_id: c.delivery.id,
                        lease: c.lease.clone(),
                        attempt: Some(NewAttempt {
                            id: vow_core::AttemptId::new(),
                            started_at: now,
                            url: c.endpoint.url.clone(),
                            response_status: Some(200),
                            response: "ok".into(),
                            duration_ms: 3,
                            success: true,
                            error: None,
                            trigger: AttemptTrigger::Scheduled,
                        }),
                        next: NextState::Delivered,
                        now,
                    })
                    .collect();
                let results = store.record_attempts(outcomes, 3).await.unwrap();
                assert!(results.iter().all(|r| matches!(r, Recorded::Stored { .. })));
                done += results.len() as u64;
            }
        });
    }
    let (mut claims, mut done) = (0, 0);
    while let Some(joined) = workers.join_next().await {
        let (c, d) = joined.unwrap();
        claims += c;
        done += d;
    }
    let secs = started.elapsed().as_secs_f64();
    let in_claims = claim_time.lock().unwrap().as_secs_f64();
    assert_eq!(done, messages as u64 * 4);
    println!(
        "{done} deliveries claimed and recorded in {secs:.2}s = {:.0}/s; {claims} claims of up \
         to 256, {:.2} ms each on average",
        done as f64 / secs,
        in_claims * 1000.0 / claims as f64
    );
}
