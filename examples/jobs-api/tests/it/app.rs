//! [`TestApp`]: jobs-api served on port 0 over a fresh database, on a clock the test moves, with
//! the requests and row counts the behaviours need.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use jobs_api::db::Db;
use jobs_api::App;
use reqwest::{RequestBuilder, Response};
use tempfile::TempDir;
use vow_idempotency::fingerprint::canonical_body;
use vow_idempotency::{postgres, sqlite};
use vow_idempotency::{Begun, Fingerprint, IdempotencyKey, Scope, Settings};

/// The instant the test clock starts at: 2030-01-01T00:00:00Z.
pub fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_893_456_000, 0).unwrap()
}

/// A running jobs-api.
pub struct TestApp {
    /// The service's state (its database and fault switch).
    pub app: App,
    base: String,
    client: reqwest::Client,
    clock: Arc<AtomicI64>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: Option<TempDir>,
}

impl TestApp {
    /// On a SQLite file in a new temporary directory.
    pub async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite(Some(&dir.path().join("jobs.db"))).unwrap();
        Self::spawn(db, Some(dir)).await
    }

    /// On a new schema of the PostgreSQL server named by `VOW_TEST_DATABASE_URL`.
    pub async fn postgres() -> Self {
        let pool = vow_pg_testing::pool(20).await;
        Self::spawn(Db::postgres_pool(pool).await.unwrap(), None).await
    }

    async fn spawn(db: Db, dir: Option<TempDir>) -> Self {
        let clock = Arc::new(AtomicI64::new(0));
        let offset = Arc::clone(&clock);
        let app = App::new(db)
            .with_clock(move || t0() + TimeDelta::seconds(offset.load(Ordering::SeqCst)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(jobs_api::serve(listener, app.clone()));
        Self {
            app,
            base,
            client: reqwest::Client::new(),
            clock,
            server,
            _dir: dir,
        }
    }

    /// Moves the service's clock `secs` forward.
    pub fn advance(&self, secs: i64) {
        self.clock.fetch_add(secs, Ordering::SeqCst);
    }

    /// `POST /jobs` with `body`, as JSON, and `Idempotency-Key: key` when there is one.
    pub fn post(&self, key: Option<&str>, body: &str) -> RequestBuilder {
        let request = self
            .client
            .post(format!("{}/jobs", self.base))
            .header("content-type", "application/json")
            .body(body.to_owned());
        match key {
            Some(key) => request.header("idempotency-key", key),
            None => request,
        }
    }

    /// [`TestApp::post`], sent.
    pub async fn send(&self, key: Option<&str>, body: &str) -> Response {
        self.post(key, body).send().await.unwrap()
    }

    /// `GET /jobs/{id}`'s status.
    pub async fn get_status(&self, id: &str) -> u16 {
        let url = format!("{}/jobs/{id}", self.base);
        self.client.get(url).send().await.unwrap().status().as_u16()
    }

    /// How many rows `table` has.
    pub async fn count(&self, table: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM {table}");
        match self.app.db() {
            Db::Sqlite(conn) => conn
                .lock()
                .unwrap()
                .query_row(&sql, [], |r| r.get(0))
                .unwrap(),
            Db::Postgres(pool) => sqlx::query_scalar(&sql).fetch_one(pool).await.unwrap(),
        }
    }

    /// Claims `key` for `body` as a request that is still running would have (its lease lasts
    /// 30 s from the test clock's start).
    pub async fn claim(&self, key: &str, body: &str) {
        let scope = Scope {
            principal: jobs_api::PRINCIPAL.into(),
            application: None,
            method: "POST".into(),
            route: jobs_api::JOBS_ROUTE.into(),
            key: IdempotencyKey::parse(key).unwrap(),
        };
        let fingerprint = Fingerprint::of("POST", jobs_api::JOBS_ROUTE, body.as_bytes());
        let canonical = canonical_body(body.as_bytes());
        let settings = Settings::default();
        let begun = match self.app.db() {
            Db::Sqlite(conn) => {
                let conn = conn.lock().unwrap();
                sqlite::begin(&conn, &scope, &fingerprint, &canonical, t0(), &settings)
            }
            Db::Postgres(pool) => {
                let mut conn = pool.acquire().await.unwrap();
                postgres::begin(&mut conn, &scope, &fingerprint, &canonical, t0(), &settings).await
            }
        };
        assert!(matches!(begun, Ok(Begun::Owner(_))), "{begun:?}");
    }

    /// Runs `sql` on the database.
    pub async fn execute(&self, sql: &str) {
        match self.app.db() {
            Db::Sqlite(conn) => conn.lock().unwrap().execute_batch(sql).unwrap(),
            Db::Postgres(pool) => drop(sqlx::raw_sql(sql).execute(pool).await.unwrap()),
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
    }
}
