//! `idempotency`: what `Idempotency-Key` costs message creation, measured in one run.
//!
//! The `ingest` load (C closed-loop clients posting 1 KiB messages to an application with one
//! endpoint, delivery workers off) runs four phases of D seconds each (default 10) against one
//! vow: without the header, with it (a fresh key per message: `bench-<seq>`), with it, without
//! it (ABBA, so drift over the run falls on both sides alike). Reports acks/s and ack latency of
//! each mode and the keyed/plain throughput ratio. Target: the header costs ≤ 10 % of
//! throughput (ratio ≥ 0.90), since its record commits in the message's own transaction.

use std::collections::BTreeMap;

use super::{cpu_lines, Options, Rig};
use crate::ledger::Report;
use crate::load::{LoadResult, Target};
use crate::machine::{self, CpuUse};

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
    let (mut plain_cpu, mut keyed_cpu) = (ModeCpu::default(), ModeCpu::default());
    rig.begin_window();
    for with_key in [false, true, true, false] {
        let target = if with_key { &keyed_target } else { &rig.target };
        let before = machine::sample(rig.pid());
        let pg_before = rig
            .db
            .is_postgres()
            .then(|| machine::sample_named("postgres"));
        let load = target.closed_loop(opts.concurrency, phase, None).await;
        let used = CpuUse::between(&before, &machine::sample(rig.pid()), load.seconds());
        let pg_used = pg_before
            .map(|p0| CpuUse::between(&p0, &machine::sample_named("postgres"), load.seconds()));
        let (into, secs, cpu) = if with_key {
            (&mut keyed, &mut keyed_secs, &mut keyed_cpu)
        } else {
            (&mut plain, &mut plain_secs, &mut plain_cpu)
        };
        *secs += load.seconds();
        cpu.add(&used, pg_used.as_ref());
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
    for (mode, cpu, load) in [("plain", &plain_cpu, &plain), ("keyed", &keyed_cpu, &keyed)] {
        let line = cpu.report(&mut r, mode, load.acked.len());
        r.line(line);
    }
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

/// vow's CPU seconds in one mode's phases: the process and each thread group; and, on
/// PostgreSQL, the server's (every `postgres` process on the machine, so run it quiet).
#[derive(Default)]
struct ModeCpu {
    seconds: f64,
    threads: BTreeMap<String, f64>,
    postgres: Option<f64>,
}

impl ModeCpu {
    fn add(&mut self, used: &CpuUse, postgres: Option<&CpuUse>) {
        self.seconds += used.seconds;
        if let Some(pg) = postgres {
            *self.postgres.get_or_insert(0.0) += pg.seconds;
        }
        for (name, s) in &used.threads {
            *self.threads.entry(name.clone()).or_default() += s;
        }
    }

    /// Records `<mode>_cpu_us_per_message` (and per thread group) and says it in a line.
    fn report(&self, r: &mut Report, mode: &str, messages: usize) -> String {
        let per = |s: f64| s * 1e6 / messages.max(1) as f64;
        r.metric(&format!("{mode}_cpu_us_per_message"), per(self.seconds));
        let mut groups: Vec<_> = self.threads.iter().collect();
        groups.sort_by(|a, b| b.1.total_cmp(a.1));
        let mut parts = Vec::new();
        for (name, s) in groups.into_iter().take(3) {
            let key = name.trim_end_matches('-').replace('-', "_");
            r.metric(&format!("{mode}_{key}_us_per_message"), per(*s));
            parts.push(format!("{name} {:.1}", per(*s)));
        }
        let server = self.postgres.map_or(String::new(), |pg| {
            r.metric(&format!("{mode}_pg_cpu_us_per_message"), per(pg));
            format!("; PostgreSQL server {:.1} µs", per(pg))
        });
        format!(
            "{mode}: vow CPU {:.1} µs per message ({}){server}",
            per(self.seconds),
            parts.join(", ")
        )
    }
}
