//! `Idempotency-Key` under faults, on SQLite and on PostgreSQL, each case counting the rows the
//! store holds afterwards:
//! - `kill -9` of a real `vow serve` after the write committed and before the response: the
//!   retry, on a restarted process, replays the committed outcome;
//! - a client that hangs up mid-request: after the whole request, the retry gets the original
//!   outcome; after half a body, nothing ran and the retry runs once;
//! - a lease that expired is taken over, and the stale owner's completion is fenced; a live
//!   claim answers 409 with `Retry-After`;
//! - the record store unavailable: 503 problem, and nothing cached (the retry runs fresh).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::{Method, Response};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use vow_core::{AppId, MessageId};
use vow_idempotency::fingerprint::canonical_body;
use vow_idempotency::IdempotencyKey;
use vow_server::startup::Stores;
use vow_store::idempotency::{
    Begun, Completion, Fingerprint, KeyState, KeyStatus, LeaseToken, Render, Scope, Settings,
    StoredResponse,
};
use vow_store::{
    CreatedMessage, MessageCreate, MessageFilter, NewMessage, Order, Seek, Store, StoreError,
    StoreResult,
};

use crate::child::Vow;
use crate::helpers::{eventually, into_parts, test_config, Backend, TestApp, TOKEN};

/// The route template records of message creation are scoped to (and, having no other
/// parameter, what its fingerprint covers besides the body).
const ROUTE: &str = "/api/v1/app/{app_id}/msg";

const PROBLEM: &str = "application/problem+json";

/// How often a bounded wait looks again.
const POLL: Duration = Duration::from_millis(20);

/// A message body, as the bytes sent (and fingerprinted).
fn message(amount: i64) -> Vec<u8> {
    let body =
        json!({"eventType": "invoice.paid", "payload": {"amount": amount, "currency": "EUR"}});
    serde_json::to_vec(&body).unwrap()
}

/// POSTs `raw` as a message of `app_id` to `base` with `Idempotency-Key: key`, and with
/// `Prefer: wait=N` when `wait` is given.
async fn post(
    client: &reqwest::Client,
    base: &str,
    app_id: &str,
    key: &str,
    raw: &[u8],
    wait: Option<u64>,
) -> reqwest::Result<Response> {
    let mut req = client
        .request(Method::POST, format!("{base}/api/v1/app/{app_id}/msg"))
        .bearer_auth(TOKEN)
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body(raw.to_vec());
    if let Some(secs) = wait {
        req = req.header("prefer", format!("wait={secs}"));
    }
    req.send().await
}

/// [`post`] to `app`'s server.
async fn send(app: &TestApp, app_id: &str, key: &str, raw: &[u8], wait: Option<u64>) -> Response {
    post(&app.client, &app.base, app_id, key, raw, wait)
        .await
        .unwrap()
}

fn header<'a>(r: &'a Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).map(|v| v.to_str().unwrap())
}

/// Status, `Idempotent-Replayed`, content type and JSON body.
async fn parts(r: Response) -> (u16, Option<String>, String, Value) {
    let replayed = header(&r, "idempotent-replayed").map(str::to_owned);
    let ct = header(&r, "content-type").unwrap_or_default().to_owned();
    let (status, body) = into_parts(r).await;
    (status, replayed, ct, body)
}

/// The ids of an application's stored messages.
async fn stored(store: &dyn Store, app_id: &str) -> Vec<String> {
    let seek = Seek::for_iterator(None, Order::Descending, 1000);
    let rows = store
        .list_messages(
            AppId::parse(app_id).unwrap(),
            &MessageFilter::default(),
            &seek,
        )
        .await
        .unwrap();
    rows.into_iter().map(|m| m.id.to_string()).collect()
}

