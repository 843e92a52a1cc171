//! `/health/live` and `/health/ready`: each readiness check answers what it checks, on both
//! stores: the store unreachable (PostgreSQL behind a proxy that is cut), a schema behind this
//! binary, the workers a process runs.

use std::time::Duration;

use serde_json::{json, Value};
use vow_server::startup::Stores;

use crate::cli_listen::Proxy;
use crate::helpers::{delivery_config, eventually, test_config, Backend, TestApp};

async fn ready(app: &TestApp) -> (u16, Value) {
    let resp = app
        .client
        .get(format!("{}/health/ready", app.base))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

async fn the_probes_answer_without_a_token_and_name_each_check(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let live = app
        .client
        .get(format!("{}/health/live", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    assert_eq!(
        live.json::<Value>().await.unwrap(),
        json!({"status": "live"})
    );
    let head = app
        .client
        .head(format!("{}/health/ready", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    // An API-only process (workers off) is ready on the store alone.
    let (status, body) = ready(&app).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"status": "ready", "checks": {"store": "ok", "schema": "current", "shutdown": "no"}})
    );
}

async fn a_process_with_workers_is_ready_while_they_run(backend: Backend) {
    let app = TestApp::spawn_with(backend, delivery_config("1s", &[])).await;
    let body = eventually(
        "the workers to start",
        Duration::from_millis(20),
        Duration::from_secs(10),
        || async {
            let (status, body) = ready(&app).await;
            (status == 200).then_some(body)
        },
    )
    .await;
    assert_eq!(body["checks"]["deliveryWorkers"], "running");
    assert_eq!(body["checks"]["inboundWorkers"], "running");
}

/// A server on a fresh store, and a function that sets the store's schema one migration back
/// (as a database migrated by an older binary is).
async fn spawn_rewindable(backend: Backend) -> (TestApp, impl AsyncFnOnce()) {
    let (stores, guard, at): (Stores, Box<dyn std::any::Any + Send>, String) = match backend {
        Backend::Sqlite => {
            let (store, dir) = vow_store_sqlite::testing::fresh_store();
            let path = dir.path().join("vow.db").display().to_string();
            (Stores::new(store), Box::new(dir), path)
        }
        Backend::Postgres => {
            let (store, url) = vow_store_postgres::testing::fresh_store().await;
            (Stores::new(store), Box::new(()), url)
        }
    };
    let app = TestApp::spawn_on(backend, test_config(&[]), stores, guard).await;
    let rewind = async move || match backend {
        Backend::Sqlite => {
            let conn = rusqlite::Connection::open(&at).unwrap();
            let version: i64 = conn
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .unwrap();
            conn.pragma_update(None, "user_version", version - 1)
                .unwrap();
        }
        Backend::Postgres => {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&at).await.unwrap();
            sqlx::query(
                "DELETE FROM _sqlx_migrations WHERE version = (SELECT max(version) FROM _sqlx_migrations)",
            )
            .execute(&mut conn)
            .await
            .unwrap();
        }
    };
    (app, rewind)
}

async fn a_schema_behind_this_binary_is_not_ready(backend: Backend) {
    let (app, rewind) = spawn_rewindable(backend).await;
    assert_eq!(ready(&app).await.0, 200);
    rewind().await;
    let (status, body) = ready(&app).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unready");
    assert_eq!(body["checks"]["store"], "ok");
    assert_eq!(body["checks"]["schema"], "behind: run vow migrate");
}

mod sqlite {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_probes_answer_without_a_token_and_name_each_check() {
        super::the_probes_answer_without_a_token_and_name_each_check(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_process_with_workers_is_ready_while_they_run() {
        super::a_process_with_workers_is_ready_while_they_run(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_schema_behind_this_binary_is_not_ready() {
        super::a_schema_behind_this_binary_is_not_ready(Backend::Sqlite).await;
    }
}

mod postgres {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_probes_answer_without_a_token_and_name_each_check() {
        super::the_probes_answer_without_a_token_and_name_each_check(Backend::Postgres).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_process_with_workers_is_ready_while_they_run() {
        super::a_process_with_workers_is_ready_while_they_run(Backend::Postgres).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_schema_behind_this_binary_is_not_ready() {
        super::a_schema_behind_this_binary_is_not_ready(Backend::Postgres).await;
    }

    /// PostgreSQL reached through a proxy: cut, the process is unready within the probe's
    /// wait, and ready again once the proxy is restored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreachable_store_is_not_ready_until_it_answers_again() {
        let (_, migrated) = vow_store_postgres::testing::fresh_store().await;
        let server = url::Url::parse(&migrated).unwrap();
        let upstream = format!(
            "{}:{}",
            server.host_str().unwrap(),
            server.port().unwrap_or(5432)
        );
        let proxy = Proxy::start(&upstream).await;
        let mut through = server.clone();
        let at = url::Url::parse(&proxy.url).unwrap();
        through.set_host(at.host_str()).unwrap();
        through.set_port(at.port()).unwrap();
        let store = vow_store_postgres::PgStore::connect(through.as_str(), 4)
            .await
            .unwrap();
        let app = TestApp::spawn_on(
            Backend::Postgres,
            test_config(&[]),
            Stores::new(store),
            Box::new(()),
        )
        .await;
        assert_eq!(ready(&app).await.0, 200);

        proxy.cut();
        let started = std::time::Instant::now();
        let (status, body) = ready(&app).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["checks"]["store"], "unreachable");
        assert_eq!(body["checks"]["schema"], "unknown");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the probe waits at most its limit"
        );

        proxy.restore();
        eventually(
            "readiness after the store is back",
            Duration::from_millis(100),
            Duration::from_secs(20),
            || async { (ready(&app).await.0 == 200).then_some(()) },
        )
        .await;
    }
}
