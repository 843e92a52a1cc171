//! `slow-neighbour`: does one slow endpoint hold back the others?
//!
//! Two runs in one invocation, each on a fresh database: 10 endpoints at `--rate` deliveries/s
//! in all (rate/10 messages/s, each to all 10) for D seconds (default 30). In the first none is
//! slow; in the second endpoint 0 answers after 2 s. Compares the other 9's delivered/s while
//! the load ran. Target: the slow run keeps ≥ 90 % of the baseline. The slow endpoint's queue is
//! not waited for: what it has not received when the others are drained is the ledger's cutoff.

use std::time::Duration;

use super::{secs, Options, Rig};
use crate::ledger::{ms, Report};

const ENDPOINTS: usize = 10;
const SLOW: Duration = Duration::from_secs(2);

struct Measured {
    fast_rate: f64,
    p99_ms: f64,
    report: Report,
}

async fn measure(opts: &Options, slow: bool) -> anyhow::Result<Measured> {
    let duration = opts.duration_or(30);
    let delays = if slow { vec![SLOW] } else { Vec::new() };
    let mut rig = Rig::start(opts, true, ENDPOINTS, &delays).await?;
    rig.begin_window();
    let load = rig
        .target
        .open_loop(opts.rate / ENDPOINTS as f64, duration, opts.max_in_flight)
        .await;
    let acked = load.acked.len() as u64;
    let first = usize::from(slow);
    let fast_expected = acked * (ENDPOINTS - first) as u64;
    let cap = opts.drain_cap;
    let drained = rig
        .receiver
        .wait_until(cap, |r| {
            (first..ENDPOINTS).map(|i| r.delivered_to(i)).sum::<u64>() >= fast_expected
        })
        .await;
    let cpu = rig.end_window();
    let closed = rig.close(&load, true, slow.then_some(0)).await?;
    let j = &closed.joined;
    let slow_got = j.arrivals[0].len() as u64;
    let cutoff = closed.ledger.cutoff;
    let (start, end) = (
        load.window_us.0,
        load.last_send_us.max(load.window_us.0 + 1),
    );
    // The nine endpoints that are never slow: 1..10 in both runs.
    let fast_rate = j.count_between(1..ENDPOINTS, start, end) as f64 / secs(end - start);
    let lat = j.latency(1..ENDPOINTS);
    let p99_ms = ms(lat.value_at_quantile(0.99));

    let mut r = Report::new(format!(
        "slow-neighbour {} {} rate={} deliveries/s duration={}s",
        opts.backend(),
        if slow { "one-slow(2s)" } else { "none-slow" },
        opts.rate,
        duration.as_secs()
    ));
    r.metric("nine_delivered_per_s", fast_rate);
    r.line(format!(
        "endpoints 1-9: {fast_rate:.0} deliveries/s during the load; {}",
        if drained {
            "all delivered after it"
        } else {
            "NOT all delivered within the cap"
        }
    ));
    let l = r.latency("nine_e2e", &lat);
    r.line(l);
    if slow {
        r.line(format!(
            "slow endpoint 0: {slow_got} of {acked} delivered ({:.1}/s); {cutoff} left queued (cutoff)",
            slow_got as f64 / secs(j.last_arrival().saturating_sub(start).max(1))
        ));
    }
    closed.finish_report(&mut r, &cpu);
    Ok(Measured {
        fast_rate,
        p99_ms,
        report: r,
    })
}

/// Runs the baseline, then the run with one slow endpoint, and compares them.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let base = measure(opts, false).await?;
    let slow = measure(opts, true).await?;
    let ratio = slow.fast_rate / base.fast_rate.max(1e-9);
    let mut r = Report::new(format!("slow-neighbour {} comparison", opts.backend()));
    r.valid = base.report.valid && slow.report.valid;
    r.metric("ratio_pct", 100.0 * ratio);
    r.metric("p99_inflation", slow.p99_ms / base.p99_ms.max(1e-9));
    r.line(format!(
        "endpoints 1-9 delivered/s: {:.0} with one slow neighbour vs {:.0} without = {:.1}%; their e2e p99 {:.1} ms vs {:.1} ms",
        slow.fast_rate,
        base.fast_rate,
        100.0 * ratio,
        slow.p99_ms,
        base.p99_ms
    ));
    r.line(format!(
        "target >= 90%: {}",
        if ratio >= 0.9 { "MET" } else { "MISSED" }
    ));
    Ok(vec![base.report, slow.report, r])
}
