//! The endpoints vow delivers to: a lean hyper server on `127.0.0.1:0`, in this process.
//!
//! Owns: answering `POST /ep/{n}` with 200 (after a configurable delay for "slow" endpoints),
//! and recording, per `(endpoint, webhook-id)`, the time the request head arrived (the first
//! byte, to within hyper's parse of the head) plus how many duplicates came. Times are
//! microseconds on the run's shared [`Clock`], so they join with the load generator's.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// Microseconds since the start of a run, shared by load generator and receiver.
#[derive(Debug, Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    /// A clock starting now.
    pub fn start() -> Self {
        Self(Instant::now())
    }

    /// Microseconds since the start.
    pub fn now_us(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

/// What the receiver saw.
#[derive(Debug)]
struct State {
    clock: Clock,
    /// Per endpoint: webhook-id -> first arrival (µs).
    first_seen: Vec<Mutex<HashMap<Box<str>, u64>>>,
    /// Unique deliveries per endpoint.
    unique: Vec<AtomicU64>,
    /// Unique deliveries, all endpoints.
    unique_total: AtomicU64,
    /// Repeated (endpoint, webhook-id) pairs.
    duplicates: AtomicU64,
    /// Requests we could not attribute (unknown path or no `webhook-id`).
    strays: AtomicU64,
    /// Delay before answering, per endpoint.
    delays: Vec<Duration>,
    /// Signalled on every new delivery.
    arrived: Notify,
}

/// A running receiver with `endpoints` endpoints at `/ep/0` .. `/ep/{n-1}`.
#[derive(Debug, Clone)]
pub struct Receiver {
    state: Arc<State>,
    port: u16,
}

impl Receiver {
    /// Binds `127.0.0.1:0` and serves until the process ends. `delays[i]` (if present) is how
    /// long endpoint `i` waits before answering 200.
    pub async fn start(
        clock: Clock,
        endpoints: usize,
        delays: &[Duration],
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let state = Arc::new(State {
            clock,
            first_seen: (0..endpoints).map(|_| Mutex::default()).collect(),
            unique: (0..endpoints).map(|_| AtomicU64::new(0)).collect(),
            unique_total: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            strays: AtomicU64::new(0),
            delays: (0..endpoints)
                .map(|i| delays.get(i).copied().unwrap_or_default())
                .collect(),
            arrived: Notify::new(),
        });
        let accept_state = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let state = Arc::clone(&accept_state);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let state = Arc::clone(&state);
                        async move { Ok::<_, Infallible>(handle(&state, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self { state, port })
    }

    /// The URL of endpoint `i`.
    pub fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}/ep/{i}", self.port)
    }

    /// Unique deliveries so far, all endpoints.
    pub fn delivered(&self) -> u64 {
        self.state.unique_total.load(Ordering::Relaxed)
    }

    /// Unique deliveries so far to endpoint `i`.
    pub fn delivered_to(&self, i: usize) -> u64 {
        self.state.unique[i].load(Ordering::Relaxed)
    }

    /// Duplicate deliveries so far.
    pub fn duplicates(&self) -> u64 {
        self.state.duplicates.load(Ordering::Relaxed)
    }

    /// Requests that named no known endpoint or carried no `webhook-id`.
    pub fn strays(&self) -> u64 {
        self.state.strays.load(Ordering::Relaxed)
    }

    /// First arrival (µs) of `id` at endpoint `i`.
    pub fn first_seen(&self, i: usize, id: &str) -> Option<u64> {
        self.state.first_seen[i].lock().ok()?.get(id).copied()
    }

    /// Every (webhook-id, first arrival) seen by endpoint `i`.
    pub fn seen_at(&self, i: usize) -> HashMap<Box<str>, u64> {
        self.state.first_seen[i]
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// Waits until `pred` holds (re-checked on every arrival and every 100 ms) or `timeout`.
    /// Returns whether it holds.
    pub async fn wait_until(&self, timeout: Duration, pred: impl Fn(&Self) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.state.arrived.notified();
            if pred(self) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            let step = deadline.min(tokio::time::Instant::now() + Duration::from_millis(100));
            let _ = tokio::time::timeout_at(step, notified).await;
        }
    }

    /// Waits until `total` unique deliveries arrived, or until `stall` passes with no new one.
    /// Returns whether all arrived.
    pub async fn drain(&self, total: u64, stall: Duration) -> bool {
        let mut last = self.delivered();
        loop {
            if self
                .wait_until(stall, |r| r.delivered() >= total || r.delivered() > last)
                .await
            {
                last = self.delivered();
                if last >= total {
                    return true;
                }
            } else {
                return false;
            }
        }
    }
}

async fn handle(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let at = state.clock.now_us();
    let endpoint = req
        .uri()
        .path()
        .strip_prefix("/ep/")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n < state.first_seen.len());
    let id = req
        .headers()
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .map(Box::<str>::from);
    // Read the whole body so the connection stays reusable.
    let _ = req.into_body().collect().await;
    match (endpoint, id) {
        (Some(ep), Some(id)) => {
            let new = state.first_seen[ep]
                .lock()
                .map(|mut m| match m.entry(id) {
                    std::collections::hash_map::Entry::Occupied(_) => false,
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(at);
                        true
                    }
                })
                .unwrap_or(false);
            if new {
                state.unique[ep].fetch_add(1, Ordering::Relaxed);
                state.unique_total.fetch_add(1, Ordering::Relaxed);
                state.arrived.notify_waiters();
            } else {
                state.duplicates.fetch_add(1, Ordering::Relaxed);
            }
            let delay = state.delays[ep];
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
        _ => {
            state.strays.fetch_add(1, Ordering::Relaxed);
        }
    }
    let mut resp = Response::new(Full::new(Bytes::from_static(b"ok")));
    *resp.status_mut() = StatusCode::OK;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_receiver_counts_unique_deliveries_and_duplicates() {
        let r = Receiver::start(Clock::start(), 2, &[]).await.unwrap();
        let c = reqwest::Client::new();
        for id in ["msg_a", "msg_b", "msg_a"] {
            let resp = c
                .post(r.url(1))
                .header("webhook-id", id)
                .body("{}")
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
        }
        assert_eq!(r.delivered(), 2);
        assert_eq!(r.delivered_to(1), 2);
        assert_eq!(r.delivered_to(0), 0);
        assert_eq!(r.duplicates(), 1);
        assert!(r.first_seen(1, "msg_a").is_some());
    }
}
