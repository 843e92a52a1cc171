//! `e2e`: the whole pipeline at a fixed offered rate, with delivery workers on.
//!
//! An open-loop generator offers `--rate` deliveries per second (default 10,000) for D seconds
//! (default 60): with N endpoints it posts rate/N messages per second, each fanned out to all N.
//! Reports delivered/s while the load ran (whole window and its second half), the backlog
//! (acked × N − delivered, sampled every second) at the start, middle and end of the window,
//! end-to-end latency from just before the POST to the receiver's first byte, the acks per 5 s
//! with their p99 (and the p99 without the first 5 s, to tell a start's stall from a tail), the
//! drain after the load stops, and the host's speed over the window (a fixed piece of work timed
//! every second, per 5 s beside the deliveries), so a fall in deliveries can be told from a
//! slower host. With `--nodes N` (PostgreSQL) N vow processes share the database: each
//! delivers, message creates go to each in turn, and the CPU and `/metrics` figures are theirs
//! together. Target: ≥ 10,000 deliveries/s sustained with a flat backlog.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::{secs, Options, Rig};
use crate::api::Metrics;
use crate::ledger::{histogram, Report};
use crate::load::{Acked, Sample, Sampler};
use crate::probe::{HostSpeed, Probe};

/// Runs one e2e measurement per `--endpoints` value.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let mut out = Vec::new();
    for &n in &opts.endpoints {
        out.push(run_one(opts, n).await?);
    }
    Ok(out)
}

async fn run_one(opts: &Options, n: usize) -> anyhow::Result<Report> {
    let duration = opts.duration_or(60);
    let msg_rate = opts.rate / n as f64;
    let mut rig = Rig::start(opts, true, n, &[]).await?;
    let sampler = Sampler::start(rig.target.counters.clone(), rig.receiver.clone(), n as u64);
    let speed = Probe::speed(rig.target.clock, Duration::from_secs(1))?;
    rig.begin_window();
    let load = rig
        .target
        .open_loop(msg_rate, duration, opts.max_in_flight)
        .await;
    let expected = load.acked.len() as u64 * n as u64;
    let cap = opts.drain_cap;
    let drained = tokio::time::timeout(cap, rig.receiver.drain(expected, Duration::from_secs(15)))
        .await
        .unwrap_or(false);
    let cpu = rig.end_window();
    let samples = sampler.stop();
    let speed = speed.stop();
    let inside = rig.target.api.metrics().await?;
    let closed = rig.close(&load, true, None).await?;
    let j = &closed.joined;

    let nodes = match opts.nodes {
        1 => String::new(),
        more => format!(" nodes={more}"),
    };
    let mut r = Report::new(format!(
        "e2e {}{}{nodes} endpoints={n} rate={} deliveries/s duration={}s",
        opts.backend(),
        opts.load_label(),
        opts.rate,
        duration.as_secs()
    ));
    let (start, end) = (
        load.window_us.0,
        load.last_send_us.max(load.window_us.0 + 1),
    );
    let mid = start + (end - start) / 2;
    let offered = load.sent as f64 * n as f64 / secs(end - start);
    let during = j.count_between(0..n, start, end) as f64 / secs(end - start);
    let second_half = j.count_between(0..n, mid, end) as f64 / secs(end - mid);
    r.metric("offered_deliveries_per_s", offered);
    r.metric("delivered_per_s", during);
    r.metric("delivered_per_s_second_half", second_half);
    r.metric("unsent_messages", load.unsent as f64);
    r.line(format!(
        "offered {offered:.0} deliveries/s ({:.0} msg/s x {n}; {} scheduled messages unsent: {} POSTs were outstanding); delivered/s during load {during:.0} (second half {second_half:.0})",
        offered / n as f64,
        load.unsent,
        opts.max_in_flight
    ));
    let window = secs(end - start);
    let in_window: Vec<Sample> = samples
        .iter()
        .copied()
        .filter(|s| s.t <= window + 0.5)
        .collect();
    let flat = backlog_lines(&mut r, &in_window, opts.rate);
    if let Some(host) = HostSpeed::of(&speed, start, end) {
        r.metric("host_speed_median_us", host.median_us);
        r.metric("host_speed_spread", host.spread());
        for line in host.lines() {
            r.line(line);
        }
    }
    let last = j.last_arrival();
    let drain_s = secs(last.saturating_sub(end));
    r.metric("drain_after_load_s", drain_s);
    r.line(format!(
        "after the load: {} in {drain_s:.1} s (last delivery {:.1} s after the first POST)",
        if drained { "drained" } else { "NOT drained" },
        secs(last.saturating_sub(start))
    ));
    let e2e = r.latency("e2e", &j.latency(0..n));
    r.line(e2e);
    let ack = r.latency("ack", &load.ack_latency);
    r.line(ack);
    for line in acks_every_5s(&load.acked, start) {
        r.line(line);
    }
    r.line(inside_vow(&inside));
    if load.shed > 0 {
        r.metric("shed", load.shed as f64);
        r.line(format!(
            "shed (503 with Retry-After): {} of {} POSTs ({:.1} %)",
            load.shed,
            load.sent,
            100.0 * load.shed as f64 / load.sent.max(1) as f64
        ));
        let refusal = r.latency("shed", &load.shed_latency);
        r.line(refusal);
    }
    let met = second_half >= 10_000.0 && flat;
    r.line(format!(
        "target >= 10,000 deliveries/s sustained with a flat backlog: {}",
        if met { "MET" } else { "MISSED" }
    ));
    closed.finish_report(&mut r, &cpu);
    Ok(r)
}

