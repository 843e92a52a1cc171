//! `backlog-drain`: how fast vow empties a queue it finds at start.
//!
//! Queues `--messages` messages (default 100,000) to one endpoint with delivery workers off
//! (closed loop, `--concurrency` clients), stops vow with SIGTERM, starts it again on the same
//! database with workers on, and times until the receiver has every message. Reports the drain
//! rate (first to last delivery) and the time from the restart to the last delivery.
//! [`queue_and_drain`] is that measurement, which `soak` repeats on a used store.

use std::time::Duration;

use super::{secs, Cpu, Options, Rig};
use crate::ledger::Report;
use crate::load::LoadResult;

/// One backlog queued and drained.
pub struct Drain {
    /// The queueing phase (its acknowledged messages are the backlog).
    pub load: LoadResult,
    /// Acks/s while queueing.
    pub queue_rate: f64,
    /// Deliveries/s from the backlog's first delivery to its last.
    pub drain_rate: f64,
    /// Seconds from the restart to vow answering its health check.
    pub restart_s: f64,
    /// Seconds from the restart to the first and to the last delivery.
    pub first_s: f64,
    /// See `first_s`.
    pub last_s: f64,
    /// Whether every queued message arrived.
    pub drained: bool,
    /// CPU used from the restart to the last delivery.
    pub cpu: Cpu,
}

impl Drain {
    /// The report lines of this drain, each prefixed with `label`.
    pub fn lines(&self, r: &mut Report, label: &str, concurrency: usize) {
        r.line(format!(
            "{label}queued {} messages at {:.0} acks/s with workers off ({concurrency} clients)",
            self.load.acked.len(),
            self.queue_rate
        ));
        r.line(format!(
            "{label}restart -> healthy {:.2} s -> first delivery {:.2} s -> last delivery {:.2} s; {}",
            self.restart_s,
            self.first_s,
            self.last_s,
            if self.drained { "drained" } else { "NOT drained" }
        ));
        r.line(format!(
            "{label}drain rate (first to last delivery): {:.0} deliveries/s",
            self.drain_rate
        ));
    }
}

/// Queues, restarts, drains.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let mut rig = Rig::start(opts, false, 1, &[]).await?;
    let drain = queue_and_drain(&mut rig, opts).await?;
    let closed = rig.close(&drain.load, true, None).await?;

    let mut r = Report::new(format!(
        "backlog-drain {} messages={}",
        opts.backend(),
        opts.messages
    ));
    r.metric("queue_acks_per_s", drain.queue_rate);
    r.metric("drain_per_s", drain.drain_rate);
    r.metric("restart_to_drained_s", drain.last_s);
    drain.lines(&mut r, "", opts.concurrency);
    closed.finish_report(&mut r, &drain.cpu);
    Ok(vec![r])
}

/// With `rig`'s vow running without workers: queues `--messages` messages to endpoint 0,
/// restarts vow with workers on, and waits (up to 30 min, or 30 s without a delivery) until
/// all of them arrived, measuring CPU from the restart. Leaves vow running with workers on.
pub async fn queue_and_drain(rig: &mut Rig, opts: &Options) -> anyhow::Result<Drain> {
    let before = rig.receiver.delivered();
    let load = rig
        .target
        .closed_loop(
            opts.concurrency,
            Duration::from_secs(3600),
            Some(opts.messages),
        )
        .await;
    let queue_rate = load.acked.len() as f64 / load.seconds();
    let expected = before + load.acked.len() as u64;

    let restart_us = rig.target.clock.now_us();
    rig.restart(true).await?;
    let healthy_us = rig.target.clock.now_us();
    rig.begin_window();
    let drained = tokio::time::timeout(
        Duration::from_secs(1800),
        rig.receiver.drain(expected, Duration::from_secs(30)),
    )
    .await
    .unwrap_or(false);
    let cpu = rig.end_window();
    let arrivals: Vec<u64> = load
        .acked
        .iter()
        .filter_map(|a| rig.receiver.first_seen(0, &a.id))
        .collect();
    let first = arrivals.iter().copied().min().unwrap_or(restart_us);
    let last = arrivals.iter().copied().max().unwrap_or(restart_us);
    Ok(Drain {
        queue_rate,
        drain_rate: arrivals.len() as f64 / secs(last.saturating_sub(first).max(1)),
        restart_s: secs(healthy_us - restart_us),
        first_s: secs(first.saturating_sub(restart_us)),
        last_s: secs(last.saturating_sub(restart_us)),
        drained,
        cpu,
        load,
    })
}
