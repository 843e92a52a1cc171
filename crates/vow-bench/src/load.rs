//! Load generators: closed-loop clients and an open-loop scheduler, plus a once-a-second sampler.
//!
//! Owns: posting messages with bounded concurrency over keep-alive connections, timing each
//! POST (µs on the run's [`Clock`]: just before the request and at the 2xx), collecting the
//! acknowledged message ids for the ledger, and sampling acknowledged vs delivered counts every
//! second so a run can show whether its backlog is flat.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::api::{message_body, Api, PostOutcome};
use crate::ledger::histogram;
use crate::receiver::{Clock, Receiver};

/// One acknowledged message.
#[derive(Debug, Clone)]
pub struct Acked {
    /// Its id (the `webhook-id` of its deliveries).
    pub id: Box<str>,
    /// Just before the POST (µs).
    pub sent_us: u64,
    /// From then to its 2xx (µs).
    pub took_us: u64,
}

/// What a load phase did.
#[derive(Debug)]
pub struct LoadResult {
    /// POSTs started.
    pub sent: u64,
    /// Non-2xx answers (sheds included).
    pub rejected: u64,
    /// Of those, 503s with `Retry-After` (graceful overload).
    pub shed: u64,
    /// POST -> shed answer latency (µs).
    pub shed_latency: Histogram<u64>,
    /// No answer.
    pub failed: u64,
    /// Acknowledged messages.
    pub acked: Vec<Acked>,
    /// POST -> 2xx latency (µs).
    pub ack_latency: Histogram<u64>,
    /// First non-2xx status seen, for the report.
    pub first_rejection: Option<u16>,
    /// When sending started and when the last answer arrived (µs).
    pub window_us: (u64, u64),
    /// When the last POST was started (µs), to tell the achieved offered rate.
    pub last_send_us: u64,
    /// Open loop: scheduled POSTs not sent by the end of the duration (the generator was held
    /// back by `max_in_flight` because answers were slow).
    pub unsent: u64,
}

impl LoadResult {
    /// An empty result.
    pub fn new() -> Self {
        Self {
            sent: 0,
            rejected: 0,
            shed: 0,
            shed_latency: histogram(),
            failed: 0,
            acked: Vec::new(),
            ack_latency: histogram(),
            first_rejection: None,
            window_us: (0, 0),
            last_send_us: 0,
            unsent: 0,
        }
    }

    /// Books one POST that started at `sent_us` and ended at `done_us`.
    pub fn record(&mut self, outcome: PostOutcome, sent_us: u64, done_us: u64) {
        self.sent += 1;
        self.last_send_us = self.last_send_us.max(sent_us);
        match outcome {
            PostOutcome::Acked(id) => {
                let took_us = done_us.saturating_sub(sent_us).max(1);
                let _ = self.ack_latency.record(took_us);
                self.acked.push(Acked {
                    id: id.into_boxed_str(),
                    sent_us,
                    took_us,
                });
            }
            PostOutcome::Shed => {
                self.rejected += 1;
                self.shed += 1;
                let _ = self
                    .shed_latency
                    .record(done_us.saturating_sub(sent_us).max(1));
            }
            PostOutcome::Rejected(status) => {
                self.rejected += 1;
                self.first_rejection.get_or_insert(status);
            }
            PostOutcome::Failed => self.failed += 1,
        }
    }

    /// Adds `other`'s posts, answers and latencies to these.
    pub fn merge(&mut self, other: LoadResult) {
        self.sent += other.sent;
        self.rejected += other.rejected;
        self.shed += other.shed;
        let _ = self.shed_latency.add(&other.shed_latency);
        self.failed += other.failed;
        self.acked.extend(other.acked);
        let _ = self.ack_latency.add(&other.ack_latency);
        self.first_rejection = self.first_rejection.or(other.first_rejection);
        self.last_send_us = self.last_send_us.max(other.last_send_us);
    }

    /// Seconds between the first POST and the last answer.
    pub fn seconds(&self) -> f64 {
        (self.window_us.1.saturating_sub(self.window_us.0)) as f64 / 1e6
    }
}

impl Default for LoadResult {
    fn default() -> Self {
        Self::new()
    }
}

/// Live counters the sampler reads while load runs.
#[derive(Debug, Default)]
pub struct Counters {
    /// POSTs started (also the message sequence number).
    pub sent: AtomicU64,
    /// 2xx answers so far.
    pub acked: AtomicU64,
}

/// Where load goes.
#[derive(Debug, Clone)]
pub struct Target {
    /// The API client.
    pub api: Api,
    /// The application's id.
    pub app: String,
    /// The run's clock.
    pub clock: Clock,
    /// Live counters.
    pub counters: Arc<Counters>,
    /// Whether each POST carries an `Idempotency-Key` (`bench-<seq>`, unique in the run).
    pub keyed: bool,
    /// Whether each POST is sent as with a Svix SDK: a realistic event, answered with its
    /// payload ([`message_body`]).
    pub like_sdk: bool,
}