/// Prints the backlog at start, middle and end of the load window (and every 5 s); returns
/// whether it was flat: it grew by less than half a second of offered deliveries over the
/// window's second half.
pub fn backlog_lines(r: &mut Report, samples: &[Sample], rate: f64) -> bool {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        r.line("backlog: no samples");
        return false;
    };
    let mid = samples[samples.len() / 2];
    let growth = last.backlog - mid.backlog;
    let flat = (growth as f64) < 0.5 * rate;
    r.metric("backlog_start", first.backlog as f64);
    r.metric("backlog_middle", mid.backlog as f64);
    r.metric("backlog_end", last.backlog as f64);
    r.line(format!(
        "backlog (acked x endpoints - delivered): start {} (t={:.0}s), middle {} (t={:.0}s), end {} (t={:.0}s) -> {}",
        first.backlog,
        first.t,
        mid.backlog,
        mid.t,
        last.backlog,
        last.t,
        if flat { "flat" } else { "GROWING" }
    ));
    let backlogs: Vec<String> = samples
        .iter()
        .step_by(5)
        .map(|s| s.backlog.to_string())
        .collect();
    r.line(format!("backlog every 5 s: {}", backlogs.join(" ")));
    let every5: Vec<Sample> = samples.iter().step_by(5).copied().collect();
    let rates: Vec<String> = every5
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0], w[1]);
            format!(
                "{:.0}",
                (b.delivered - a.delivered) as f64 / (b.t - a.t).max(1e-9)
            )
        })
        .collect();
    r.line(format!("delivered/s per 5 s: {}", rates.join(" ")));
    flat
}

/// The acks by the 5 s they were sent in, from `start` (µs): how many a second and their p99,
/// and the p99 of all but the first 5 s, so a tail can be told from a stall at one time (a cold
/// start taking the full offered rate, say).
fn acks_every_5s(acked: &[Acked], start: u64) -> [String; 3] {
    let mut windows: Vec<Histogram<u64>> = Vec::new();
    let mut after_the_first = histogram();
    for a in acked {
        let i = usize::try_from(a.sent_us.saturating_sub(start) / 5_000_000).unwrap_or(0);
        if windows.len() <= i {
            windows.resize_with(i + 1, histogram);
        }
        let _ = windows[i].record(a.took_us);
        if i > 0 {
            let _ = after_the_first.record(a.took_us);
        }
    }
    let each =
        |f: &dyn Fn(&Histogram<u64>) -> String| windows.iter().map(f).collect::<Vec<_>>().join(" ");
    [
        format!(
            "acks/s per 5 s: {}",
            each(&|h| format!("{:.0}", h.len() as f64 / 5.0))
        ),
        format!(
            "ack p99 per 5 s (ms): {}",
            each(&|h| format!("{:.1}", h.value_at_quantile(0.99) as f64 / 1e3))
        ),
        format!(
            "ack p99 without the first 5 s: {:.2} ms (n={})",
            after_the_first.value_at_quantile(0.99) as f64 / 1e3,
            after_the_first.len()
        ),
    ]
}

/// The acks as vow timed them (`vow_http_request_seconds`, from the matched route to the
/// answer; the time before vow read the request's head is the generator's alone): the share
/// of accepted creates answered within 50 and 100 ms, beside the generator's own figures.
fn inside_vow(metrics: &Metrics) -> String {
    const CREATE: [&str; 3] = [
        "method=\"POST\"",
        "route=\"/api/v1/app/{app_id}/msg\"",
        "status=\"202\"",
    ];
    let within = |le| metrics.share_within("vow_http_request_seconds", &CREATE, le);
    match (within("0.05"), within("0.1")) {
        (Some(fifty), Some(hundred)) => format!(
            "ack inside vow: {:.2} % within 50 ms, {:.2} % within 100 ms",
            100.0 * fifty,
            100.0 * hundred
        ),
        _ => "ack inside vow: no creates timed".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acked(sent_s: f64, took_ms: u64) -> Acked {
        Acked {
            id: "m".into(),
            sent_us: 1_000_000 + (sent_s * 1e6) as u64,
            took_us: took_ms * 1_000,
        }
    }

    /// Acks fall in the 5 s they were sent in; the last line leaves the first 5 s out.
    #[test]
    fn acks_are_told_by_the_five_seconds_they_were_sent_in() {
        let mut all: Vec<Acked> = (0..100).map(|i| acked(i as f64 * 0.04, 200)).collect();
        all.extend((0..50).map(|i| acked(5.0 + i as f64 * 0.01, 10)));
        all.extend((0..10).map(|i| acked(10.5 + i as f64 * 0.01, 20)));
        let [rates, p99s, rest] = acks_every_5s(&all, 1_000_000);
        assert_eq!(rates, "acks/s per 5 s: 20 10 2");
        // The histograms keep three significant digits: 200 ms reads as 200.1.
        assert_eq!(p99s, "ack p99 per 5 s (ms): 200.1 10.0 20.0");
        assert_eq!(rest, "ack p99 without the first 5 s: 20.02 ms (n=60)");
    }
}
