//! A duplicate of a keyed request that is really in flight (issue 13, defects 2 and 3). With the
//! store's write lock held from another connection, the first request blocks in its write;
//! its duplicates get 409 with `Retry-After` while the lock is still held (or, with
//! `Prefer: wait=2`, after the wait), without holding a pool connection, so an unrelated request
//! is served while 20 of them wait; once the lock goes, the first request commits, the waiters
//! replay it, and one message exists. And a `Prefer: wait` whose wait outlasts the holder's
//! lease takes the record over and runs its own request.
//!
//! "While the lock is held" is proven by ordering: the test releases the lock only after the
//! answers it checks have arrived (a limit far above the wait only turns a hang into a failure).

use std::time::{Duration, Instant};

use reqwest::{Method, Response};
use serde_json::{json, Value};
use sqlx::Connection;
use vow_core::{AppId, MessageId};
use vow_server::startup::Stores;
use vow_store::idempotency::{Begun, Fingerprint, Scope, Settings};
use vow_store::{MessageFilter, MessageKey, Order, Seek, Store};

use crate::helpers::{test_config, Backend, TestApp, TOKEN};

const ROUTE: &str = "/api/v1/app/{app_id}/msg";
const IN_PROGRESS: &str = "urn:vow:problem:idempotency-key-in-progress";

/// Far above every wait in these tests: reaching it means a request hung on the lock.
const HANG: Duration = Duration::from_secs(20);

fn message(amount: i64) -> Value {
    json!({"eventType": "invoice.paid", "payload": {"amount": amount, "currency": "EUR"}})
}

/// POSTs `body` as a message of `app_id` with `key`, and `Prefer: wait=N` when given.
async fn post(
    client: reqwest::Client,
    base: String,
    app_id: String,
    key: &'static str,
    body: Value,
    wait: Option<u64>,
) -> Response {
    let mut req = client
        .request(Method::POST, format!("{base}/api/v1/app/{app_id}/msg"))
        .bearer_auth(TOKEN)
        .header("idempotency-key", key)
        .json(&body);
    if let Some(secs) = wait {
        req = req.header("prefer", format!("wait={secs}"));
    }
    req.send().await.unwrap()
}

/// Spawns [`post`] to `app`.
fn spawn_post(
    app: &TestApp,
    app_id: &str,
    key: &'static str,
    body: &Value,
    wait: Option<u64>,
) -> tokio::task::JoinHandle<Response> {
    let fut = post(
        app.client.clone(),
        app.base.clone(),
        app_id.to_owned(),
        key,
        body.clone(),
        wait,
    );
    tokio::spawn(fut)
}

fn header(r: &Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

/// Asserts `r` is the in-progress 409 with a `Retry-After`.
async fn assert_in_progress(r: Response) {
    assert_eq!(r.status(), 409);
    let retry_after: u64 = header(&r, "retry-after")
        .expect("a 409 in progress has Retry-After")
        .parse()
        .unwrap();
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], IN_PROGRESS, "{body}");
}

/// A retry of `key` without waiting replays the message `id`.
async fn the_retry_replays(app: &TestApp, app_id: &str, key: &'static str, body: Value, id: &str) {
    let again = post(
        app.client.clone(),
        app.base.clone(),
        app_id.to_owned(),
        key,
        body,
        None,
    )
    .await;
    assert_eq!(
        header(&again, "idempotent-replayed").as_deref(),
        Some("true")
    );
    assert_eq!(again.json::<Value>().await.unwrap()["id"], id);
}

/// The ids of an application's stored messages.
async fn stored(store: &dyn Store, app_id: &str) -> Vec<String> {
    let seek = Seek::for_iterator(None, Order::Descending, 1000);
    let app = AppId::parse(app_id).unwrap();
    let rows = store
        .list_messages(app, &MessageFilter::default(), &seek)
        .await
        .unwrap();
    rows.into_iter().map(|m| m.id.to_string()).collect()
}