/// The endpoint ids of a message's stored deliveries, sorted.
async fn delivered_to(store: &dyn Store, app_id: &str, msg: &str) -> Vec<String> {
    let rows = store
        .list_deliveries(
            AppId::parse(app_id).unwrap(),
            MessageId::parse(msg).unwrap(),
        )
        .await
        .unwrap();
    let mut endpoints: Vec<_> = rows
        .into_iter()
        .map(|d| d.endpoint_id.to_string())
        .collect();
    endpoints.sort();
    endpoints
}

/// The scope the server records a message create of `app_id` under with `key`.
fn scope(app_id: &str, key: &str) -> Scope {
    Scope {
        principal: "admin".into(),
        application: Some(app_id.to_owned()),
        method: "POST".into(),
        route: ROUTE.into(),
        key: IdempotencyKey::parse(key).unwrap(),
    }
}

/// Where `key` stands for `app_id`'s message creates, read through the store.
async fn key_status(store: &dyn Store, app_id: &str, key: &str) -> Option<KeyStatus> {
    store
        .idempotency_status(&scope(app_id, key), Utc::now())
        .await
        .unwrap()
}

// ---- 1. kill -9 between the commit and the response -------------------------------------------

/// A `vow serve` child (`child.rs`) with fast retries, and the fault hook that holds a response
/// once its write committed (in the binary only with the test-only feature `fault-hooks`, which
/// vow-server's dev-dependency on itself turns on for these tests).
const RETRIES: (&str, &str) = ("VOW_RETRY_SCHEDULE", "1s,1s,1s");
const HANG_AFTER_COMMIT: (&str, &str) = ("VOW_TEST_HANG_AFTER_COMMIT", "1");

