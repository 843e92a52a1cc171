//! `inbound`: verified ingest of signed third-party webhooks (issue 5), with duplicates mixed
//! in, checked against the durable store.
//!
//! One vow (delivery workers off) gets one Standard Webhooks source with no destinations.
//! Deliveries are signed before each phase starts ([`crate::signed::Plan`]): 1 KiB JSON
//! events with unique ids; every 10th request re-sends an earlier delivery byte for byte (its
//! id, body, timestamp and signature), and every 1,000th is signed with the wrong secret.
//! - **Phase A**, closed loop: C clients (default 64) post back to back for D s (default 10),
//!   which gives the most requests per second vow verifies and answers.
//! - **Phase B**, open loop: a fixed schedule at half of phase A's rate for 2·D s. Latency runs
//!   from each request's *scheduled* send time to its answer, so a stall that delays later
//!   sends is counted against them (no coordinated omission); the time from the actual send is
//!   reported beside it.
//! - **Books**: vow is stopped (SIGTERM) and started again on the same database; the source's
//!   events and rejections are then read back through the API, and counted once more in the
//!   database after vow stops. A run is VOID unless every valid request was answered 200, each
//!   id was answered `received` exactly once and `duplicate` on every re-send, the store holds
//!   exactly one event per id sent (duplicates stored = 0, counted), each event's `duplicates`
//!   equals its re-sends, and every wrongly signed request was refused 401, recorded and not
//!   stored.
//!
//! Target (issue 5, item 5): ack p99 ≤ 20 ms at half of the maximum rate.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use hdrhistogram::Histogram;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::{commit_baseline, cpu_lines, secs, Options, Rig};
use crate::api::{Api, InboundAnswer};
use crate::ledger::{histogram, ms, spread, Report};
use crate::probe::{quantile, Probe};
use crate::receiver::Clock;
use crate::signed::{self, Delivery, Kind, Plan};
use crate::vow_process::InboundCounts;

/// Requests signed per second of phase A: more than vow can take on this machine, so the
/// closed loop runs for its whole duration (if it runs out, the phase ends early and says so).
const POOL_PER_S_SQLITE: f64 = 40_000.0;
/// The same for PostgreSQL.
const POOL_PER_S_POSTGRES: f64 = 12_000.0;
/// The open-loop rate, as a fraction of phase A's.
const FRACTION: f64 = 0.5;
/// How often phase B's disk probe fsyncs (a 1 KiB append) beside vow.
const PROBE_EVERY: Duration = Duration::from_millis(20);
/// Ack p99 allowed at that rate (ms).
const TARGET_P99_MS: f64 = 20.0;

/// What one phase sent and heard.
#[derive(Debug)]
struct Phase {
    /// Requests sent, by kind: new, duplicate, invalid.
    sent: [u64; 3],
    /// 200 answers (received or duplicate).
    acked: u64,
    /// 401 answers to invalid requests.
    refused: u64,
    /// Answers that are wrong for the request's kind (a valid one not 200, an invalid one not
    /// 401), and requests with no answer.
    wrong: u64,
    /// The first wrong answer, for the report.
    first_wrong: Option<InboundAnswer>,
    /// 200s: from the scheduled send (open loop) or the send (closed loop) to the answer (µs).
    ack: Histogram<u64>,
    /// The same, for new deliveries only and for re-sends only.
    ack_new: Histogram<u64>,
    ack_duplicate: Histogram<u64>,
    /// 200s from the actual send to the answer (µs).
    service: Histogram<u64>,
    /// Open loop: how late each request was sent against its schedule (µs).
    lag: Histogram<u64>,
    /// Open loop: (due, latency) of every 200, µs, for the per-second view.
    timeline: Vec<(u64, u32)>,
    /// The first send and the last answer (µs).
    window_us: (u64, u64),
    /// The plan ran out before the duration did.
    exhausted: bool,
}

impl Phase {
    fn new() -> Self {
        Self {
            sent: [0; 3],
            acked: 0,
            refused: 0,
            wrong: 0,
            first_wrong: None,
            ack: histogram(),
            ack_new: histogram(),
            ack_duplicate: histogram(),
            service: histogram(),
            lag: histogram(),
            timeline: Vec::new(),
            window_us: (0, 0),
            exhausted: false,
        }
    }

