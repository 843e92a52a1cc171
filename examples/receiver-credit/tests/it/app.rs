//! [`TestApp`]: receiver-credit served on port 0 over a fresh database, on a pinned clock, with
//! senders that sign as Standard Webhooks and Stripe document it (HMAC-SHA256 computed here,
//! not with vow-signature) and the row counts the behaviours assert.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use receiver_credit::db::Db;
use receiver_credit::App;
use reqwest::{RequestBuilder, Response};
use tempfile::TempDir;

/// The Standard Webhooks secret the senders sign with (the Go library's test secret).
pub const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The secret being rotated out, still accepted.
pub const OLD_STANDARD_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
/// The Stripe-style secret (stripe-node's test secret).
pub const STRIPE_SECRET: &str = "whsec_test_secret";

/// The service's clock: 2030-01-01T00:00:00Z.
pub fn now() -> i64 {
    1_893_456_000
}

fn hmac_sha256(key: &[u8], content: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(content);
    mac.finalize().into_bytes().to_vec()
}

/// `v1,<base64 HMAC-SHA256(base64-decode(secret without whsec_), "id.timestamp.body")>`.
pub fn standard_signature(secret: &str, id: &str, timestamp: i64, body: &str) -> String {
    let key = BASE64.decode(secret.trim_start_matches("whsec_")).unwrap();
    let mac = hmac_sha256(&key, format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", BASE64.encode(mac))
}

/// `t=<timestamp>,v1=<hex HMAC-SHA256(secret as text, "timestamp.body")>`.
pub fn stripe_signature(timestamp: i64, body: &str) -> String {
    let mac = hmac_sha256(
        STRIPE_SECRET.as_bytes(),
        format!("{timestamp}.{body}").as_bytes(),
    );
    format!("t={timestamp},v1={}", hex::encode(mac))
}

/// A running receiver-credit.
pub struct TestApp {
    /// The service's state (its database and fault switches).
    pub app: App,
    base: String,
    client: reqwest::Client,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: Option<TempDir>,
}

impl TestApp {
    /// On a SQLite file in a new temporary directory.
    pub async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::sqlite(&dir.path().join("credit.db")).unwrap();
        Self::spawn(db, Some(dir)).await
    }

    /// On a new schema of the PostgreSQL server named by `VOW_TEST_DATABASE_URL`.
    pub async fn postgres() -> Self {
        let pool = crate::pg::fresh_schema(20).await;
        Self::spawn(Db::postgres_pool(pool).await.unwrap(), None).await
    }

    async fn spawn(db: Db, dir: Option<TempDir>) -> Self {
        let secrets = [STANDARD_SECRET, OLD_STANDARD_SECRET].map(String::from);
        let app = App::new(db)
            .with_standard_webhooks(&secrets)
            .unwrap()
            .with_stripe(&[STRIPE_SECRET.to_owned()])
            .unwrap()
            .with_clock(|| DateTime::<Utc>::from_timestamp(now(), 0).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(receiver_credit::serve(listener, app.clone()));
        Self {
            app,
            base,
            client: reqwest::Client::new(),
            server,
            _dir: dir,
        }
    }

    /// `POST /webhooks/{source}` with `body`, unsigned.
    pub fn post(&self, source: &str, body: &str) -> RequestBuilder {
        self.client
            .post(format!("{}/webhooks/{source}", self.base))
            .header("content-type", "application/json")
            .body(body.to_owned())
    }

    /// `body` as Standard Webhooks message `id`, signed at `timestamp` with `secret`.
    pub fn standard_with(
        &self,
        id: &str,
        timestamp: i64,
        body: &str,
        secret: &str,
    ) -> RequestBuilder {
        self.post(receiver_credit::STANDARD_WEBHOOKS, body)
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                standard_signature(secret, id, timestamp, body),
            )
    }

    /// `body` as Standard Webhooks message `id`, signed now.
    pub fn standard(&self, id: &str, body: &str) -> RequestBuilder {
        self.standard_with(id, now(), body, STANDARD_SECRET)
    }

    /// `body` signed Stripe-style at `timestamp`.
    pub fn stripe(&self, timestamp: i64, body: &str) -> RequestBuilder {
        self.post(receiver_credit::STRIPE, body)
            .header("stripe-signature", stripe_signature(timestamp, body))
    }

    /// `account`'s balance, read from the database (`None`: never credited).
    pub async fn balance(&self, account: &str) -> Option<i64> {
        self.app.db().balance(account).await.unwrap()
    }

    /// How many rows `table_and_where` has.
    pub async fn count(&self, table_and_where: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM {table_and_where}");
        match self.app.db() {
            Db::Sqlite(conn) => conn
                .lock()
                .unwrap()
                .query_row(&sql, [], |r| r.get(0))
                .unwrap(),
            Db::Postgres(pool) => sqlx::query_scalar(&sql).fetch_one(pool).await.unwrap(),
        }
    }

    /// The quarantine: source, event id and payload of each row.
    pub async fn quarantined(&self) -> Vec<(String, String, Vec<u8>)> {
        let sql = "SELECT source, event_id, payload FROM receiver_quarantine";
        match self.app.db() {
            Db::Sqlite(conn) => {
                let conn = conn.lock().unwrap();
                let mut statement = conn.prepare(sql).unwrap();
                let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)));
                rows.unwrap().map(Result::unwrap).collect()
            }
            Db::Postgres(pool) => sqlx::query_as(sql).fetch_all(pool).await.unwrap(),
        }
    }

    /// Rows in the claims, the quarantine and the balances together.
    pub async fn rows(&self) -> i64 {
        let mut total = 0;
        for table in ["receiver_claims", "receiver_quarantine", "balances"] {
            total += self.count(table).await;
        }
        total
    }
}

/// Sends `request` and reads the answer's status and JSON body.
pub async fn send(request: RequestBuilder) -> (u16, serde_json::Value) {
    let response: Response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
    }
}