/// A receiver that accepts every webhook (the endpoints' deliveries go somewhere real).
async fn receiver() -> String {
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(|| async { axum::http::StatusCode::NO_CONTENT }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// `store` counts the rows `vow serve` on `database_url` writes.
async fn a_kill_9_after_the_commit_is_replayed_on_restart(store: Arc<dyn Store>, url: String) {
    let hook = receiver().await;
    let mut vow = Vow::start(&url, &[RETRIES, HANG_AFTER_COMMIT]).await;
    let client = reqwest::Client::new();
    let call = |path: String, body: Value| {
        client
            .post(format!("{}{path}", vow.base))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
    };
    // Unkeyed creates answer normally with the hook set.
    let (status, app) = into_parts(
        call("/api/v1/app".into(), json!({"name": "Shop"}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{app}");
    let app_id = app["id"].as_str().unwrap().to_owned();
    let mut endpoints = Vec::new();
    for n in 0..2 {
        let body = json!({"url": format!("{hook}?n={n}")});
        let r = call(format!("/api/v1/app/{app_id}/endpoint"), body);
        let (status, ep) = into_parts(r.await.unwrap()).await;
        assert_eq!(status, 201, "{ep}");
        endpoints.push(ep["id"].as_str().unwrap().to_owned());
    }
    endpoints.sort();

    let raw = message(42);
    let first = tokio::spawn({
        let (client, base, app_id, raw) = (
            client.clone(),
            vow.base.clone(),
            app_id.clone(),
            raw.clone(),
        );
        async move { post(&client, &base, &app_id, "crash-1", &raw, None).await }
    });
    // The write commits (message, deliveries, record and response in one transaction)...
    let committed = eventually(
        "the message row is committed",
        POLL,
        Duration::from_secs(30),
        || {
            let (store, app_id) = (store.clone(), app_id.clone());
            async move { stored(store.as_ref(), &app_id).await.pop() }
        },
    )
    .await;
    let status = key_status(store.as_ref(), &app_id, "crash-1")
        .await
        .unwrap();
    assert_eq!(
        status.state,
        KeyState::Completed,
        "the record committed with it"
    );
    assert_eq!(status.resource.as_deref(), Some(committed.as_str()));
    // ...and the response is never sent.
    assert!(!first.is_finished(), "the hook holds the response back");
    vow.kill_9();
    let lost = tokio::time::timeout(Duration::from_secs(10), first)
        .await
        .expect("the killed process's connection closes")
        .unwrap();
    assert!(lost.is_err(), "the client never got an answer: {lost:?}");

    // Restarted on the same data, without the hook: the retry replays the committed outcome.
    let vow = Vow::start(&url, &[RETRIES]).await;
    let again = post(&client, &vow.base, &app_id, "crash-1", &raw, None)
        .await
        .unwrap();
    let (status, replayed, ct, body) = parts(again).await;
    assert_eq!((status, ct.as_str()), (202, "application/json"), "{body}");
    assert_eq!(replayed.as_deref(), Some("true"));
    assert_eq!(body["id"], committed.as_str());
    assert_eq!(
        stored(store.as_ref(), &app_id).await,
        vec![committed.clone()]
    );
    assert_eq!(
        delivered_to(store.as_ref(), &app_id, &committed).await,
        endpoints,
        "one delivery per endpoint"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_kill_9_after_the_commit_is_replayed_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vow.db");
    // Created and migrated here; `vow serve` opens the same file (WAL: this reads alongside).
    let store = vow_store_sqlite::SqliteStore::open(&path).unwrap();
    let url = format!("sqlite://{}", path.display());
    a_kill_9_after_the_commit_is_replayed_on_restart(Arc::new(store), url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_kill_9_after_the_commit_is_replayed_on_restart() {
    let (store, url) = vow_store_postgres::testing::fresh_store().await;
    a_kill_9_after_the_commit_is_replayed_on_restart(Arc::new(store), url).await;
}

// ---- 2. a client that hangs up mid-request ----------------------------------------------------

/// Opens a raw connection to `app`'s server and writes a keyed message create on it, with only
/// the first `sent` bytes of `raw` as its body (`content-length` says all of it).
async fn open_request(
    app: &TestApp,
    app_id: &str,
    key: &str,
    raw: &[u8],
    sent: usize,
) -> TcpStream {
    let addr = app.base.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/v1/app/{app_id}/msg HTTP/1.1\r\n\
         host: {addr}\r\n\
         authorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\n\
         idempotency-key: {key}\r\n\
         content-length: {}\r\n\r\n",
        raw.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&raw[..sent]).await.unwrap();
    stream.flush().await.unwrap();
    stream
}

/// The retry of `key` (waiting up to 5 s for a first request still in flight) gets the first
/// request's outcome: 202, replayed; that is the one message stored, with one delivery, and
/// the record holds it.
async fn the_retry_replays_the_one_message(app: &TestApp, app_id: &str, key: &str, raw: &[u8]) {
    let (status, replayed, _, body) = parts(send(app, app_id, key, raw, Some(5)).await).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        replayed.as_deref(),
        Some("true"),
        "the first request's outcome"
    );
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(stored(app.store.as_ref(), app_id).await, vec![id.clone()]);
    assert_eq!(app.deliveries_of(app_id, &id).await.len(), 1);
    let status = key_status(app.store.as_ref(), app_id, key).await.unwrap();
    assert_eq!(
        (status.state, status.resource.as_deref()),
        (KeyState::Completed, Some(id.as_str()))
    );
}

/// The whole request, and the socket closed at once, unread. Whether it runs depends on where
/// the server is when it sees the hang-up: hyper drops a request whose connection closes
/// before its handler has taken the body (it reads the body and the end of the stream in one
/// go), and then nothing ran; once the handler has begun the record, the operation runs in its
/// own task to the end. Either way the key runs at most once: the retry gets 202 with the one
/// stored message, a replay exactly when the first request ran.
async fn a_client_that_hangs_up_at_once_runs_at_most_once(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({"url": "https://a.example/hook"}))
        .await;
    let raw = message(7);
    drop(open_request(&app, &app_id, "gone-1", &raw, raw.len()).await);
    let (status, replayed, _, body) =
        parts(send(&app, &app_id, "gone-1", &raw, Some(5)).await).await;
    assert_eq!(status, 202, "{body}");
    assert!(
        matches!(replayed.as_deref(), None | Some("true")),
        "{replayed:?}"
    );
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(stored(app.store.as_ref(), &app_id).await, vec![id.clone()]);
    assert_eq!(app.deliveries_of(&app_id, &id).await.len(), 1);
    let status = key_status(app.store.as_ref(), &app_id, "gone-1")
        .await
        .unwrap();
    assert_eq!(
        (status.state, status.resource.as_deref()),
        (KeyState::Completed, Some(id.as_str()))
    );
    let first = if replayed.is_some() {
        "ran"
    } else {
        "did not run (dropped, or it lost the key to the retry)"
    };
    eprintln!("the request whose client hung up at once {first}");
}

/// The whole request; once its record is begun (the operation is under way, or done), the
/// client closes the socket without reading: the retry gets the original outcome.
async fn a_client_that_hangs_up_once_its_request_began_gets_the_outcome_on_retry(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({"url": "https://a.example/hook"}))
        .await;
    let raw = message(7);
    let stream = open_request(&app, &app_id, "gone-2", &raw, raw.len()).await;
    eventually(
        "the request begins its record",
        POLL,
        Duration::from_secs(10),
        || key_status(app.store.as_ref(), &app_id, "gone-2"),
    )
    .await;
    drop(stream);
    the_retry_replays_the_one_message(&app, &app_id, "gone-2", &raw).await;
}

/// Strictly mid-operation, on PostgreSQL: with the `messages` table locked by another
/// transaction, the request begins its record and blocks in its write. The client hangs up
/// (half-closes, and reads only the server closing the connection: no answer), so the
/// connection and its handler are gone while the write is pending. Then the lock goes: the
/// operation, in its own task, commits, and the retry replays it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_client_that_hangs_up_mid_write_gets_the_outcome_on_retry() {
    use sqlx::Connection;
    use tokio::io::AsyncReadExt;

    let (store, url) = vow_store_postgres::testing::fresh_store().await;
    let stores = Stores::new(store);
    let app = TestApp::spawn_on(Backend::Postgres, test_config(&[]), stores, Box::new(())).await;
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({"url": "https://a.example/hook"}))
        .await;
    let raw = message(7);

    let mut locker = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut lock = locker.begin().await.unwrap();
    sqlx::query("LOCK TABLE messages IN EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let mut stream = open_request(&app, &app_id, "gone-3", &raw, raw.len()).await;
    // The key has no record, so the request claims it inside its write's transaction, which
    // now waits for the lock: nothing of it is visible yet.
    let watcher = sqlx::PgPool::connect(&url).await.unwrap();
    eventually(
        "the request waits for the lock in its write",
        POLL,
        Duration::from_secs(10),
        || {
            let watcher = watcher.clone();
            async move {
                let waiting: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE wait_event_type = 'Lock' AND datname = current_database()",
                )
                .fetch_one(&watcher)
                .await
                .unwrap();
                (waiting > 0).then_some(())
            }
        },
    )
    .await;
    assert_eq!(
        key_status(app.store.as_ref(), &app_id, "gone-3").await,
        None
    );

    stream.shutdown().await.unwrap();
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the server closes the connection it saw hang up");
    assert!(
        closed.is_err() || answer.is_empty(),
        "no answer was sent: {:?}",
        String::from_utf8_lossy(&answer)
    );
    drop(stream);
    assert!(
        stored(app.store.as_ref(), &app_id).await.is_empty(),
        "still mid-write"
    );

    lock.commit().await.unwrap();
    the_retry_replays_the_one_message(&app, &app_id, "gone-3", &raw).await;
}

async fn a_client_that_hangs_up_mid_body_ran_nothing_and_the_retry_runs_once(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({"url": "https://a.example/hook"}))
        .await;
    let raw = message(8);
    drop(open_request(&app, &app_id, "half-1", &raw, raw.len() / 2).await);
    let (status, replayed, _, body) =
        parts(send(&app, &app_id, "half-1", &raw, Some(5)).await).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(replayed, None, "the half request never ran: this one did");
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(stored(app.store.as_ref(), &app_id).await, vec![id.clone()]);
    assert_eq!(app.deliveries_of(&app_id, &id).await.len(), 1);
    // Again: now a replay, still the one message.
    let (status, replayed, _, again) = parts(send(&app, &app_id, "half-1", &raw, None).await).await;
    assert_eq!((status, replayed.as_deref()), (202, Some("true")));
    assert_eq!(again["id"], id.as_str());
    assert_eq!(stored(app.store.as_ref(), &app_id).await, vec![id]);
}

// ---- 3. lease expiry, takeover, and the fenced stale owner ------------------------------------

async fn an_expired_lease_is_taken_over_and_the_stale_owner_is_fenced(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({"url": "https://a.example/hook"}))
        .await;
    let raw = message(9);
    let scope = scope(&app_id, "lease-1");
    let fingerprint = Fingerprint::of("POST", ROUTE, &raw);
    // An owner that began 31 s ago (the lease is the default 30 s) and never finished.
    let stale_at = Utc::now() - chrono::Duration::seconds(31);
    let begun = app
        .store
        .begin_idempotent(
            &scope,
            &fingerprint,
            &canonical_body(&raw),
            stale_at,
            &Settings::default(),
        )
        .await
        .unwrap();
    let Begun::Owner(stale) = begun else {
        panic!("{begun:?}")
    };

    let (status, replayed, _, body) = parts(send(&app, &app_id, "lease-1", &raw, None).await).await;
    assert_eq!(status, 202, "taken over: {body}");
    assert_eq!(replayed, None);
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(stored(app.store.as_ref(), &app_id).await, vec![id.clone()]);

    // The stale owner wakes up and completes its write: refused, and nothing written.
    let stale_id = MessageId::new();
    let applied = owner_writes(&app, &app_id, &scope, stale.clone(), stale_id, stale_at).await;
    assert!(matches!(applied, Err(StoreError::Fenced)), "{applied:?}");
    let refusal = StoredResponse {
        status: 404,
        headers: Vec::new(),
        body: Vec::new(),
        resource: None,
    };
    let completed = app
        .store
        .complete_idempotent(&scope, &stale, refusal, Utc::now(), &Settings::default())
        .await;
    assert!(
        matches!(completed, Err(StoreError::Fenced)),
        "{completed:?}"
    );
    assert_eq!(
        stored(app.store.as_ref(), &app_id).await,
        vec![id.clone()],
        "exactly the takeover's message"
    );
    assert!(app
        .deliveries_of(&app_id, &stale_id.to_string())
        .await
        .is_empty());
    assert_eq!(app.deliveries_of(&app_id, &id).await.len(), 1);
    // The record holds the takeover's outcome, and replays it.
    let (status, replayed, _, again) =
        parts(send(&app, &app_id, "lease-1", &raw, None).await).await;
    assert_eq!((status, replayed.as_deref()), (202, Some("true")));
    assert_eq!(again["id"], id.as_str());

    // A live claim held elsewhere: 409 with Retry-After, and nothing written.
    claim_now(&app, &app_id, "live-1", &raw).await;
    let r = send(&app, &app_id, "live-1", &raw, None).await;
    let retry_after: u64 = header(&r, "retry-after")
        .expect("409 says when to retry")
        .parse()
        .unwrap();
    let (status, _, ct, problem) = parts(r).await;
    assert_eq!((status, ct.as_str()), (409, PROBLEM), "{problem}");
    assert_eq!(
        problem["type"],
        "urn:vow:problem:idempotency-key-in-progress"
    );
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    assert_eq!(stored(app.store.as_ref(), &app_id).await, vec![id]);
    let status = key_status(app.store.as_ref(), &app_id, "live-1")
        .await
        .unwrap();
    assert_eq!(
        (status.state, status.resource),
        (KeyState::InProgress, None),
        "the claim is still the other request's"
    );
}