    /// Books one request of `kind`, due at `due_us`, sent at `sent_us`, answered at `done_us`.
    fn record(
        &mut self,
        kind: Kind,
        answer: InboundAnswer,
        due_us: u64,
        sent_us: u64,
        done_us: u64,
    ) {
        self.sent[kind as usize] += 1;
        let _ = self.lag.record(sent_us.saturating_sub(due_us).max(1));
        let ok = match (kind, answer) {
            (Kind::Invalid, InboundAnswer::Status(401)) => {
                self.refused += 1;
                true
            }
            (Kind::New | Kind::Duplicate, InboundAnswer::Received | InboundAnswer::Duplicate) => {
                self.acked += 1;
                let latency = done_us.saturating_sub(due_us).max(1);
                let _ = self.ack.record(latency);
                let by_kind = if kind == Kind::New {
                    &mut self.ack_new
                } else {
                    &mut self.ack_duplicate
                };
                let _ = by_kind.record(latency);
                let _ = self.service.record(done_us.saturating_sub(sent_us).max(1));
                self.timeline
                    .push((due_us, u32::try_from(latency).unwrap_or(u32::MAX)));
                true
            }
            _ => false,
        };
        if !ok {
            self.wrong += 1;
            self.first_wrong.get_or_insert(answer);
        }
    }

    fn merge(&mut self, other: Phase) {
        for (a, b) in self.sent.iter_mut().zip(other.sent) {
            *a += b;
        }
        self.timeline.extend(other.timeline);
        self.acked += other.acked;
        self.refused += other.refused;
        self.wrong += other.wrong;
        self.first_wrong = self.first_wrong.or(other.first_wrong);
        for (a, b) in [
            (&mut self.ack, &other.ack),
            (&mut self.ack_new, &other.ack_new),
            (&mut self.ack_duplicate, &other.ack_duplicate),
            (&mut self.service, &other.service),
            (&mut self.lag, &other.lag),
        ] {
            let _ = a.add(b);
        }
    }

    fn total(&self) -> u64 {
        self.sent.iter().sum()
    }

    fn seconds(&self) -> f64 {
        secs(self.window_us.1.saturating_sub(self.window_us.0))
    }

