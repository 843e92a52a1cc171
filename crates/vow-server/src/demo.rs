//! `vow demo`: seed 000's six scenarios, end to end, on a throwaway SQLite store.
//!
//! A real vow server (on 127.0.0.1, port 0) sends to a real receiver that does what the seed's
//! receiver does: verifies `x-signature: sha256=…` over the raw body, answers 200 for a delivery
//! id it has already saved without processing it again, saves before it answers, and can simulate
//! an outage. Delivery is drained deterministically with a logical clock, so retries that would
//! take minutes happen at once, and each `sender:` line is an attempt the store recorded. Scenario
//! 6 is the seed's `Idempotency-Key` rule on vow's message API: the same key and body replay the
//! first response, another body is a 422, no key is a new message. Every line is what the run
//! saw, never a script.

use std::io::Write;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use chrono::Utc;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use vow_core::{AppId, MessageId};
use vow_store::DeliveryStatus;

use crate::startup::{self, Server, Stores};
use crate::Config;

/// The secret the demo endpoints share with the receiver (the text keys the seed-style HMAC).
const SECRET: &str = "whsec_ZGVtb19zZWNyZXRfZGVtb19zZWNyZXRfZGVtbw==";
const TOKEN: &str = "demo-admin-token";

/// What the demo saw, for callers and tests.
#[derive(Debug, Default)]
pub struct Transcript {
    /// Every line printed.
    pub lines: Vec<String>,
    /// Delivery ids the receiver saved, in order.
    pub saved: Vec<String>,
}

#[derive(Default)]
struct ReceiverState {
    saved: Vec<String>,
    fail_next: u32,
    lines: Vec<String>,
}

type Shared = Arc<Mutex<ReceiverState>>;