/// The message create `token`'s owner of `scope` would commit: message `id`, with its record
/// completed in the same transaction, through the store.
async fn owner_writes(
    app: &TestApp,
    app_id: &str,
    scope: &Scope,
    token: LeaseToken,
    id: MessageId,
    at: DateTime<Utc>,
) -> StoreResult<(CreatedMessage, Option<StoredResponse>)> {
    let new = NewMessage {
        id,
        app_id: AppId::parse(app_id).unwrap(),
        event_id: None,
        event_type: "invoice.paid".into(),
        channels: None,
        payload: r#"{"amount":9,"currency":"EUR"}"#.into(),
        payload_expires_at: at + chrono::Duration::days(30),
        now: at,
        traceparent: None,
    };
    let body = format!(r#"{{"id":"{id}"}}"#).into_bytes();
    let completion = Completion {
        scope: scope.clone(),
        token,
        fresh: None,
        now: at,
        settings: Settings::default(),
        render: Render::Ready(StoredResponse {
            status: 202,
            headers: vec![("content-type".into(), "application/json".into())],
            body,
            resource: Some(id.to_string()),
        }),
    };
    let create = MessageCreate {
        new,
        only: None,
        app: None,
    };
    app.store
        .create_message_keyed(create, Some(completion))
        .await
}

/// Fenced by the token alone: while the owner that took an expired lease over is still running
/// (its record in progress), the stale owner's write is refused; the new owner's commits, and
/// the key replays it over HTTP.
async fn a_stale_owner_is_fenced_while_the_new_owner_still_runs(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({"url": "https://a.example/hook"}))
        .await;
    let raw = message(9);
    let scope = scope(&app_id, "lease-2");
    let (fingerprint, canonical) = (Fingerprint::of("POST", ROUTE, &raw), canonical_body(&raw));
    let stale_at = Utc::now() - chrono::Duration::seconds(31);
    let settings = Settings::default();
    let begin = |at| {
        app.store
            .begin_idempotent(&scope, &fingerprint, &canonical, at, &settings)
    };
    let Begun::Owner(stale) = begin(stale_at).await.unwrap() else {
        panic!("the first claim owns the key")
    };
    let now = Utc::now();
    let begun = begin(now).await.unwrap();
    let Begun::TakenOver(taken) = begun else {
        panic!("the expired lease is taken over: {begun:?}")
    };
    assert_ne!(stale, taken);

    let applied = owner_writes(&app, &app_id, &scope, stale, MessageId::new(), stale_at).await;
    assert!(matches!(applied, Err(StoreError::Fenced)), "{applied:?}");
    assert!(stored(app.store.as_ref(), &app_id).await.is_empty());
    let status = key_status(app.store.as_ref(), &app_id, "lease-2")
        .await
        .unwrap();
    assert_eq!(status.state, KeyState::InProgress, "still the new owner's");

    let id = MessageId::new();
    owner_writes(&app, &app_id, &scope, taken, id, now)
        .await
        .unwrap();
    assert_eq!(
        stored(app.store.as_ref(), &app_id).await,
        vec![id.to_string()]
    );
    assert_eq!(app.deliveries_of(&app_id, &id.to_string()).await.len(), 1);
    let (status, replayed, _, body) = parts(send(&app, &app_id, "lease-2", &raw, None).await).await;
    assert_eq!((status, replayed.as_deref()), (202, Some("true")), "{body}");
    assert_eq!(body["id"], id.to_string());
    assert_eq!(
        stored(app.store.as_ref(), &app_id).await,
        vec![id.to_string()]
    );
}

