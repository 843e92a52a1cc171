//! `ingest`: how fast vow durably accepts messages, with delivery workers off.
//!
//! C closed-loop clients (default 64) post 1 KiB messages back to back for D seconds (default
//! 20) to an application with one endpoint, so each message also writes its delivery row.
//! Reports acks/s, ack latency, and the ratio to single-row commits/s measured just before on
//! the same backend. Targets: SQLite ≥ 20,000 msg/s with p99 ≤ 50 ms; PostgreSQL ≥ 8,000 msg/s.

use super::{commit_baseline, cpu_lines, Options, Rig};
use crate::ledger::{ms, Report};

/// Runs the baseline, then the ingest load.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let baseline = commit_baseline::for_backend(opts).await?;
    let duration = opts.duration_or(20);
    let mut rig = Rig::start(opts, false, 1, &[]).await?;
    rig.begin_window();
    let load = rig
        .target
        .closed_loop(opts.concurrency, duration, None)
        .await;
    let cpu = rig.end_window();
    let acked = load.acked.len() as u64;
    let rate = acked as f64 / load.seconds();
    let closed = rig.close(&load, false, None).await?;

    let mut r = Report::new(format!(
        "ingest {}{} concurrency={} duration={}s",
        opts.backend(),
        opts.load_label(),
        opts.concurrency,
        duration.as_secs()
    ));
    r.metric("acks_per_s", rate);
    r.metric("baseline_commits_per_s", baseline);
    r.metric("ratio_to_baseline", rate / baseline);
    r.line(format!(
        "acks/s {rate:.0}; single-row commit baseline {baseline:.0}/s -> ratio {:.2}x",
        rate / baseline
    ));
    let lat = r.latency("ack", &load.ack_latency);
    r.line(lat);
    let p99 = ms(load.ack_latency.value_at_quantile(0.99));
    let (target, met) = if opts.pg.is_some() {
        ("target >= 8,000 msg/s", rate >= 8000.0)
    } else {
        (
            "target >= 20,000 msg/s with p99 <= 50 ms",
            rate >= 20000.0 && p99 <= 50.0,
        )
    };
    r.line(format!("{target}: {}", if met { "MET" } else { "MISSED" }));
    if let Some(s) = load.first_rejection {
        r.line(format!("first non-2xx status: {s}"));
    }
    cpu_lines(&mut r, &cpu, acked, "messages", closed.peak_rss);
    r.ledger(&closed.ledger);
    Ok(vec![r])
}
