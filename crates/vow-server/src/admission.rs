//! Backpressure from the delivery backlog: the CPU side of graceful overload.
//!
//! The store's own bound (`overload_max_wait_ms`) refuses what the store cannot commit. On a
//! small machine ingest can still take the cores the deliveries need while the store keeps up:
//! acks stay fast and the due backlog grows as deliveries slow (10,000 msg/s offered to one
//! endpoint on 2 cores delivered 2,134/s; BENCHMARKS.md, issue 18). With
//! a [`DueBound`] set, [`Admission::watch`] reads the due backlog ten times a second and
//! refuses a share of the intake routes (`POST /api/v1/app/{app}/msg`, `POST /in/...`) before
//! their body is read ([`shed`]: 503, `Retry-After`, code `overloaded`): none below half the
//! bound, all at the bound, in proportion between. The bound is a count of due deliveries
//! (`overload_max_due_deliveries`), a wait (`overload_max_due_wait_ms`), or both, whichever
//! refuses more. So the accepted rate settles near what deliveries drain, and the cores go to
//! delivering what was acknowledged. (Refusing all or nothing would let the full offered rate in
//! between bursts of refusals, and those bursts of twice the capacity are what made acks slow.)
//! A count sets how long a message waits only through the drain rate, which is the store's and
//! the machine's; a wait sets it whatever they are. The wait read is the one a message accepted
//! now would have ([`expected_wait`]: the due deliveries beyond the claims this process holds at
//! once, at the rate it drains them, [`DrainRate`]), not the oldest due delivery's: that one
//! lags what was just accepted, and under it the backlog swung from 479 to 9,270 within a run
//! (BENCHMARKS.md, twenty-fifth part).
//!
//! The backlog counted is only the one this process holds up. An endpoint that is slow or
//! throttled holds up its own deliveries: its claims here wait for or are in requests to it,
//! and its backlog would refuse every application's messages while more cores would not send
//! them any sooner. So [`SlowEndpoints`] samples the dispatcher's claims with each read
//! (`delivery::dispatcher::Occupancy`), and the endpoints with at least [`ON_THE_ENDPOINT`] of
//! their claims on the endpoint (smoothed over about a second) are left out of the count
//! (`vow_intake_slow_endpoints`). When ingest starves delivery of cores, the claims wait on this
//! process instead (for a core, for their outcome to be written: about 85 % of their time in
//! BENCHMARKS.md's thirteenth part), and their endpoint's backlog counts.
//!
//! Both are on by default (10,000 due, 1,000 ms), where the delivery workers run: a process
//! without them has no deliveries of its own to give cores to, and cannot tell which endpoints
//! are slow. With several nodes on one PostgreSQL database the due backlog is the database's
//! while the drain rate read is this node's: the wait is read at that rate times the nodes
//! delivering (`Overviews::delivering_nodes`), each taken to drain as this one does; and since
//! that backlog is the same for every node, the nodes read it in turn, about ten times a second
//! between them rather than each ten times (three nodes reading it each ten times a second took
//! 9–11 % of a core of PostgreSQL; BENCHMARKS.md, thirtieth part).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use rand::Rng;
use tokio_util::sync::CancellationToken;
use vow_core::EndpointId;
use vow_store::{Store, StoreError};

use crate::error::ApiError;

/// Gauge: the share of intake refused now, 0 to 1 (absent while the bound is off); set at each
/// read while refusing, and as it falls to 0.
pub const REFUSED_SHARE: &str = "vow_intake_refused_share";

/// Gauge: the endpoints whose backlog the bound leaves out now, as slow ([`SlowEndpoints`]); set
/// at each read while there are any, and as they fall to none.
pub const LEFT_OUT: &str = "vow_intake_slow_endpoints";

/// How often the backlog is read.
const EVERY: Duration = Duration::from_millis(100);

/// Every how many turns (of [`EVERY`]) the delivering nodes are counted (about once a second).
const NODES_EVERY: u64 = 10;

/// [`Admission`]'s share when every intake request is refused.
const ALL: u32 = 1 << 16;

/// The smoothed share of an endpoint's claims on the endpoint from which its backlog is its own.
/// A slow endpoint's is nearly 1 (its requests take far longer than recording them). Under
/// overload requests slow down too (the receiver's or vow's share of the cores is taken), and at
/// one half a flooded endpoint was now and then left out, letting the flood in (BENCHMARKS.md,
/// issue 18's fourteenth part).
const ON_THE_ENDPOINT: f64 = 0.8;