/// Claims `key` for `raw` through the store, now: a live lease another request holds.
async fn claim_now(app: &TestApp, app_id: &str, key: &str, raw: &[u8]) {
    let scope = scope(app_id, key);
    let fingerprint = Fingerprint::of("POST", ROUTE, raw);
    let begun = app
        .store
        .begin_idempotent(
            &scope,
            &fingerprint,
            &canonical_body(raw),
            Utc::now(),
            &Settings::default(),
        )
        .await
        .unwrap();
    assert!(matches!(begun, Begun::Owner(_)), "{begun:?}");
}

on_both_stores!(
    a_client_that_hangs_up_at_once_runs_at_most_once,
    a_client_that_hangs_up_once_its_request_began_gets_the_outcome_on_retry,
    a_client_that_hangs_up_mid_body_ran_nothing_and_the_retry_runs_once,
    an_expired_lease_is_taken_over_and_the_stale_owner_is_fenced,
    a_stale_owner_is_fenced_while_the_new_owner_still_runs,
);

// ---- 4. the record store unavailable ----------------------------------------------------------

/// Asserts `r` is the 503 problem of an unavailable record store.
async fn assert_store_unavailable(r: Response) {
    let (status, replayed, ct, problem) = parts(r).await;
    assert_eq!((status, ct.as_str()), (503, PROBLEM), "{problem}");
    assert_eq!(
        problem["type"],
        "urn:vow:problem:idempotency-store-unavailable"
    );
    assert_eq!(replayed, None);
}

