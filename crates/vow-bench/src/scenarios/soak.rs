//! `soak`: whether the queue decays with use.
//!
//! On one fresh store: the drain rate of a `--messages` backlog (queued with workers off, as
//! `backlog-drain` does), then `--duration` seconds (default 1,800) of open-loop load at
//! `--rate` messages/s to the same endpoint with workers on, then the drain rate of a second
//! backlog of the same size. Reports both drain rates and their ratio (target: the used
//! store's within 10 % of the fresh one's), deliveries and backlog minute by minute over the
//! soak, and the size of the hot tables after each phase.

use std::time::Duration;

use super::backlog_drain::{queue_and_drain, Drain};
use super::{cpu_lines, secs, Options, Rig};
use crate::ledger::Report;
use crate::load::{LoadResult, Sample, Sampler};
use crate::vow_process::Database;

/// Drains a backlog, soaks, drains another.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let soak = opts.duration_or(1800);
    let mut r = Report::new(format!(
        "soak {} endpoints=1 rate={} msg/s duration={}s messages={}",
        opts.backend(),
        opts.rate,
        soak.as_secs(),
        opts.messages
    ));
    let mut rig = Rig::start(opts, false, 1, &[]).await?;
    let mut all = LoadResult::new();

    let fresh = queue_and_drain(&mut rig, opts).await?;
    drain_lines(&mut r, "fresh store: ", &fresh, opts);
    r.line(format!("after it: {}", table_sizes(&rig.db).await?));
    all.merge(fresh.load);

    let sampler = Sampler::start(rig.target.counters.clone(), rig.receiver.clone(), 1);
    rig.begin_window();
    let load = rig
        .target
        .open_loop(opts.rate, soak, opts.max_in_flight)
        .await;
    let expected = (all.acked.len() + load.acked.len()) as u64;
    let drained = tokio::time::timeout(
        opts.drain_cap,
        rig.receiver.drain(expected, Duration::from_secs(15)),
    )
    .await
    .unwrap_or(false);
    let cpu = rig.end_window();
    let samples = sampler.stop();
    let soaked = load.acked.len() as u64;
    let window = load.last_send_us.saturating_sub(load.window_us.0).max(1);
    let left = samples
        .iter()
        .take_while(|s| s.t <= secs(window) + 0.5)
        .last()
        .map_or(0, |s| s.backlog);
    r.line(format!(
        "soak: {} POSTs at {:.0}/s, {soaked} acked; backlog {left} when the load stopped, {}",
        load.sent,
        load.sent as f64 / secs(window),
        if drained {
            "then drained"
        } else {
            "NOT drained"
        }
    ));
    minute_lines(&mut r, &samples, secs(window));
    let ack = r.latency("soak_ack", &load.ack_latency);
    r.line(ack);
    cpu_lines(&mut r, &cpu, soaked, "soak_deliveries", rig.peak_rss());
    r.line(format!("after it: {}", table_sizes(&rig.db).await?));
    all.merge(load);

    rig.restart(false).await?;
    let used = queue_and_drain(&mut rig, opts).await?;
    drain_lines(&mut r, "used store: ", &used, opts);
    r.line(format!("after it: {}", table_sizes(&rig.db).await?));
    let ratio = used.drain_rate / fresh.drain_rate.max(1e-9);
    r.metric("fresh_drain_per_s", fresh.drain_rate);
    r.metric("used_drain_per_s", used.drain_rate);
    r.metric("used_over_fresh", ratio);
    r.line(format!(
        "used / fresh drain rate: {ratio:.3} -> target within 10 %: {}",
        if ratio >= 0.9 { "MET" } else { "MISSED" }
    ));
    all.merge(used.load);

    let closed = rig.close(&all, true, None).await?;
    r.line(format!("vow peak RSS {:.1} MiB", closed.peak_rss));
    r.ledger(&closed.ledger);
    Ok(vec![r])
}

/// A drain's lines, and its CPU per 1,000 deliveries.
fn drain_lines(r: &mut Report, label: &str, d: &Drain, opts: &Options) {
    d.lines(r, label, opts.concurrency);
    let per_1000 = |s: f64| s * 1000.0 / d.load.acked.len().max(1) as f64;
    let pg = d.cpu.postgres.as_ref().map_or(String::new(), |pg| {
        format!(", postgres server {:.3}", per_1000(pg.seconds))
    });
    r.line(format!(
        "{label}CPU-s per 1,000 deliveries while draining: vow {:.3}{pg}",
        per_1000(d.cpu.vow.seconds)
    ));
}

/// Deliveries per second and the backlog, minute by minute over the load window.
pub(super) fn minute_lines(r: &mut Report, samples: &[Sample], window_s: f64) {
    let minutes: Vec<Sample> = samples
        .iter()
        .filter(|s| s.t <= window_s + 0.5)
        .step_by(60)
        .copied()
        .collect();
    let rates: Vec<String> = minutes
        .windows(2)
        .map(|w| {
            format!(
                "{:.0}",
                (w[1].delivered - w[0].delivered) as f64 / (w[1].t - w[0].t).max(1e-9)
            )
        })
        .collect();
    let backlogs: Vec<String> = minutes.iter().map(|s| s.backlog.to_string()).collect();
    r.line(format!("delivered/s per minute: {}", rates.join(" ")));
    r.line(format!("backlog each minute: {}", backlogs.join(" ")));
}

/// The hot tables' sizes: on PostgreSQL each table's heap and indexes with its dead tuples,
/// on SQLite the database file.
async fn table_sizes(db: &Database) -> anyhow::Result<String> {
    let sql = if db.is_postgres() {
        "SELECT string_agg(format('%s %s + indexes %s, %s dead tuples', relname,
                                  pg_size_pretty(pg_table_size(relid)),
                                  pg_size_pretty(pg_indexes_size(relid)), n_dead_tup),
                           '; ' ORDER BY relname)
         FROM pg_stat_user_tables WHERE relname IN ('messages', 'deliveries', 'attempts')"
    } else {
        "SELECT 'database file ' || (page_count * page_size / 1048576) || ' MiB, '
                || (freelist_count * page_size / 1048576) || ' MiB free'
         FROM pragma_page_count, pragma_page_size, pragma_freelist_count"
    };
    Ok(db.first_row(sql).await?.join(""))
}