    /// The ack p99 (ms) of each second of the schedule, by due time.
    fn p99_per_second(&self) -> Vec<f64> {
        let mut seconds: Vec<Vec<u32>> = Vec::new();
        for &(due, latency) in &self.timeline {
            let s = (due.saturating_sub(self.window_us.0) / 1_000_000) as usize;
            if seconds.len() <= s {
                seconds.resize_with(s + 1, Vec::new);
            }
            seconds[s].push(latency);
        }
        seconds
            .into_iter()
            .filter(|v| !v.is_empty())
            .map(|mut v| {
                v.sort_unstable();
                let i = ((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1;
                f64::from(v[i]) / 1000.0
            })
            .collect()
    }

    /// Requests answered per second (200s and 401s alike: all were verified).
    fn rate(&self) -> f64 {
        (self.acked + self.refused) as f64 / self.seconds().max(1e-9)
    }
}

/// Where the load goes.
#[derive(Clone)]
struct Ingest {
    api: Api,
    source: Arc<str>,
    clock: Clock,
}

impl Ingest {
    /// Sends `d` once; its counters book the answer. Returns the answer and when the request
    /// was sent and answered (µs).
    async fn send(&self, d: &Delivery) -> (InboundAnswer, u64, u64) {
        d.sends.fetch_add(1, Ordering::Relaxed);
        let sent_us = self.clock.now_us();
        let answer = self.api.post_inbound(&self.source, d).await;
        let done_us = self.clock.now_us();
        let counter = match answer {
            InboundAnswer::Received => &d.received,
            InboundAnswer::Duplicate => &d.duplicate,
            InboundAnswer::Status(401) => &d.refused,
            _ => &d.other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        (answer, sent_us, done_us)
    }

    /// `concurrency` clients take `plan`'s requests in order, back to back, for `duration`.
    async fn closed_loop(&self, plan: &Arc<Plan>, concurrency: usize, duration: Duration) -> Phase {
        let start = self.clock.now_us();
        let end = start + u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        for _ in 0..concurrency {
            let (me, plan, next) = (self.clone(), Arc::clone(plan), Arc::clone(&next));
            tasks.spawn(async move {
                let mut local = Phase::new();
                while me.clock.now_us() < end {
                    let Some((kind, d)) = plan.requests.get(next.fetch_add(1, Ordering::Relaxed))
                    else {
                        break;
                    };
                    let (answer, sent_us, done_us) = me.send(d).await;
                    local.record(*kind, answer, sent_us, sent_us, done_us);
                }
                local
            });
        }
        let mut all = Phase::new();
        while let Some(local) = tasks.join_next().await {
            all.merge(local.expect("a load task panicked"));
        }
        all.window_us = (start, self.clock.now_us());
        all.exhausted = next.load(Ordering::Relaxed) >= plan.len();
        all
    }

    /// Sends `plan`'s requests on a fixed schedule of `rate` per second (request i is due at
    /// start + i/rate), whatever the answers' latency, with at most `max_in_flight` outstanding
    /// (past that, sends slip, and the slip counts in their latency).
    async fn open_loop(&self, plan: &Arc<Plan>, rate: f64, max_in_flight: usize) -> Phase {
        let sem = Arc::new(Semaphore::new(max_in_flight));
        let results = Arc::new(Mutex::new(Phase::new()));
        let start = self.clock.now_us() + 1_000;
        let due = |i: usize| start + (i as f64 * 1e6 / rate) as u64;
        let mut i = 0;
        while i < plan.len() {
            let now = self.clock.now_us();
            let due_us = due(i);
            if due_us > now {
                tokio::time::sleep(Duration::from_micros(due_us - now)).await;
                continue;
            }
            let Ok(permit) = Arc::clone(&sem).acquire_owned().await else {
                break;
            };
            let (me, plan, results) = (self.clone(), Arc::clone(plan), Arc::clone(&results));
            tokio::spawn(async move {
                let (kind, d) = &plan.requests[i];
                let (answer, sent_us, done_us) = me.send(d).await;
                if let Ok(mut r) = results.lock() {
                    r.record(*kind, answer, due_us, sent_us, done_us);
                }
                drop(permit);
            });
            i += 1;
        }
        let all = u32::try_from(max_in_flight).unwrap_or(u32::MAX);
        let _ = sem.acquire_many(all).await;
        let mut out = std::mem::replace(&mut *results.lock().expect("results lock"), Phase::new());
        out.window_us = (start, self.clock.now_us());
        out
    }
}

/// Signs a plan of `n` requests (on a blocking thread: it takes a few seconds for 400,000).
async fn sign_plan(prefix: &'static str, n: usize, seed: u64) -> anyhow::Result<Arc<Plan>> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let plan = tokio::task::spawn_blocking(move || Plan::new(prefix, n, now, seed)).await?;
    Ok(Arc::new(plan))
}

/// The run's books: what was sent and answered against what the store holds.
#[derive(Debug, Default)]
struct Books {
    /// Requests sent: new, duplicate, invalid.
    sent: [u64; 3],
    /// Distinct valid ids sent.
    ids: u64,
    /// Valid ids not answered `received` exactly once and `duplicate` on every re-send.
    ids_misanswered: u64,
    /// Invalid deliveries not refused 401 on every send.
    invalid_misanswered: u64,
    /// Requests answered wrongly for their kind, or not at all.
    wrong: u64,
    /// Events listed by the API after the restart.
    stored: u64,
    /// The sum of their `duplicates`.
    duplicates_counted: u64,
    /// Rows beyond the first for an id, or for an id never validly sent (must be 0).
    duplicates_stored: u64,
    /// Invalid deliveries' ids among the stored events (must be 0).
    invalid_stored: u64,
    /// Ids sent but not stored.
    missing: u64,
    /// Events whose `duplicates` is not their re-sends.
    miscounted: u64,
    /// Events not in state `received` (quarantined: must be 0).
    not_received: u64,
    /// Rejections listed by the API, and of those, how many were not 401.
    rejections: u64,
    rejections_not_401: u64,
    /// Their reasons, with counts.
    reasons: BTreeMap<String, u64>,
    /// The same, counted in the database after vow stopped.
    sql: InboundCounts,
}

impl Books {
    /// Checks the answers the `plans` got against the `events` and `rejections` listed.
    fn new(
        plans: &[&Plan],
        phases: &[&Phase],
        events: &[crate::api::StoredEvent],
        rejections: &[crate::api::StoredRejection],
        sql: InboundCounts,
    ) -> Self {
        let mut b = Books {
            sql,
            ..Books::default()
        };
        for p in phases {
            for (a, s) in b.sent.iter_mut().zip(p.sent) {
                *a += s;
            }
            b.wrong += p.wrong;
        }
        let count = Delivery::count;
        let mut valid: HashMap<&str, (&Delivery, bool)> = HashMap::new();
        let mut invalid: HashMap<&str, &Delivery> = HashMap::new();
        for d in plans.iter().flat_map(|p| &p.deliveries) {
            let sends = count(&d.sends);
            if sends == 0 {
                continue;
            }
            if d.invalid {
                if count(&d.refused) != sends {
                    b.invalid_misanswered += 1;
                }
                invalid.insert(&d.id, d);
            } else {
                b.ids += 1;
                if count(&d.received) != 1 || count(&d.duplicate) != sends - 1 {
                    b.ids_misanswered += 1;
                }
                valid.insert(&d.id, (d, false));
            }
        }
        for e in events {
            b.stored += 1;
            b.duplicates_counted += e.duplicates;
            b.not_received += u64::from(e.state != "received");
            let id = e.event_id.as_deref().unwrap_or("");
            match valid.get_mut(id) {
                Some((d, seen @ false)) => {
                    *seen = true;
                    if e.duplicates != u64::from(count(&d.sends) - 1) {
                        b.miscounted += 1;
                    }
                }
                Some((_, true)) => b.duplicates_stored += 1,
                None => {
                    b.duplicates_stored += 1;
                    b.invalid_stored += u64::from(invalid.contains_key(id));
                }
            }
        }
        b.missing = valid.values().filter(|(_, seen)| !seen).count() as u64;
        b.rejections = rejections.len() as u64;
        b.rejections_not_401 = rejections.iter().filter(|r| r.status != 401).count() as u64;
        for r in rejections {
            *b.reasons.entry(r.reason.clone()).or_default() += 1;
        }
        b
    }

    fn problems(&self) -> Vec<String> {
        let [_, duplicates, invalid] = self.sent;
        let mut p = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                p.push(what);
            }
        };
        check(
            self.wrong == 0,
            format!("{} wrong or missing answers", self.wrong),
        );
        check(
            self.ids_misanswered == 0,
            format!(
                "{} ids not answered received once + duplicate per re-send",
                self.ids_misanswered
            ),
        );
        check(
            self.invalid_misanswered == 0,
            format!(
                "{} invalid deliveries not refused 401",
                self.invalid_misanswered
            ),
        );
        check(
            self.stored == self.ids,
            format!("stored {} != ids sent {}", self.stored, self.ids),
        );
        check(
            self.duplicates_stored == 0,
            format!("{} duplicates stored", self.duplicates_stored),
        );
        check(
            self.missing == 0,
            format!("{} ids not stored", self.missing),
        );
        check(
            self.duplicates_counted == duplicates,
            format!(
                "duplicates counted {} != re-sends {duplicates}",
                self.duplicates_counted
            ),
        );
        check(
            self.miscounted == 0,
            format!("{} events miscounted", self.miscounted),
        );
        check(
            self.not_received == 0,
            format!("{} events not received", self.not_received),
        );
        check(
            self.rejections == invalid && self.rejections_not_401 == 0,
            format!(
                "rejections {} ({} not 401) != invalid sent {invalid}",
                self.rejections, self.rejections_not_401
            ),
        );
        let listed = InboundCounts {
            events: self.stored,
            duplicates: self.duplicates_counted,
            not_received: self.not_received,
            rejections: self.rejections,
        };
        check(
            self.sql == listed,
            format!(
                "the database holds {:?}, the API listed {listed:?}",
                self.sql
            ),
        );
        p
    }

    fn lines(&self) -> Vec<String> {
        let [new, duplicates, invalid] = self.sent;
        let problems = self.problems();
        let verdict = if problems.is_empty() {
            "BALANCED".to_string()
        } else {
            format!("VOID ({})", problems.join("; "))
        };
        vec![
            format!(
                "sent {} = new {new} + duplicates {duplicates} + invalid {invalid}; wrong or missing answers {}; ids answered received once and duplicate per re-send: {} of {}",
                new + duplicates + invalid,
                self.wrong,
                self.ids - self.ids_misanswered,
                self.ids
            ),
            format!(
                "store after a restart (API): events {} for {} ids sent | duplicates stored {} (invalid ones {}) | missing {} | duplicates counted {} for {duplicates} re-sent, miscounted events {} | not received {} | rejections {} for {invalid} invalid sent ({} not 401; reasons {:?})",
                self.stored,
                self.ids,
                self.duplicates_stored,
                self.invalid_stored,
                self.missing,
                self.duplicates_counted,
                self.miscounted,
                self.not_received,
                self.rejections,
                self.rejections_not_401,
                self.reasons
            ),
            format!(
                "store (SQL, vow stopped): events {}, duplicates {}, not received {}, rejections {} -> {verdict}",
                self.sql.events, self.sql.duplicates, self.sql.not_received, self.sql.rejections
            ),
        ]
    }
}

/// "disk probe: n fsyncs, p50 .., p99 .., max .." for the probe's readings.
fn fsync_summary(fsyncs: &[(u64, u32)]) -> String {
    let v: Vec<f64> = fsyncs
        .iter()
        .map(|&(_, took)| f64::from(took) / 1000.0)
        .collect();
    let (Some(p50), Some(p99), Some(max)) =
        (quantile(&v, 0.5), quantile(&v, 0.99), quantile(&v, 1.0))
    else {
        return "disk probe: no readings".into();
    };
    format!(
        "disk probe (1 KiB append + fsync every {} ms beside vow): {} fsyncs, p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms",
        PROBE_EVERY.as_millis(),
        v.len(),
    )
}

/// p99 in ms.
fn p99(h: &Histogram<u64>) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        ms(h.value_at_quantile(0.99))
    }
}