/// The weight of each new sample in the smoothed share: about a second of reads.
const WEIGHT: f64 = 0.2;

/// A smoothed share below which an endpoint is forgotten (about 3 s without claims).
const FORGOTTEN: f64 = 1e-3;

/// How far the due backlog may grow before every intake request is refused; from half of
/// either limit a share of them is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DueBound {
    /// The most deliveries due (`None`: no limit on the count).
    pub deliveries: Option<u64>,
    /// The longest a message accepted now may wait ([`expected_wait`]; `None`: no limit).
    pub wait: Option<Duration>,
}

/// The share refused, out of [`ALL`], at `value` against `limit`: none at or below half the
/// limit, all at the limit, rising in proportion between.
fn refused_of(value: u64, limit: u64) -> u32 {
    let from = limit / 2;
    if value >= limit {
        ALL
    } else if value <= from {
        0
    } else {
        let share = (value - from) * u64::from(ALL) / (limit - from);
        u32::try_from(share).unwrap_or(ALL)
    }
}

/// `d` in whole milliseconds (saturating).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The share of intake requests refused now, from the last due backlog read.
#[derive(Debug, Default)]
pub struct Admission {
    /// Refused out of [`ALL`].
    refused: AtomicU32,
}

impl Admission {
    /// The share of new messages and inbound deliveries refused now, from 0 to 1.
    pub fn refused_share(&self) -> f64 {
        f64::from(self.refused.load(Ordering::Relaxed)) / f64::from(ALL)
    }

    /// Whether to refuse one intake request now: a draw against [`Admission::refused_share`].
    fn refuses(&self) -> bool {
        let refused = self.refused.load(Ordering::Relaxed);
        refused >= ALL || (refused > 0 && rand::thread_rng().gen_range(0..ALL) < refused)
    }

    /// Sets [`Admission::refused_share`] from `due` deliveries due and the `wait` a message
    /// accepted now would have, against `bound`: the larger of the shares its limits refuse.
    pub fn observe(&self, due: u64, wait: Duration, bound: DueBound) {
        let by_count = bound.deliveries.map_or(0, |limit| refused_of(due, limit));
        let by_wait = bound
            .wait
            .map_or(0, |limit| refused_of(millis(wait), millis(limit)));
        let refused = by_count.max(by_wait);
        if self.refused.swap(refused, Ordering::Relaxed) != refused || refused > 0 {
            metrics::gauge!(REFUSED_SHARE).set(self.refused_share());
        }
    }

    /// Reads `store`'s due backlog every [`EVERY`] (with several nodes, in turn:
    /// [`reads_backlog`]), without the endpoints that hold up their own deliveries (from
    /// `on_the_endpoint`: each endpoint with claims in this process and the share of them on the
    /// endpoint), and observes it against `bound`, until `shutdown`. The
    /// wait is at the rate deliveries are recorded here (`recorded_of_places`: those recorded so
    /// far, and the most claims held at once), as many times over as there are nodes delivering
    /// from the store (counted about once a second). A failed read changes nothing (the store's
    /// own errors answer requests).
    pub async fn watch(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        now: impl Fn() -> DateTime<Utc> + Send,
        bound: DueBound,
        on_the_endpoint: impl Fn() -> Vec<(EndpointId, f64)> + Send,
        recorded_of_places: impl Fn() -> (u64, usize) + Send,
        shutdown: CancellationToken,
    ) {
        let mut slow = SlowEndpoints::default();
        let mut drain = DrainRate::default();
        metrics::gauge!(REFUSED_SHARE).set(self.refused_share());
        metrics::gauge!(LEFT_OUT).set(0.0);
        let mut left_out = 0;
        let (mut nodes, mut ticks) = (1, 0u64);
        let mut last_due = None;
        loop {
            if ticks.is_multiple_of(NODES_EVERY) {
                match store.delivering_nodes().await {
                    Ok(n) => nodes = n.max(1),
                    Err(e) => tracing::warn!(error = %e, "could not count the delivering nodes"),
                }
            }
            let read_now = reads_backlog(ticks, nodes);
            ticks = ticks.wrapping_add(1);
            let except = slow.sample(on_the_endpoint());
            if except.len() != left_out || left_out > 0 {
                left_out = except.len();
                metrics::gauge!(LEFT_OUT).set(left_out as f64);
            }
            let due = if read_now {
                match store.backlog(now(), &except).await {
                    Ok(backlog) => {
                        last_due = Some(backlog.due.value);
                        last_due
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not read the delivery backlog");
                        None
                    }
                }
            } else {
                last_due
            };
            if let Some(due) = due {
                let (recorded, places) = recorded_of_places();
                // Each node is taken to hold as many claims, and drain as fast, as this one.
                let places = places as u64 * nodes;
                let per_second = drain.sample(Instant::now(), recorded, due > places);
                // Until the drain is known, no wait is read: a burst is not refused by a rate
                // that is only what was offered before it.
                let wait = per_second.map_or(Duration::ZERO, |r| {
                    expected_wait(due, places, r * nodes as f64)
                });
                self.observe(due, wait, bound);
            }
            tokio::select! {
                () = tokio::time::sleep(EVERY) => {},
                () = shutdown.cancelled() => return,
            }
        }
    }
}

