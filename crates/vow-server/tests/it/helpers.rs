//! `TestApp`: a vow server on port 0 with a fresh store, a client that knows the admin token,
//! and direct access to the store for counting rows.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use figment::providers::{Format, Serialized, Toml};
use figment::Figment;
use reqwest::{Method, Response};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use vow_server::startup::{Server, Stores};
use vow_server::Config;
use vow_store::{DeliveryQueue, InboundStore, Store};

/// The admin token every test server uses.
pub const TOKEN: &str = "test-admin-token";

/// Which store a test runs on.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A running server and what tests need to poke it.
pub struct TestApp {
    pub backend: Backend,
    pub base: String,
    pub client: reqwest::Client,
    pub store: Arc<dyn Store>,
    pub queue: Arc<dyn DeliveryQueue>,
    pub inbound: Arc<dyn InboundStore>,
    /// The clock the server answers by: `advance` it to reach an expiry.
    pub clock: vow_server::http::Clock,
    shutdown: CancellationToken,
    _guard: Box<dyn Any + Send>,
}

/// A config from the built-in defaults only (the environment never leaks into tests), with
/// delivery workers off: API tests must not send anything anywhere.
pub fn test_config(overrides: &[(&str, &str)]) -> Config {
    config_with("delivery_workers = false", overrides)
}

/// [`test_config`] with `toml` (settings of any type) over it.
pub fn test_config_toml(toml: &str) -> Config {
    config_with(&format!("delivery_workers = false\n{toml}"), &[])
}

/// A config with delivery workers on, fast retries (`schedule`), and loopback receivers allowed.
pub fn delivery_config(schedule: &str, overrides: &[(&str, &str)]) -> Config {
    let toml = format!(
        "delivery_workers = true\nretry_schedule = {schedule:?}\nallowed_subnets = \"127.0.0.0/8\"\ndelivery_timeout_ms = 1000"
    );
    config_with(&toml, overrides)
}

fn config_with(toml: &str, overrides: &[(&str, &str)]) -> Config {
    let mut fig = Figment::from(Toml::string(vow_server::config::DEFAULTS))
        .merge(Toml::string(toml))
        .merge(Serialized::default("admin_token", TOKEN));
    for (k, v) in overrides {
        fig = fig.merge(Serialized::default(k, v));
    }
    Config::from_figment(fig).expect("test config is valid")
}

impl TestApp {
    /// Starts a server on a fresh, empty store.
    pub async fn spawn(backend: Backend) -> TestApp {
        Self::spawn_with(backend, test_config(&[])).await
    }

    /// Starts a server with `config` on a fresh, empty store.
    pub async fn spawn_with(backend: Backend, mut config: Config) -> TestApp {
        if std::env::var_os("TEST_LOG").is_some() {
            // Logs only: the subscriber is process-wide, the servers many.
            let logs = Config {
                log: "debug".into(),
                otel_endpoint: String::new(),
                ..config.clone()
            };
            drop(vow_server::telemetry::init(&logs));
        }
        let (stores, guard): (Stores, Box<dyn Any + Send>) = match backend {
            Backend::Sqlite => {
                let (store, dir) = vow_store_sqlite::testing::fresh_store();
                (Stores::new(store), Box::new(dir))
            }
            Backend::Postgres => {
                let (store, url) = vow_store_postgres::testing::fresh_store().await;
                // The settings that follow from the database's kind (e.g. claiming ahead of
                // an endpoint's slots) are PostgreSQL's, as under `vow serve`.
                config.database_url = url;
                (Stores::new(store), Box::new(()))
            }
        };
        Self::spawn_on(backend, config, stores, guard).await
    }