/// Runs both phases, then the books; one report per phase.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let baseline = commit_baseline::for_backend(opts).await?;
    let a_secs = opts.duration_or(10);
    let b_secs = a_secs * 2;
    let mut rig = Rig::start(opts, false, 0, &[]).await?;
    let source: Arc<str> = rig.target.api.create_source(signed::SECRET).await?.into();
    let ingest = Ingest {
        api: rig.target.api.clone(),
        source: Arc::clone(&source),
        clock: rig.target.clock,
    };
    let per_s = if opts.pg.is_some() {
        POOL_PER_S_POSTGRES
    } else {
        POOL_PER_S_SQLITE
    };

    // Phase A: the most vow takes.
    let plan_a = sign_plan("a", (per_s * a_secs.as_secs_f64()) as usize, 1).await?;
    rig.begin_window();
    let a = ingest.closed_loop(&plan_a, opts.concurrency, a_secs).await;
    let mut cpu_a = rig.end_window();
    rig.attribute_postgres(&mut cpu_a).await?;
    let max_rate = a.rate();

    // Phase B: half of it, on a schedule.
    let rate = max_rate * FRACTION;
    let plan_b = sign_plan("b", (rate * b_secs.as_secs_f64()).ceil() as usize, 2).await?;
    let probe = Probe::fsync(ingest.clock, PROBE_EVERY)?;
    rig.begin_window();
    let b = ingest.open_loop(&plan_b, rate, opts.max_in_flight).await;
    let mut cpu_b = rig.end_window();
    rig.attribute_postgres(&mut cpu_b).await?;
    let fsyncs = probe.stop();

    // The books, from the store after a restart.
    rig.restart(false).await?;
    let api = Api::new(rig.base_url().context("vow is running")?, 4)?;
    let events = api.source_events(&source).await?;
    let rejections = api.source_rejections(&source).await?;
    let (db, peak_rss) = rig.close_bare().await?;
    let sql = db.count_inbound().await?;
    db.cleanup().await?;
    let books = Books::new(&[&plan_a, &plan_b], &[&a, &b], &events, &rejections, sql);
    let balanced = books.problems().is_empty();

    let backend = opts.backend();
    let mut ra = Report::new(format!(
        "inbound {backend} A: closed loop, concurrency={}, {}s",
        opts.concurrency,
        a_secs.as_secs()
    ));
    ra.metric("baseline_commits_per_s", baseline);
    ra.metric("max_requests_per_s", max_rate);
    ra.metric("ratio_to_baseline", max_rate / baseline);
    ra.line(format!(
        "verified requests/s {max_rate:.0} ({} answered in {:.1} s: {} 200, {} 401); single-row commit baseline {baseline:.0}/s -> ratio {:.2}x",
        a.acked + a.refused,
        a.seconds(),
        a.acked,
        a.refused,
        max_rate / baseline
    ));
    if a.exhausted {
        ra.line(format!(
            "note: the {} pre-signed requests ran out before {} s",
            plan_a.len(),
            a_secs.as_secs()
        ));
    }
    let lat = ra.latency("ack", &a.ack);
    ra.line(lat);
    cpu_lines(&mut ra, &cpu_a, a.total(), "requests", peak_rss);

    let mut rb = Report::new(format!(
        "inbound {backend} B: open loop at {:.0} % of A's rate, {}s",
        FRACTION * 100.0,
        b_secs.as_secs()
    ));
    let achieved = b.total() as f64 / b_secs.as_secs_f64();
    rb.metric("offered_requests_per_s", rate);
    rb.metric("achieved_requests_per_s", achieved);
    rb.line(format!(
        "offered {rate:.0} requests/s ({:.0} % of {max_rate:.0}); sent {} in {:.1} s ({achieved:.0}/s), last answer after {:.1} s",
        FRACTION * 100.0,
        b.total(),
        b_secs.as_secs_f64(),
        b.seconds()
    ));
    let lat = rb.latency("ack", &b.ack);
    rb.line(format!("{lat} (from the scheduled send)"));
    let lat = rb.latency("service", &b.service);
    rb.line(format!("{lat} (from the actual send)"));
    rb.line(format!(
        "p99 of new deliveries {:.2} ms, of re-sends {:.2} ms; sends late against the schedule: p99 {:.2} ms, max {:.2} ms",
        p99(&b.ack_new),
        p99(&b.ack_duplicate),
        p99(&b.lag),
        ms(b.lag.max())
    ));
    rb.metric("lag_p99_ms", p99(&b.lag));
    let per_second = b.p99_per_second();
    if !per_second.is_empty() {
        let (median, best, worst) = spread(&per_second);
        let worst_at = per_second.iter().position(|v| *v == worst).unwrap_or(0);
        let over = per_second.iter().filter(|v| **v > TARGET_P99_MS).count();
        rb.metric("worst_second_p99_ms", worst);
        rb.metric("seconds_over_target", over as f64);
        rb.line(format!(
            "ack p99 second by second: median {median:.2} ms, best {best:.2} ms, worst {worst:.2} ms (second {worst_at}); {over} of {} seconds over {TARGET_P99_MS} ms",
            per_second.len()
        ));
        let second = |s: usize| {
            let from = b.window_us.0 + s as u64 * 1_000_000;
            fsyncs
                .iter()
                .filter(|(t, _)| (from..from + 1_000_000).contains(t))
                .map(|(_, took)| f64::from(*took) / 1000.0)
                .fold(0.0, f64::max)
        };
        rb.line(format!(
            "{}; slowest probe fsync in the worst ack second: {:.2} ms",
            fsync_summary(&fsyncs),
            second(worst_at)
        ));
    }
    if !fsyncs.is_empty() {
        let mut h = histogram();
        for (_, took) in &fsyncs {
            let _ = h.record(u64::from(*took).max(1));
        }
        rb.metric("probe_fsync_p99_ms", p99(&h));
        rb.metric("probe_fsync_max_ms", ms(h.max()));
    }
    let met = !b.ack.is_empty() && p99(&b.ack) <= TARGET_P99_MS;
    rb.line(format!(
        "target: ack p99 <= {TARGET_P99_MS} ms at half of the maximum rate: {}",
        if met { "MET" } else { "MISSED" }
    ));
    cpu_lines(&mut rb, &cpu_b, b.total(), "requests", peak_rss);
    for (name, p) in [("A", &a), ("B", &b)] {
        if let Some(w) = p.first_wrong {
            rb.line(format!("phase {name}: first wrong answer: {w:?}"));
        }
    }
    let [new, duplicates, invalid] = books.sent;
    rb.metric("sent", (new + duplicates + invalid) as f64);
    rb.metric("duplicates_sent", duplicates as f64);
    rb.metric("duplicates_counted", books.duplicates_counted as f64);
    rb.metric("duplicates_stored", books.duplicates_stored as f64);
    rb.metric("invalid_refused", books.rejections as f64);
    for line in books.lines() {
        rb.line(line);
    }
    ra.line(format!(
        "books: see phase B ({})",
        if balanced { "BALANCED" } else { "VOID" }
    ));
    ra.valid = balanced;
    rb.valid = balanced;
    Ok(vec![ra, rb])
}