/// Whether the `tick`th turn of [`Admission::watch`] reads the due backlog from the store, with
/// `nodes` delivering: every turn with one node; with several, every `nodes`th, so the nodes
/// read the database's one backlog about ten times a second between them (each at its own
/// phase), not each ten times. The turns between reuse the last read, with the drain rate and
/// the slow endpoints sampled afresh.
fn reads_backlog(tick: u64, nodes: u64) -> bool {
    tick.is_multiple_of(nodes.max(1))
}

/// How fast this process drains the due backlog when it has more than it can hold: the rate it
/// records deliveries, smoothed over about a second of reads, sampled only between two reads
/// that both found more deliveries due than the claims it holds at once. Otherwise the rate
/// read is the offered one, not the drain: after a start or a quiet spell it reads low, and a
/// burst would be refused as if the queue drained that slowly. So the rate is unknown until the
/// first such interval, which sets it, and a quiet spell keeps the last one.
#[derive(Debug, Default)]
struct DrainRate {
    /// The last read: when, the deliveries recorded by then, and whether more were due than the
    /// claims held.
    last: Option<(Instant, u64, bool)>,
    per_second: Option<f64>,
}

impl DrainRate {
    /// Adds a read of `recorded` deliveries at `at`, `busy` when more were due than the claims
    /// held; the smoothed rate per second, once known.
    fn sample(&mut self, at: Instant, recorded: u64, busy: bool) -> Option<f64> {
        if let Some((then, before, was_busy)) = self.last {
            let seconds = at.duration_since(then).as_secs_f64();
            if was_busy && busy && seconds > 0.0 {
                let rate = recorded.saturating_sub(before) as f64 / seconds;
                let smoothed = self.per_second.map_or(rate, |r| r + WEIGHT * (rate - r));
                self.per_second = Some(smoothed);
            }
        }
        self.last = Some((at, recorded, busy));
        self.per_second
    }
}

/// The wait a message accepted now would have before its first attempt: the `due` deliveries
/// beyond the `places` the delivering nodes hold claims in at once (those are being
/// attempted), at their `per_second` (at least one a second: until deliveries are recorded, a
/// queue waits long). Capped at an hour.
fn expected_wait(due: u64, places: u64, per_second: f64) -> Duration {
    let queued = due.saturating_sub(places) as f64;
    Duration::from_secs_f64((queued / per_second.max(1.0)).min(3600.0))
}

/// The endpoints that hold up their own deliveries: those whose claims, smoothed over about a
/// second of samples, mostly wait for or are in requests to them.
#[derive(Debug, Default)]
struct SlowEndpoints {
    /// Each endpoint's smoothed share of claims on the endpoint.
    smoothed: HashMap<EndpointId, f64>,
}

impl SlowEndpoints {
    /// Adds a sample of each endpoint's share of claims on the endpoint (one not in it has no
    /// claims here: 0; a new one starts at its first sample); the slow endpoints now. An
    /// endpoint is forgotten once it has no claims here and its share has decayed.
    fn sample(&mut self, on_the_endpoint: Vec<(EndpointId, f64)>) -> Vec<EndpointId> {
        let now: HashMap<EndpointId, f64> = on_the_endpoint.into_iter().collect();
        for (endpoint, smoothed) in &mut self.smoothed {
            let sample = now.get(endpoint).copied().unwrap_or(0.0);
            *smoothed += WEIGHT * (sample - *smoothed);
        }
        for (endpoint, sample) in &now {
            self.smoothed.entry(*endpoint).or_insert(*sample);
        }
        let kept =
            |endpoint: &EndpointId, s: &mut f64| *s >= FORGOTTEN || now.contains_key(endpoint);
        self.smoothed.retain(kept);
        let slow = self.smoothed.iter().filter(|(_, s)| **s >= ON_THE_ENDPOINT);
        slow.map(|(endpoint, _)| *endpoint).collect()
    }
}

