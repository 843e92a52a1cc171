//! `backlog-drain`: how fast vow empties a queue it finds at start.
//!
//! Queues `--messages` messages (default 100,000) to one endpoint with delivery workers off
//! (closed loop, `--concurrency` clients), stops vow with SIGTERM, starts it again on the same
//! database with workers on, and times until the receiver has every message. Reports the drain
//! rate (first to last delivery) and the time from the restart to the last delivery.

use std::time::Duration;

use super::{secs, Options, Rig};
use crate::ledger::Report;

/// Queues, restarts, drains.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let mut rig = Rig::start(opts, false, 1, &[]).await?;
    let load = rig
        .target
        .closed_loop(
            opts.concurrency,
            Duration::from_secs(3600),
            Some(opts.messages),
        )
        .await;
    let ingest_rate = load.acked.len() as f64 / load.seconds();
    let expected = load.acked.len() as u64;

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
    let closed = rig.close(&load, true, None).await?;
    let j = &closed.joined;
    let (first, last) = (j.first_arrival(), j.last_arrival());
    let drain_rate = j.delivered as f64 / secs(last.saturating_sub(first).max(1));
    let total_s = secs(last.saturating_sub(restart_us));

    let mut r = Report::new(format!(
        "backlog-drain {} messages={}",
        opts.backend(),
        opts.messages
    ));
    r.metric("queue_acks_per_s", ingest_rate);
    r.metric("drain_per_s", drain_rate);
    r.metric("restart_to_drained_s", total_s);
    r.line(format!(
        "queued {expected} messages at {ingest_rate:.0} acks/s with workers off ({} clients)",
        opts.concurrency
    ));
    r.line(format!(
        "restart -> healthy {:.2} s -> first delivery {:.2} s -> last delivery {total_s:.2} s; {}",
        secs(healthy_us - restart_us),
        secs(first.saturating_sub(restart_us)),
        if drained { "drained" } else { "NOT drained" }
    ));
    r.line(format!(
        "drain rate (first to last delivery): {drain_rate:.0} deliveries/s"
    ));
    closed.finish_report(&mut r, &cpu);
    Ok(vec![r])
}