/// With the store back, nothing was recorded under `key`, and the same key and body run
/// fresh, once.
async fn the_retry_runs_fresh_once(app: &TestApp, app_id: &str, key: &str, raw: &[u8]) {
    assert!(
        key_status(app.store.as_ref(), app_id, key).await.is_none(),
        "no record was left under the key"
    );
    assert!(stored(app.store.as_ref(), app_id).await.is_empty());
    let (status, replayed, _, body) = parts(send(app, app_id, key, raw, None).await).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(replayed, None, "a fresh run, not a replay");
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(stored(app.store.as_ref(), app_id).await, vec![id.clone()]);
    assert_eq!(app.deliveries_of(app_id, &id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_unavailable_store_is_a_503_and_nothing_is_cached() {
    let (store, url) = vow_store_postgres::testing::fresh_store().await;
    let stores = Stores::new(store.clone());
    let app = TestApp::spawn_on(Backend::Postgres, test_config(&[]), stores, Box::new(())).await;
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({"url": "https://a.example/hook"}))
        .await;
    let raw = message(11);
    // The server's pool is closed under it: every query now fails as unavailable.
    tokio::time::timeout(Duration::from_secs(10), store.close())
        .await
        .expect("the pool closes");
    assert_store_unavailable(send(&app, &app_id, "down-1", &raw, None).await).await;
    drop(app);

    // A new server on the same schema.
    let store = vow_store_postgres::PgStore::connect(&url, 4).await.unwrap();
    let app = TestApp::spawn_on(
        Backend::Postgres,
        test_config(&[]),
        Stores::new(store),
        Box::new(()),
    )
    .await;
    the_retry_runs_fresh_once(&app, &app_id, "down-1", &raw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_unavailable_store_is_a_503_and_nothing_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vow.db");
    let store = vow_store_sqlite::SqliteStore::open(&path).unwrap();
    let app = TestApp::spawn_on(
        Backend::Sqlite,
        test_config(&[]),
        Stores::new(store),
        Box::new(dir),
    )
    .await;
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({"url": "https://a.example/hook"}))
        .await;
    let raw = message(12);
    // Another connection holds the write lock past the store's busy timeout (5 s): the
    // record cannot be begun.
    let lock = rusqlite::Connection::open(&path).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = Instant::now();
    let refused = send(&app, &app_id, "locked-1", &raw, None).await;
    let waited = started.elapsed();
    assert_store_unavailable(refused).await;
    assert!(
        waited >= Duration::from_secs(4),
        "after the busy timeout: {waited:?}"
    );
    lock.execute_batch("ROLLBACK").unwrap();
    drop(lock);
    the_retry_runs_fresh_once(&app, &app_id, "locked-1", &raw).await;
}