/// Refuses an intake request drawn for refusal, before anything else reads it.
pub async fn shed(State(admission): State<Arc<Admission>>, req: Request, next: Next) -> Response {
    if admission.refuses() && is_intake(req.method(), req.uri().path()) {
        return ApiError::from(StoreError::overloaded()).into_response();
    }
    next.run(req).await
}

/// Whether `method path` offers new work: a message create or an inbound delivery.
fn is_intake(method: &Method, path: &str) -> bool {
    if method != Method::POST {
        return false;
    }
    // Read on every request while refusing: no allocation.
    let path = path.trim_end_matches('/');
    if let Some(rest) = path.strip_prefix("/api/v1/app/") {
        let app = rest.strip_suffix("/msg");
        return app.is_some_and(|app| !app.is_empty() && !app.contains('/'));
    }
    path.starts_with("/in/")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BY_COUNT: DueBound = DueBound {
        deliveries: Some(100),
        wait: None,
    };

    #[test]
    fn the_delivering_nodes_read_the_backlog_in_turn() {
        let read = |nodes| (0..30).filter(|&t| reads_backlog(t, nodes)).count();
        // One node reads at every turn; three read at a third of them each, so about ten a
        // second between them; a count of zero reads as one.
        assert_eq!(read(1), 30);
        assert_eq!(read(3), 10);
        assert_eq!(read(0), 30);
        assert!(reads_backlog(0, 3) && !reads_backlog(1, 3) && reads_backlog(3, 3));
    }

    #[test]
    fn the_refused_share_rises_from_half_the_limit_to_all_at_it() {
        let a = Admission::default();
        for (due, share) in [
            (0, 0.0),
            (50, 0.0),
            (75, 0.5),
            (90, 0.8),
            (100, 1.0),
            (5000, 1.0),
        ] {
            a.observe(due, Duration::from_secs(3600), BY_COUNT);
            assert!((a.refused_share() - share).abs() < 1e-4, "due {due}");
        }
        a.observe(10, Duration::ZERO, BY_COUNT);
        assert_eq!(a.refused_share(), 0.0, "falls again as the backlog does");
        let three = DueBound {
            deliveries: Some(3),
            wait: None,
        };
        a.observe(2, Duration::ZERO, three);
        assert_eq!(a.refused_share(), 0.5, "a limit of 3 refuses half at 2");
    }

    /// A wait limit refuses by the expected wait as a count limit does by the count; with both,
    /// the one that refuses more sets the share.
    #[test]
    fn a_wait_limit_refuses_by_the_wait_and_the_larger_share_wins() {
        let a = Admission::default();
        let by_wait = DueBound {
            deliveries: None,
            wait: Some(Duration::from_secs(4)),
        };
        for (waited_ms, share) in [
            (0, 0.0),
            (2_000, 0.0),
            (3_000, 0.5),
            (3_600, 0.8),
            (4_000, 1.0),
            (60_000, 1.0),
        ] {
            a.observe(1_000_000, Duration::from_millis(waited_ms), by_wait);
            let got = a.refused_share();
            assert!((got - share).abs() < 1e-4, "waited {waited_ms} ms: {got}");
        }
        let both = DueBound {
            deliveries: Some(100),
            wait: Some(Duration::from_secs(4)),
        };
        a.observe(90, Duration::from_millis(3_000), both);
        assert!((a.refused_share() - 0.8).abs() < 1e-4, "the count's 0.8");
        a.observe(75, Duration::from_millis(3_600), both);
        assert!((a.refused_share() - 0.8).abs() < 1e-4, "the wait's 0.8");
        a.observe(10, Duration::from_millis(100), both);
        assert_eq!(a.refused_share(), 0.0, "neither refuses");
        a.observe(1_000_000, Duration::from_secs(3600), DueBound::default());
        assert_eq!(a.refused_share(), 0.0, "no limit, nothing refused");
    }

    /// The rate is known from the first interval between two busy reads, follows what is
    /// recorded in such intervals about a second behind (each weighs a fifth), and holds through
    /// a quiet spell.
    #[test]
    fn the_drain_rate_is_the_recorded_rate_while_busy_smoothed() {
        let mut drain = DrainRate::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(drain.sample(at(0), 0, false), None, "no rate from one read");
        assert_eq!(drain.sample(at(100), 100, false), None, "not busy: offered");
        assert_eq!(
            drain.sample(at(200), 200, true),
            None,
            "busy from this read on"
        );
        assert_eq!(
            drain.sample(at(300), 700, true),
            Some(5_000.0),
            "set at once"
        );
        let rate = drain.sample(at(400), 1_700, true).unwrap();
        assert!((rate - 6_000.0).abs() < 1e-6, "10,000/s weighs 0.2: {rate}");
        let mut held = Some(rate);
        for i in 5..=40 {
            held = drain.sample(at(i * 100), 1_700, false);
        }
        assert_eq!(held, Some(rate), "a quiet spell keeps the last rate");
        assert_eq!(
            drain.sample(at(4_100), 1_800, true),
            held,
            "busy again from here"
        );
        let mut settled = 0.0;
        for i in 42..=70 {
            settled = drain
                .sample(at(i * 100), 1_800 + (i - 41) * 300, true)
                .unwrap();
        }
        assert!(
            (settled - 3_000.0).abs() < 10.0,
            "settles at 3,000/s: {settled}"
        );
        assert_eq!(
            drain.sample(at(7_000), 1_800 + 29 * 300, true),
            Some(settled),
            "no time, no new sample"
        );
    }

    #[test]
    fn the_expected_wait_is_the_queue_beyond_the_claims_held_at_the_drain_rate() {
        let ms = |d: Duration| d.as_millis();
        assert_eq!(
            ms(expected_wait(256, 256, 5_000.0)),
            0,
            "all being attempted"
        );
        assert_eq!(ms(expected_wait(5_256, 256, 5_000.0)), 1_000);
        assert_eq!(ms(expected_wait(2_756, 256, 1_000.0)), 2_500);
        assert_eq!(
            ms(expected_wait(266, 256, 0.0)),
            10_000,
            "at least one a second"
        );
        assert_eq!(expected_wait(u64::MAX, 0, 0.0), Duration::from_secs(3_600));
    }

    #[test]
    fn requests_are_refused_in_the_share_drawn() {
        let a = Admission::default();
        let refused = |a: &Admission| (0..20_000).filter(|_| a.refuses()).count();
        assert_eq!(refused(&a), 0);
        a.observe(100, Duration::ZERO, BY_COUNT);
        assert_eq!(refused(&a), 20_000);
        a.observe(75, Duration::ZERO, BY_COUNT);
        let half = refused(&a);
        assert!(
            (9_000..=11_000).contains(&half),
            "{half} of 20,000 at one half"
        );
    }

    /// A slow endpoint is one from its first sample while most of its claims wait on it, and
    /// stops being one as soon as none are; an endpoint whose claims are half on it (its
    /// requests slowed by an overload) never is, though all of them are now and then.
    #[test]
    fn slow_endpoints_are_those_whose_claims_mostly_wait_on_them() {
        let (slow, starved) = (EndpointId::new(), EndpointId::new());
        let mut endpoints = SlowEndpoints::default();
        assert_eq!(endpoints.sample(vec![(slow, 1.0)]), [slow]);
        for i in 0..50 {
            // The starved endpoint's claims are all on it in one sample of six, half in the rest.
            let share = if i % 6 == 5 { 1.0 } else { 0.5 };
            let found = endpoints.sample(vec![(slow, 0.9), (starved, share)]);
            assert_eq!(found, [slow], "sample {i}");
        }
        let mut after = 0;
        while endpoints.sample(vec![(starved, 0.0)]).contains(&slow) {
            after += 1;
        }
        assert_eq!(after, 0, "0.9 falls below 0.8 at the first sample of none");
        for _ in 0..40 {
            endpoints.sample(vec![]);
        }
        assert!(endpoints.smoothed.is_empty(), "forgotten without claims");
    }

    #[test]
    fn only_message_creates_and_inbound_deliveries_are_intake() {
        for (method, path, intake) in [
            (Method::POST, "/api/v1/app/app_1/msg", true),
            (Method::POST, "/api/v1/app/app_1/msg/", true),
            (Method::POST, "/in/src_1", true),
            (Method::POST, "/in/t/token", true),
            (Method::GET, "/api/v1/app/app_1/msg", false),
            (Method::POST, "/api/v1/app", false),
            (Method::POST, "/api/v1/app/app_1/endpoint", false),
            (Method::POST, "/api/v1/app/app_1/msg/msg_1/resend", false),
            (Method::POST, "/api/v1/app//msg", false),
            (Method::POST, "/inbox", false),
            (Method::POST, "/in", false),
            (Method::POST, "/in/", false),
            (Method::POST, "/api/v1/app/msg", false),
            (Method::POST, "/api/v1/app/a/b/msg", false),
        ] {
            assert_eq!(is_intake(&method, path), intake, "{method} {path}");
        }
    }
}
