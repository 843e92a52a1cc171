//! Reliability with real processes: `kill -9` of `vow serve` under load loses no acknowledged
//! message, two processes sharing one PostgreSQL never attempt a delivery at the same time, and
//! an inbound forward cut off by `kill -9` is left `uncertain` (or safely retried).
//! The receiver counts every `webhook-id` it gets, flags an attempt that starts while another
//! attempt of the same message is still open, and keeps a ledger of which process sent each
//! attempt and when (`cluster.rs` tells nodes apart by it).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::serve::IncomingStream;
use axum::Router;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::child::{child_holding, Vow};
use crate::helpers::{into_parts, TOKEN};

#[derive(Default)]
struct Seen {
    count: HashMap<String, u32>,
    open: HashSet<String>,
    overlaps: u32,
    ledger: Vec<Arrival>,
}

/// One attempt the receiver answered.
#[derive(Debug, Clone)]
pub(crate) struct Arrival {
    /// Its `webhook-id` (the message id).
    pub id: String,
    /// The process that sent it: a child of this test process ([`Sender`]).
    pub from: Option<u32>,
    /// When it was answered.
    pub at: Instant,
}

/// The child process that opened a connection to the receiver, looked up once, when the
/// connection is accepted (its other end is open then); `None` when no child of this process
/// holds it (any more).
#[derive(Debug, Clone, Copy)]
struct Sender(Option<u32>);

impl Connected<IncomingStream<'_, TcpListener>> for Sender {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        let to = stream.io().local_addr().ok();
        Sender(to.and_then(|to| child_holding(*stream.remote_addr(), to)))
    }
}

#[derive(Clone, Default)]
pub(crate) struct Receiver {
    seen: Arc<Mutex<Seen>>,
    arrived: Arc<Notify>,
}

/// Marks an attempt open until it finishes or its connection goes away (the server drops the
/// handler when a killed process's connection closes, so its attempt does not stay "open").
struct OpenAttempt {
    seen: Arc<Mutex<Seen>>,
    id: String,
}

impl Drop for OpenAttempt {
    fn drop(&mut self) {
        self.seen.lock().unwrap().open.remove(&self.id);
    }
}

async fn receive(
    State(r): State<Receiver>,
    ConnectInfo(Sender(from)): ConnectInfo<Sender>,
    headers: HeaderMap,
) -> StatusCode {
    let id = headers["webhook-id"].to_str().unwrap().to_string();
    let attempt = {
        let mut s = r.seen.lock().unwrap();
        if !s.open.insert(id.clone()) {
            s.overlaps += 1;
        }
        OpenAttempt {
            seen: r.seen.clone(),
            id: id.clone(),
        }
    };
    // Hold the attempt open a little, so overlapping attempts would be seen: the pause is the
    // behaviour under test (an overlap needs two attempts open at once), not a wait for work.
    tokio::time::sleep(Duration::from_millis(5)).await;
    drop(attempt);
    {
        let mut s = r.seen.lock().unwrap();
        *s.count.entry(id.clone()).or_default() += 1;
        let at = Instant::now();
        s.ledger.push(Arrival { id, from, at });
    }
    r.arrived.notify_waiters();
    StatusCode::OK
}

impl Receiver {
    pub(crate) async fn start() -> (Receiver, String) {
        let r = Receiver::default();
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(r.clone())
            .into_make_service_with_connect_info::<Sender>();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (r, url)
    }

    /// Waits (at most `limit`) until `done` holds; it is asked again at each arrival.
    pub(crate) async fn wait_until(
        &self,
        what: &str,
        limit: Duration,
        mut done: impl FnMut() -> bool,
    ) {
        let waited = tokio::time::timeout(limit, async {
            loop {
                let arrived = self.arrived.notified();
                if done() {
                    return;
                }
                arrived.await;
            }
        })
        .await;
        assert!(waited.is_ok(), "{what} within {limit:?}");
    }

    /// How many distinct messages arrived.
    pub(crate) fn distinct(&self) -> usize {
        self.seen.lock().unwrap().count.len()
    }

    /// Every attempt answered so far, in order.
    pub(crate) fn ledger(&self) -> Vec<Arrival> {
        self.seen.lock().unwrap().ledger.clone()
    }