impl Target {
    /// Posts one message; returns how it ended, and when it started and ended (µs).
    pub async fn post_one(&self) -> (PostOutcome, u64, u64) {
        let seq = self.counters.sent.fetch_add(1, Ordering::Relaxed);
        let body = message_body(seq, self.like_sdk);
        let key = self.keyed.then(|| format!("bench-{seq}"));
        let sent_us = self.clock.now_us();
        let outcome = self
            .api
            .post_message(&self.app, body, key, self.like_sdk)
            .await;
        let done_us = self.clock.now_us();
        if matches!(outcome, PostOutcome::Acked(_)) {
            self.counters.acked.fetch_add(1, Ordering::Relaxed);
        }
        (outcome, sent_us, done_us)
    }

    /// `concurrency` clients, each posting back-to-back until `duration` passes or `limit`
    /// messages were sent in all.
    pub async fn closed_loop(
        &self,
        concurrency: usize,
        duration: Duration,
        limit: Option<u64>,
    ) -> LoadResult {
        let start = self.clock.now_us();
        let end = start + u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        let claimed = Arc::new(AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        for _ in 0..concurrency {
            let target = self.clone();
            let claimed = Arc::clone(&claimed);
            tasks.spawn(async move {
                let mut local = LoadResult::new();
                while target.clock.now_us() < end
                    && limit.is_none_or(|l| claimed.fetch_add(1, Ordering::Relaxed) < l)
                {
                    let (outcome, sent_us, done_us) = target.post_one().await;
                    local.record(outcome, sent_us, done_us);
                }
                local
            });
        }
        let mut all = LoadResult::new();
        while let Some(local) = tasks.join_next().await {
            all.merge(local.expect("a load task panicked"));
        }
        all.window_us = (start, self.clock.now_us());
        all
    }

    /// Posts `rate` messages per second for `duration` on a fixed schedule, whatever the
    /// answers' latency, with at most `max_in_flight` POSTs outstanding. When that bound is hit
    /// the schedule slips; sending still stops at `duration` (what was not sent by then is
    /// [`LoadResult::unsent`]), so the achieved offered rate is sent / duration.
    pub async fn open_loop(
        &self,
        rate: f64,
        duration: Duration,
        max_in_flight: usize,
    ) -> LoadResult {
        let total = (rate * duration.as_secs_f64()).round() as u64;
        let start = self.clock.now_us();
        let sem = Arc::new(Semaphore::new(max_in_flight));
        let results = Arc::new(Mutex::new(LoadResult::new()));
        let end = start + u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        let mut issued = 0u64;
        while issued < total && self.clock.now_us() < end {
            let elapsed = (self.clock.now_us() - start) as f64 / 1e6;
            let due = ((elapsed * rate) as u64 + 1).min(total);
            while issued < due {
                let wait = Duration::from_micros(end.saturating_sub(self.clock.now_us()));
                let Ok(Ok(permit)) =
                    tokio::time::timeout(wait, Arc::clone(&sem).acquire_owned()).await
                else {
                    break;
                };
                let target = self.clone();
                let results = Arc::clone(&results);
                tokio::spawn(async move {
                    let (outcome, sent_us, done_us) = target.post_one().await;
                    if let Ok(mut r) = results.lock() {
                        r.record(outcome, sent_us, done_us);
                    }
                    drop(permit);
                });
                issued += 1;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let all = u32::try_from(max_in_flight).unwrap_or(u32::MAX);
        let _ = sem.acquire_many(all).await;
        let mut out = std::mem::take(&mut *results.lock().expect("results lock"));
        out.window_us = (start, self.clock.now_us());
        out.unsent = total - issued;
        out
    }
}

/// One second's reading.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Seconds since the sampler started.
    pub t: f64,
    /// Unique deliveries so far.
    pub delivered: u64,
    /// acked × endpoints − delivered.
    pub backlog: i64,
}

/// Samples acked and delivered every second until stopped.
#[derive(Debug)]
pub struct Sampler {
    samples: Arc<Mutex<Vec<Sample>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    /// Starts sampling `counters` and `receiver` (deliveries expected per message: `endpoints`).
    pub fn start(counters: Arc<Counters>, receiver: Receiver, endpoints: u64) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let out = Arc::clone(&samples);
        let task = tokio::spawn(async move {
            let t0 = tokio::time::Instant::now();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            // The first tick is immediate; sample from t = 1 s on.
            tick.tick().await;
            loop {
                tick.tick().await;
                let acked = counters.acked.load(Ordering::Relaxed);
                let delivered = receiver.delivered();
                let backlog = i64::try_from(acked * endpoints).unwrap_or(i64::MAX)
                    - i64::try_from(delivered).unwrap_or(i64::MAX);
                if let Ok(mut s) = out.lock() {
                    s.push(Sample {
                        t: t0.elapsed().as_secs_f64(),
                        delivered,
                        backlog,
                    });
                }
            }
        });
        Self { samples, task }
    }

    /// Stops and returns the samples.
    pub fn stop(self) -> Vec<Sample> {
        self.task.abort();
        self.samples.lock().map(|s| s.clone()).unwrap_or_default()
    }
}