async fn receive(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
    tamper: bool,
) -> StatusCode {
    let body = if tamper {
        Bytes::from(String::from_utf8_lossy(&body).replace("job_1", "job_2"))
    } else {
        body
    };
    let id = headers
        .get("x-delivery-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let sig = headers.get("x-signature").map(|v| v.as_bytes());
    let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
    let (status, what) = if vow_signature::seed::sha256::verify(SECRET, sig, &body).is_err() {
        (StatusCode::UNAUTHORIZED, "bad signature -> 401")
    } else if s.fail_next > 0 {
        s.fail_next -= 1;
        (StatusCode::INTERNAL_SERVER_ERROR, "simulated outage -> 500")
    } else if s.saved.contains(&id) {
        (
            StatusCode::OK,
            "already handled -> 200, not processed again",
        )
    } else {
        s.saved.push(id.clone()); // save first, then answer
        (StatusCode::OK, "saved -> 200")
    };
    s.lines.push(format!("  receiver: {id} {what}"));
    status
}

struct Demo {
    base: String,
    client: reqwest::Client,
    stores: Stores,
    config: Config,
    receiver: Shared,
    app: String,
    clock: chrono::DateTime<Utc>,
    out: Transcript,
}

impl Demo {
    fn say(&mut self, line: impl Into<String>) {
        let line = line.into();
        println!("{line}");
        self.out.lines.push(line);
    }

    /// Moves receiver lines into the transcript.
    fn flush_receiver(&mut self) {
        let lines = std::mem::take(
            &mut self
                .receiver
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .lines,
        );
        for l in lines {
            self.say(l);
        }
    }

    async fn api(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> anyhow::Result<(u16, Value)> {
        let resp = self
            .client
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// Sends a message on `channel` and attempts it until it is delivered or dead-lettered.
    async fn deliver(&mut self, channel: &str, job: &str) -> anyhow::Result<()> {
        let body = json!({"eventType": "job.completed", "channels": [channel],
                          "payload": {"type": "job.completed", "jobId": job}});
        let (status, msg) = self
            .api(
                reqwest::Method::POST,
                &format!("/app/{}/msg", self.app),
                body,
            )
            .await?;
        anyhow::ensure!(status == 202, "message not accepted: {status} {msg}");
        let id = msg["id"].as_str().unwrap_or_default().to_string();
        self.attempt_until_settled(&id).await
    }

    /// POSTs `body` to `path` with `Idempotency-Key: key` when given, and says what came back:
    /// the status, the message id or the problem type, and whether it was a replay.
    async fn keyed(&self, path: &str, body: Value, key: Option<&str>) -> anyhow::Result<String> {
        let mut req = self
            .client
            .post(format!("{}/api/v1{path}", self.base))
            .bearer_auth(TOKEN)
            .json(&body);
        if let Some(key) = key {
            req = req.header("idempotency-key", key);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let replayed = resp.headers().contains_key("idempotent-replayed");
        let out: Value = serde_json::from_str(&resp.text().await?).unwrap_or(Value::Null);
        let what = match (&out["id"], &out["type"]) {
            (Value::String(id), _) => format!("{{\"id\":\"{id}\"}}"),
            (_, Value::String(problem)) => problem.clone(),
            _ => out.to_string(),
        };
        Ok(match replayed {
            true => format!("{status} {what} (Idempotent-Replayed: true)"),
            false => format!("{status} {what}"),
        })
    }

    /// Drains deliveries until `id`'s is delivered or dead-lettered, moving the logical clock to
    /// each retry's due time. A `sender:` line is printed for each attempt the store recorded,
    /// never for a drain that attempted nothing.
    async fn attempt_until_settled(&mut self, id: &str) -> anyhow::Result<()> {
        let app = self.app.parse::<AppId>()?;
        let msg = id.parse::<MessageId>()?;
        let dispatcher =
            startup::dispatcher(&self.config, &self.stores, Default::default()).await?;
        let delivery = |stores: &Stores| {
            let store = stores.store.clone();
            async move {
                let rows = store.list_deliveries(app, msg).await?;
                rows.into_iter()
                    .next()
                    .context("the message has no delivery")
            }
        };
        // A bound against a delivery that never settles; the seed's scenarios take 3 attempts.
        for _ in 0..10 {
            let before = delivery(&self.stores).await?;
            match before.status {
                DeliveryStatus::Delivered => {
                    self.say(format!("  result: delivered, attempt {}", before.attempts));
                    return Ok(());
                }
                DeliveryStatus::DeadLettered => {
                    let reason = before.dead_letter_reason.unwrap_or_default();
                    self.say(format!(
                        "  result: dead-lettered after {} attempts ({reason}); kept for replay",
                        before.attempts
                    ));
                    return Ok(());
                }
                _ => {}
            }
            self.clock = self.clock.max(before.next_attempt_at);
            dispatcher.drain_at(self.clock).await?;
            let after = delivery(&self.stores).await?;
            for attempt in before.attempts + 1..=after.attempts {
                self.say(format!("  sender: {id} attempt {attempt}"));
            }
            self.flush_receiver();
        }
        anyhow::bail!("{id} did not settle in 10 drains")
    }
}

/// Runs the six scenarios, printing the transcript as it goes.
pub async fn run() -> anyhow::Result<Transcript> {
    let dir = tempfile_dir()?;
    let toml = format!(
        "database_url = \"sqlite://{}/demo.db\"\nadmin_token = \"{TOKEN}\"\ndelivery_workers = false\n\
         retry_schedule = \"30s,2m\"\nallowed_subnets = \"127.0.0.0/8\"\nlisten = \"127.0.0.1:0\"",
        dir.display()
    );
    let config = Config::from_defaults_and(&toml)?;
    let stores = startup::open_store(&config, startup::Migrate::Yes).await?;

    let receiver: Shared = Arc::default();
    let hooks = Router::new()
        .route(
            "/hook",
            post(|s: State<Shared>, h: HeaderMap, b: Bytes| receive(s, h, b, false)),
        )
        .route(
            "/tampered",
            post(|s: State<Shared>, h: HeaderMap, b: Bytes| receive(s, h, b, true)),
        )
        .with_state(receiver.clone());
    let hook_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let hook_addr = hook_listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        axum::serve(hook_listener, hooks)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    });
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let server = Server::build(&config, stores.clone(), listener).await?;
    let base = format!("http://{}", server.local_addr()?);
    tokio::spawn(server.run(shutdown.clone()));

    let mut demo = Demo {
        base,
        client: reqwest::Client::new(),
        stores,
        config,
        receiver,
        app: String::new(),
        clock: Utc::now(),
        out: Transcript::default(),
    };
    let (_, app) = demo
        .api(reqwest::Method::POST, "/app", json!({"name": "demo"}))
        .await?;
    demo.app = app["id"].as_str().context("no app id")?.to_string();
    for (channel, path) in [("direct", "hook"), ("tampered", "tampered")] {
        let body = json!({"url": format!("http://{hook_addr}/{path}"), "channels": [channel],
                          "signatureStyle": "sha256", "secret": SECRET});
        let (status, ep) = demo
            .api(
                reqwest::Method::POST,
                &format!("/app/{}/endpoint", demo.app),
                body,
            )
            .await?;
        anyhow::ensure!(status == 201, "endpoint not created: {ep}");
    }

    demo.say("\n1. A normal delivery");
    demo.deliver("direct", "job_1").await?;
    let first = demo
        .receiver
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .saved
        .first()
        .cloned()
        .unwrap_or_default();

    demo.say("\n2. The same delivery id sent again (a retry after a lost answer)");
    let endpoint = direct_endpoint(&demo).await?;
    let (status, _) = demo
        .api(
            reqwest::Method::POST,
            &format!("/app/{}/msg/{first}/endpoint/{endpoint}/resend", demo.app),
            json!({}),
        )
        .await?;
    anyhow::ensure!(status == 202, "resend refused: {status}");
    demo.attempt_until_settled(&first).await?;

    demo.say("\n3. The body changed on the way (wrong signature)");
    demo.deliver("tampered", "job_1").await?;

    demo.say("\n4. The receiver is down for the first 2 attempts");
    demo.receiver
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .fail_next = 2;
    demo.deliver("direct", "job_3").await?;

    demo.say("\n5. The receiver is down for every attempt");
    demo.receiver
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .fail_next = 99;
    demo.deliver("direct", "job_4").await?;
    demo.receiver
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .fail_next = 0;

    demo.say("\n6. Idempotency key on the API");
    let path = format!("/app/{}/msg", demo.app);
    let job = |url: &str| json!({"eventType": "job.created", "channels": ["api"], "payload": {"url": url}});
    for (label, body, key) in [
        (
            "first call          ",
            job("https://example.com/a"),
            Some("key-1"),
        ),
        (
            "same key, same body ",
            job("https://example.com/a"),
            Some("key-1"),
        ),
        (
            "same key, other body",
            job("https://example.com/b"),
            Some("key-1"),
        ),
        ("no key              ", job("https://example.com/a"), None),
    ] {
        let answer = demo.keyed(&path, body, key).await?;
        demo.say(format!("  {label}: {answer}"));
    }

    let saved = demo
        .receiver
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .saved
        .clone();
    demo.say(format!("\nSaved deliveries: {}", saved.join(", ")));
    shutdown.cancel();
    let _ = std::fs::remove_dir_all(&dir);
    let mut out = demo.out;
    out.saved = saved;
    std::io::stdout().flush().ok();
    Ok(out)
}

async fn direct_endpoint(demo: &Demo) -> anyhow::Result<String> {
    let (_, list) = demo
        .api(
            reqwest::Method::GET,
            &format!("/app/{}/endpoint", demo.app),
            Value::Null,
        )
        .await?;
    list["data"]
        .as_array()
        .and_then(|eps| eps.iter().find(|e| e["channels"] == json!(["direct"])))
        .and_then(|e| e["id"].as_str())
        .map(str::to_string)
        .context("the direct endpoint is missing")
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("vow-demo-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