    /// Waits (at most 60 s) until every id in `ids` arrived at least once.
    pub(crate) async fn wait_for_all(&self, ids: &[String]) {
        let all = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let arrived = self.arrived.notified();
                let missing = {
                    let s = self.seen.lock().unwrap();
                    ids.iter().filter(|id| !s.count.contains_key(*id)).count()
                };
                if missing == 0 {
                    return;
                }
                arrived.await;
            }
        })
        .await;
        let s = self.seen.lock().unwrap();
        let missing: Vec<_> = ids.iter().filter(|id| !s.count.contains_key(*id)).collect();
        assert!(
            all.is_ok(),
            "{} acknowledged messages never arrived: {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
    }

    /// Arrivals beyond the first of each message.
    pub(crate) fn duplicates(&self) -> u32 {
        self.seen
            .lock()
            .unwrap()
            .count
            .values()
            .map(|n| n - 1)
            .sum()
    }

    /// Attempts that began while another attempt of the same message was open.
    pub(crate) fn overlaps(&self) -> u32 {
        self.seen.lock().unwrap().overlaps
    }
}

/// Fast retries and a short delivery lease, so a killed process's work is picked up soon.
pub(crate) const CRASH_ENV: &[(&str, &str)] = &[
    ("VOW_RETRY_SCHEDULE", "1s,1s,1s,1s,1s"),
    ("VOW_DELIVERY_LEASE_SECONDS", "5"),
];

pub(crate) async fn post_json(
    base: &str,
    path: &str,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let resp = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await;
    match resp {
        Ok(r) => into_parts(r).await,
        Err(_) => (0, serde_json::Value::Null),
    }
}

