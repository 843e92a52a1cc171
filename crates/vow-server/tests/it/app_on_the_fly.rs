//! A message posted to an application uid that names none yet creates the application from
//! `MessageIn.application` in the message's own transaction: concurrent keyed creates make one
//! application and one message, and a create that dies mid-write leaves no application behind.

use std::time::Duration;

use serde_json::{json, Value};
use vow_server::startup::Stores;
use vow_store::{AppKey, MessageFilter, Order, Seek};

use crate::helpers::*;

const PATH: &str = "/api/v1/app/acme-new/msg";

fn body() -> Value {
    json!({"eventType": "invoice.paid", "payload": {"n": 1}, "application": {"name": "Acme"}})
}

/// How many applications there are, and the messages of `acme-new` if it exists.
async fn books(app: &TestApp) -> (usize, Vec<String>) {
    let seek = Seek::for_iterator(None, Order::Descending, 100);
    let apps = app.store.list_applications(&seek).await.unwrap().len();
    let Some(acme) = app
        .store
        .get_application(&AppKey::Uid("acme-new".into()))
        .await
        .unwrap()
    else {
        return (apps, Vec::new());
    };
    let messages = app
        .store
        .list_messages(acme.id, &MessageFilter::default(), &seek)
        .await
        .unwrap();
    (
        apps,
        messages.into_iter().map(|m| m.id.to_string()).collect(),
    )
}

/// POSTs [`body`] to [`PATH`] on `base`, with `Idempotency-Key: key` when given.
async fn create(client: reqwest::Client, base: String, key: Option<&str>) -> (u16, Value) {
    let mut req = client.post(format!("{base}{PATH}")).bearer_auth(TOKEN);
    if let Some(key) = key {
        req = req.header("idempotency-key", key);
    }
    into_parts(req.json(&body()).send().await.unwrap()).await
}

async fn keyed(app: &TestApp, key: &str) -> (u16, Value) {
    create(app.client.clone(), app.base.clone(), Some(key)).await
}

async fn concurrent_keyed_creates_to_a_new_uid_make_one_application_and_one_message(app: TestApp) {
    let racing: Vec<_> = (0..20)
        .map(|_| {
            tokio::spawn(create(
                app.client.clone(),
                app.base.clone(),
                Some("first-order"),
            ))
        })
        .collect();
    let mut ids = Vec::new();
    for task in racing {
        match task.await.unwrap() {
            (202, out) => ids.push(out["id"].as_str().unwrap().to_owned()),
            // A duplicate that arrived while the first was in flight.
            (409, out) => assert_eq!(out["type"], "urn:vow:problem:idempotency-key-in-progress"),
            other => panic!("unexpected {other:?}"),
        }
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "every 202 is the one message: {ids:?}");
    assert_eq!(books(&app).await, (1, ids));

    // Without a key, racing creates all land in the one application.
    let racing: Vec<_> = (0..10)
        .map(|_| tokio::spawn(create(app.client.clone(), app.base.clone(), None)))
        .collect();
    for task in racing {
        let (status, out) = task.await.unwrap();
        assert_eq!(status, 202, "{out}");
    }
    let (apps, messages) = books(&app).await;
    assert_eq!((apps, messages.len()), (1, 11));
}

on_both_stores!(concurrent_keyed_creates_to_a_new_uid_make_one_application_and_one_message,);

/// On PostgreSQL, with `messages` locked by another transaction, a keyed create to a new uid
/// waits in its write; its database session is then killed. Nothing of it survives: no
/// message and no application (they were one transaction), and the key is free for the retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_create_that_dies_mid_write_leaves_no_application_behind() {
    use sqlx::Connection;

    let (store, url) = vow_store_postgres::testing::fresh_store().await;
    let app = TestApp::spawn_on(
        Backend::Postgres,
        test_config(&[]),
        Stores::new(store),
        Box::new(()),
    )
    .await;
    let mut locker = sqlx::PgConnection::connect(&url).await.unwrap();
    let locker_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut locker)
        .await
        .unwrap();
    let mut lock = locker.begin().await.unwrap();
    sqlx::query("LOCK TABLE messages IN EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let pending = tokio::spawn(create(app.client.clone(), app.base.clone(), Some("dies")));
    let watcher = sqlx::PgPool::connect(&url).await.unwrap();
    // The create's session, waiting behind this lock: not any session waiting for a lock on the
    // server (another test's), nor this app's retention sweep, which also waits on `messages`.
    let waiting = "SELECT pid FROM pg_stat_activity \
                   WHERE $1 = ANY(pg_blocking_pids(pid)) AND query LIKE 'INSERT INTO messages%'";
    let pid: i32 = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(pid) = sqlx::query_scalar(waiting)
                .bind(locker_pid)
                .fetch_optional(&watcher)
                .await
                .unwrap()
            {
                break pid;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the create waits for the lock in its write");
    assert_eq!(books(&app).await, (0, vec![]), "nothing visible mid-write");

    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .execute(&watcher)
        .await
        .unwrap();
    let (status, out) = pending.await.unwrap();
    assert!(status >= 500, "the write died: {status} {out}");
    lock.commit().await.unwrap();
    assert_eq!(
        books(&app).await,
        (0, vec![]),
        "no application was left behind"
    );

    let (status, out) = keyed(&app, "dies").await;
    assert_eq!(status, 202, "the retry runs: {out}");
    assert_eq!(
        books(&app).await,
        (1, vec![out["id"].as_str().unwrap().to_owned()])
    );
}