/// The store's write lock, held from a connection of the test's own.
enum WriteLock {
    /// `LOCK TABLE messages` in an open transaction: a message insert waits for it.
    Postgres(sqlx::PgConnection),
    /// `BEGIN IMMEDIATE` on the database file: the writer's transaction waits for it (for at
    /// most its busy timeout, 5 s, so a test releases it well before).
    Sqlite(rusqlite::Connection),
}

impl WriteLock {
    async fn hold(&mut self) {
        match self {
            Self::Postgres(conn) => {
                sqlx::raw_sql("BEGIN; LOCK TABLE messages IN EXCLUSIVE MODE")
                    .execute(conn)
                    .await
                    .unwrap();
            }
            Self::Sqlite(conn) => conn.execute_batch("BEGIN IMMEDIATE").unwrap(),
        }
    }

    async fn release(&mut self) {
        match self {
            Self::Postgres(conn) => {
                sqlx::raw_sql("ROLLBACK").execute(conn).await.unwrap();
            }
            Self::Sqlite(conn) => conn.execute_batch("ROLLBACK").unwrap(),
        }
    }
}

/// A server on a fresh store, and a connection of the test's own to that store.
async fn lockable(backend: Backend) -> (TestApp, WriteLock) {
    match backend {
        Backend::Postgres => {
            let (store, url) = vow_store_postgres::testing::fresh_store().await;
            let lock = sqlx::PgConnection::connect(&url).await.unwrap();
            let stores = Stores::new(store);
            let app = TestApp::spawn_on(backend, test_config(&[]), stores, Box::new(())).await;
            (app, WriteLock::Postgres(lock))
        }
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("vow.db");
            let store = vow_store_sqlite::SqliteStore::open(&path).unwrap();
            let lock = rusqlite::Connection::open(&path).unwrap();
            let stores = Stores::new(store);
            let app = TestApp::spawn_on(backend, test_config(&[]), stores, Box::new(dir)).await;
            (app, WriteLock::Sqlite(lock))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_duplicate_of_a_request_in_flight_is_answered_while_the_write_lock_is_held() {
    let (app, lock) = lockable(Backend::Sqlite).await;
    a_duplicate_of_a_request_in_flight_is_answered_while_the_write_lock_is_held(app, lock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_duplicate_of_a_request_in_flight_is_answered_while_the_write_lock_is_held() {
    let (app, lock) = lockable(Backend::Postgres).await;
    a_duplicate_of_a_request_in_flight_is_answered_while_the_write_lock_is_held(app, lock).await;
}

async fn a_duplicate_of_a_request_in_flight_is_answered_while_the_write_lock_is_held(
    app: TestApp,
    mut lock: WriteLock,
) {
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({"url": "https://a.example/hook"}))
        .await;
    let body = message(7);
    lock.hold().await;

    // Two identical requests at once: one is in flight, blocked in its write; the other is its
    // duplicate, answered 409 while the lock is held (it cannot be the blocked one's answer).
    let first = spawn_post(&app, &app_id, "held-1", &body, None);
    let second = spawn_post(&app, &app_id, "held-1", &body, None);
    let (answered, mut in_flight) = tokio::time::timeout(HANG, async move {
        let (mut first, mut second) = (first, second);
        tokio::select! {
            r = &mut first => (r.unwrap(), second),
            r = &mut second => (r.unwrap(), first),
        }
    })
    .await
    .expect("a duplicate is answered while the first request waits for the lock");
    assert_in_progress(answered).await;

    // `Prefer: wait=2` waits its 2 s and answers 409: the lock is still held. Meanwhile 20
    // duplicates wait longer, and an unrelated request is served.
    let started = Instant::now();
    let waiting = spawn_post(&app, &app_id, "held-1", &body, Some(2));
    let waiters: Vec<_> = (0..20)
        .map(|_| spawn_post(&app, &app_id, "held-1", &body, Some(15)))
        .collect();
    let (status, apps) = tokio::time::timeout(HANG, app.get("/api/v1/app"))
        .await
        .expect("an unrelated request is served while 20 duplicates wait");
    assert_eq!(status, 200, "{apps}");
    assert_eq!(apps["data"].as_array().map(Vec::len), Some(1), "{apps}");
    let waited = tokio::time::timeout(HANG, waiting)
        .await
        .expect("Prefer: wait=2 answers while the lock is held")
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "it waited"
    );
    assert_in_progress(waited).await;
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "the 20 still wait"
    );
    assert!(
        tokio::time::timeout(Duration::ZERO, &mut in_flight)
            .await
            .is_err(),
        "the first request is still in its write"
    );
    assert!(
        stored(app.store.as_ref(), &app_id).await.is_empty(),
        "nothing committed while the lock is held"
    );

    lock.release().await;
    let first = in_flight.await.unwrap();
    assert_eq!(first.status(), 202);
    assert_eq!(header(&first, "idempotent-replayed"), None);
    let id = first.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for waiter in waiters {
        let r = waiter.await.unwrap();
        assert_eq!(r.status(), 202);
        assert_eq!(header(&r, "idempotent-replayed").as_deref(), Some("true"));
        assert_eq!(r.json::<Value>().await.unwrap()["id"], id.as_str());
    }
    the_retry_replays(&app, &app_id, "held-1", body, &id).await;
    assert_eq!(stored(app.store.as_ref(), &app_id).await, vec![id.clone()]);
    assert_eq!(app.deliveries_of(&app_id, &id).await.len(), 1);
}

/// Another request holds the key (begun through the store, as a handler does, and never
/// finished) with a lease that ends about a second from now. A request with `Prefer: wait=10`
/// arrives while the lease is live, waits, and when it ends takes the record over and runs its
/// own create: 202, not replayed, and the one message is the waiter's.
async fn a_wait_that_outlasts_the_holders_lease_takes_over_and_runs(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({"url": "https://a.example/hook"}))
        .await;
    let body = message(21);
    let raw = serde_json::to_vec(&body).unwrap();
    let scope = Scope {
        principal: "admin".into(),
        application: Some(app_id.clone()),
        method: "POST".into(),
        route: ROUTE.into(),
        key: vow_idempotency::IdempotencyKey::parse("late-1").unwrap(),
    };
    let canonical = vow_idempotency::fingerprint::canonical(&body);
    let settings = Settings::default();
    // Settings::default()'s lease is 30 s: it ends 1 s from now.
    let began = app.clock.now() - chrono::TimeDelta::seconds(29);
    let begun = app
        .store
        .begin_idempotent(
            &scope,
            &Fingerprint::of("POST", ROUTE, &raw),
            &canonical,
            began,
            &settings,
        )
        .await
        .unwrap();
    assert!(matches!(begun, Begun::Owner(_)), "{begun:?}");

    let r = post(
        app.client.clone(),
        app.base.clone(),
        app_id.clone(),
        "late-1",
        body.clone(),
        Some(10),
    )
    .await;
    assert_eq!(r.status(), 202, "the waiter took over and ran");
    assert_eq!(header(&r, "idempotent-replayed"), None);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(stored(app.store.as_ref(), &app_id).await, vec![id.clone()]);
    let created = app
        .store
        .get_message(
            AppId::parse(&app_id).unwrap(),
            &MessageKey::Id(MessageId::parse(&id).unwrap()),
        )
        .await
        .unwrap()
        .expect("the waiter's message");
    let payload: Value = serde_json::from_str(created.payload.as_deref().unwrap()).unwrap();
    assert_eq!(payload, body["payload"], "the waiter's body");
    assert_eq!(app.deliveries_of(&app_id, &id).await.len(), 1);
    the_retry_replays(&app, &app_id, "late-1", body, &id).await;
}

on_both_stores!(a_wait_that_outlasts_the_holders_lease_takes_over_and_runs);
