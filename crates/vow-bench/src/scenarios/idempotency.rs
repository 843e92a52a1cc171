//! `idempotency`: what `Idempotency-Key` costs message creation, measured in one run.
//!
//! The `ingest` load (C closed-loop clients posting 1 KiB messages to an application with one
//! endpoint, delivery workers off) runs four phases of D seconds each (default 10) against one
//! vow: without the header, with it (a fresh key per message: `bench-<seq>`), with it, without
//! it (ABBA, so drift over the run falls on both sides alike). Reports acks/s and ack latency of
//! each mode and the keyed/plain throughput ratio. Target: the header costs ≤ 10 % of
//! throughput (ratio ≥ 0.90), since its record commits in the message's own transaction.

use super::{cpu_lines, Options, Rig};
use crate::ledger::Report;
use crate::load::{LoadResult, Target};

/// Runs the four phases and reports both modes.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let phase = opts.duration_or(10);
    let mut rig = Rig::start(opts, false, 1, &[]).await?;
    let keyed_target = Target {
        keyed: true,
        ..rig.target.clone()
    };
    let (mut plain, mut keyed) = (LoadResult::new(), LoadResult::new());
    let (mut plain_secs, mut keyed_secs) = (0.0, 0.0);
    rig.begin_window();
    for with_key in [false, true, true, false] {
        let target = if with_key { &keyed_target } else { &rig.target };
        let load = target.closed_loop(opts.concurrency, phase, None).await;
        let (into, secs) = if with_key {
            (&mut keyed, &mut keyed_secs)
        } else {
            (&mut plain, &mut plain_secs)
        };
        *secs += load.seconds();
        into.merge(load);
    }
    let cpu = rig.end_window();
    let (plain_rate, keyed_rate) = (
        plain.acked.len() as f64 / plain_secs,
        keyed.acked.len() as f64 / keyed_secs,
    );
    let ratio = keyed_rate / plain_rate;

    let mut r = Report::new(format!(
        "idempotency {} concurrency={} phases=4x{}s",
        opts.backend(),
        opts.concurrency,
        phase.as_secs()
    ));
    r.metric("plain_acks_per_s", plain_rate);
    r.metric("keyed_acks_per_s", keyed_rate);
    r.metric("keyed_to_plain_ratio", ratio);
    r.line(format!(
        "acks/s without the header {plain_rate:.0}, with it {keyed_rate:.0} -> ratio {ratio:.3}"
    ));
    let lat = r.latency("plain_ack", &plain.ack_latency);
    r.line(lat);
    let lat = r.latency("keyed_ack", &keyed.ack_latency);
    r.line(lat);
    r.line(format!(
        "target: the header costs <= 10 % of throughput (ratio >= 0.90): {}",
        if ratio >= 0.90 { "MET" } else { "MISSED" }
    ));
    for (mode, load) in [("plain", &plain), ("keyed", &keyed)] {
        if let Some(s) = load.first_rejection {
            r.line(format!("{mode}: first non-2xx status: {s}"));
        }
    }
    let acked = (plain.acked.len() + keyed.acked.len()) as u64;
    let mut all = plain;
    all.merge(keyed);
    let closed = rig.close(&all, false, None).await?;
    cpu_lines(&mut r, &cpu, acked, "messages", closed.peak_rss);
    r.ledger(&closed.ledger);
    Ok(vec![r])
}