    /// Starts a server with `config` on `stores` (which may hold rows already, or be shared
    /// with another server); `guard` lives as long as the app (e.g. a temporary directory).
    pub async fn spawn_on(
        backend: Backend,
        config: Config,
        stores: Stores,
        guard: Box<dyn Any + Send>,
    ) -> TestApp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = Server::build(&config, stores.clone(), listener)
            .await
            .unwrap();
        let base = format!("http://{}", server.local_addr().unwrap());
        let clock = server.clock();
        let shutdown = CancellationToken::new();
        tokio::spawn(server.run(shutdown.clone()));
        TestApp {
            backend,
            base,
            client: reqwest::Client::new(),
            store: stores.store,
            queue: stores.queue,
            inbound: stores.inbound,
            clock,
            shutdown,
            _guard: guard,
        }
    }

    /// A request to `path` with the admin token.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}{}", self.base, path))
            .bearer_auth(TOKEN)
    }

    /// Sends `method path` with an optional JSON body; returns status and parsed body
    /// (`Value::Null` for an empty body).
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.request(method, path);
        if let Some(b) = body {
            req = req.json(&b);
        }
        into_parts(req.send().await.unwrap()).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(Method::GET, path, None).await
    }

    /// The body of a GET as text, as sent (no JSON parse: numbers stay exact).
    pub async fn get_text(&self, path: &str) -> String {
        let resp = self.request(Method::GET, path).send().await.unwrap();
        resp.text().await.unwrap()
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::PUT, path, Some(body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::PATCH, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        self.call(Method::DELETE, path, None).await
    }

    /// Creates an application and returns its id.
    pub async fn create_app(&self, name: &str) -> String {
        let (status, body) = self
            .post("/api/v1/app", serde_json::json!({ "name": name }))
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    /// The app's store behind each trait, with wake-ups of its own (no server listens to them).
    pub fn stores(&self) -> Stores {
        Stores {
            store: self.store.clone(),
            queue: self.queue.clone(),
            inbound: self.inbound.clone(),
            wake: Arc::new(tokio::sync::Notify::new()),
            inbound_wake: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// Attempts everything due at `now` with `config`'s delivery settings, as a worker would;
    /// returns how many attempts were recorded.
    pub async fn drain_at(&self, config: &Config, now: chrono::DateTime<chrono::Utc>) -> usize {
        let stores = self.stores();
        let wake = stores.wake.clone();
        let dispatcher = vow_server::startup::dispatcher(config, &stores, wake)
            .await
            .unwrap();
        dispatcher.drain_at(now).await.unwrap()
    }

    /// Forwards every inbound event due at `now` with `config`'s delivery settings, as the
    /// inbound workers would; returns how many events' outcomes were recorded.
    pub async fn forward_at(&self, config: &Config, now: chrono::DateTime<chrono::Utc>) -> usize {
        let forwarder = vow_server::startup::forwarder(config, &self.stores()).unwrap();
        forwarder.drain_at(now).await.unwrap()
    }

    /// The delivery rows of message `msg` of application `app_id` (both ids as text).
    pub async fn deliveries_of(&self, app_id: &str, msg: &str) -> Vec<vow_store::Delivery> {
        self.store
            .list_deliveries(
                vow_core::AppId::parse(app_id).unwrap(),
                vow_core::MessageId::parse(msg).unwrap(),
            )
            .await
            .unwrap()
    }

    /// Creates an endpoint from `body` and returns its id.
    pub async fn create_endpoint(&self, app: &str, body: Value) -> String {
        let (status, out) = self
            .post(&format!("/api/v1/app/{app}/endpoint"), body)
            .await;
        assert_eq!(status, 201, "{out}");
        out["id"].as_str().unwrap().to_string()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Status and JSON body of a response.
pub async fn into_parts(resp: Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, body)
}

/// Instantiates each named `async fn(TestApp)` as two tests, `sqlite::name` and
/// `postgres::name`, each on a fresh store.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let app = crate::helpers::TestApp::spawn(crate::helpers::Backend::Sqlite).await;
                    super::$name(app).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let app = crate::helpers::TestApp::spawn(crate::helpers::Backend::Postgres).await;
                    super::$name(app).await
                }
            )*
        }
    };
}

/// Polls `probe` every `every` until it yields a value, for at most `limit`; panics naming
/// `what` when it never does. For what a test is not told of: what a process records
/// asynchronously (outcomes after the receiver answered, a write in another connection).
pub async fn eventually<T, F, Fut>(what: &str, every: Duration, limit: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let found = tokio::time::timeout(limit, async {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            if let Some(value) = probe().await {
                return value;
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("{what} within {limit:?}"))
}