/// Posts `n` messages from 8 concurrent clients, message `i` to `bases[i % bases.len()]`;
/// returns the ids vow acknowledged (202).
pub(crate) async fn load(bases: &[String], app: &str, n: usize) -> Vec<String> {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for c in 0..8 {
        let (bases, app, acked) = (bases.to_vec(), app.to_string(), acked.clone());
        tasks.push(tokio::spawn(async move {
            for i in (c..n).step_by(8) {
                let base = &bases[i % bases.len()];
                let body = json!({"eventType": "load.test", "payload": {"i": i}});
                let (status, out) = post_json(base, &format!("/api/v1/app/{app}/msg"), body).await;
                if status == 202 {
                    acked
                        .lock()
                        .unwrap()
                        .push(out["id"].as_str().unwrap().to_string());
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let ids = acked.lock().unwrap().clone();
    ids
}

/// An application with one endpoint at `url`; its id.
pub(crate) async fn setup_app(base: &str, url: &str) -> String {
    let (_, app) = post_json(base, "/api/v1/app", json!({"name": "load"})).await;
    let app = app["id"].as_str().unwrap().to_string();
    let (status, _) = post_json(
        base,
        &format!("/api/v1/app/{app}/endpoint"),
        json!({"url": url}),
    )
    .await;
    assert_eq!(status, 201);
    app
}

async fn kill_9_under_load_loses_no_acknowledged_message(database_url: String) {
    let (receiver, url) = Receiver::start().await;
    let mut vow = Vow::start(&database_url, CRASH_ENV).await;
    let app = setup_app(&vow.base, &url).await;
    let base = vow.base.clone();
    let loader = tokio::spawn(async move { load(&[base], &app, 400).await });
    // Kill it while messages are being accepted and delivered.
    let started = || receiver.distinct() >= 50;
    receiver
        .wait_until("deliveries started", Duration::from_secs(30), started)
        .await;
    vow.kill_9();
    let acked = loader.await.unwrap();
    assert!(
        acked.len() >= 50,
        "some messages were acknowledged before the kill"
    );
    let _restarted = Vow::start(&database_url, CRASH_ENV).await;
    receiver.wait_for_all(&acked).await;
    println!(
        "kill -9: {} acknowledged, all delivered, {} duplicates",
        acked.len(),
        receiver.duplicates()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_kill_9_under_load_loses_no_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/vow.db", dir.path().display());
    kill_9_under_load_loses_no_acknowledged_message(url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_kill_9_under_load_loses_no_acknowledged_message() {
    let (_store, url) = vow_store_postgres::testing::fresh_store().await;
    kill_9_under_load_loses_no_acknowledged_message(url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_postgres_and_never_attempt_a_delivery_at_once() {
    let (_store, url) = vow_store_postgres::testing::fresh_store().await;
    let (receiver, hook) = Receiver::start().await;
    let mut a = Vow::start(&url, CRASH_ENV).await;
    let b = Vow::start(&url, CRASH_ENV).await;
    let app = setup_app(&a.base, &hook).await;
    let bases = vec![a.base.clone(), b.base.clone()];
    let loader = tokio::spawn(async move { load(&bases, &app, 400).await });
    let started = || receiver.distinct() >= 50;
    receiver
        .wait_until("deliveries started", Duration::from_secs(30), started)
        .await;
    a.kill_9();
    let acked = loader.await.unwrap();
    receiver.wait_for_all(&acked).await;
    assert_eq!(
        receiver.overlaps(),
        0,
        "a delivery was attempted by both processes at once"
    );
    println!(
        "two processes, one killed: {} acknowledged, all delivered, {} duplicates",
        acked.len(),
        receiver.duplicates()
    );
}

async fn get_json(base: &str, path: &str) -> (u16, serde_json::Value) {
    let resp = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    into_parts(resp).await
}

/// Seed 004: a worker killed after forwarding and before recording. `vow serve` forwards an
/// inbound event to two destinations that hold the request open, and is killed with `-9`
/// once both have it. After a restart, the lease runs out and the new process settles the
/// event: `uncertain` at the plain destination (which is not sent it again), a safe retry at
/// the idempotent one.
async fn a_forwarder_killed_before_recording_leaves_the_event_uncertain(database_url: String) {
    use crate::inbound::support::{github_signature, GITHUB_SECRET};
    use crate::receiver::Receiver as Destination;

    let (plain, idempotent) = (Destination::start(&[]).await, Destination::start(&[]).await);
    plain.answer_after(Duration::from_secs(60));
    idempotent.answer_after(Duration::from_secs(60));
    let mut vow = Vow::start(&database_url, CRASH_ENV).await;
    let source = json!({"scheme": "github", "secrets": [GITHUB_SECRET], "destinations": [
        {"url": plain.url, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
        {"url": idempotent.url, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "idempotent": true},
    ]});
    let (status, source) = post_json(&vow.base, "/api/v1/source", source).await;
    assert_eq!(status, 201, "{source}");
    let source = source["id"].as_str().unwrap().to_owned();
    let body = br#"{"action":"created"}"#;
    let delivered = reqwest::Client::new()
        .post(format!("{}/in/{source}", vow.base))
        .header("x-hub-signature-256", github_signature(GITHUB_SECRET, body))
        .header("x-github-delivery", "d-1")
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    let (status, ack) = into_parts(delivered).await;
    assert_eq!(status, 200, "{ack}");
    let event = ack["id"].as_str().unwrap().to_owned();
    plain.wait_for(1).await;
    idempotent.wait_for(1).await;
    vow.kill_9();

    idempotent.answer_after(Duration::ZERO);
    let vow = Vow::start(&database_url, CRASH_ENV).await;
    let path = format!("/api/v1/source/{source}/event/{event}");
    let settled = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let (_, out) = get_json(&vow.base, &path).await;
            if out["state"] == "uncertain" {
                return out;
            }
            // The poll interval of a wait for a durable state, bounded by the timeout.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the event is settled once its lease runs out");
    let outcomes: Vec<&str> = settled["forwards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes.len(), 2, "{settled}");
    assert!(
        outcomes.contains(&"uncertain") && outcomes.contains(&"completed"),
        "{settled}"
    );
    assert_eq!(
        idempotent.received().len(),
        2,
        "the idempotent destination got a safe retry"
    );
    // Claims take only received and retryable events, so an event that stays uncertain is
    // never forwarded again on its own: its stored state shows it, no wait needed.
    let (_, again) = get_json(&vow.base, &path).await;
    assert_eq!(again["state"], "uncertain", "{again}");
    assert_eq!(again["attempts"], 2, "{again}");
    assert_eq!(
        plain.received().len(),
        1,
        "the uncertain forward is not repeated on its own"
    );
    assert_eq!(settled["attempts"], 2, "{settled}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_forwarder_killed_before_recording_leaves_the_event_uncertain() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/vow.db", dir.path().display());
    a_forwarder_killed_before_recording_leaves_the_event_uncertain(url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_forwarder_killed_before_recording_leaves_the_event_uncertain() {
    let (_store, url) = vow_store_postgres::testing::fresh_store().await;
    a_forwarder_killed_before_recording_leaves_the_event_uncertain(url).await;
}
