//! SQLite specifics: pragmas, data surviving a reopen, migrations on reopen, group commit.

use std::path::Path;

use chrono::{DateTime, Utc};
use vow_core::{AppId, EndpointId, MessageId};
use vow_store::{
    AppKey, ApplicationFields, EndpointFields, EndpointKey, MessageKey, NewApplication,
    NewEndpoint, NewMessage, Store, StoreError,
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
    assert_eq!(version, 1, "each migration applied once");
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
