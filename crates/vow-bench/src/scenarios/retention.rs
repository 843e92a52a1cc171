//! `retention`: whether message retention keeps the tables flat under a steady load, and what
//! it costs.
//!
//! vow runs with `--vow-message-retention-minutes M` and takes `--rate` messages/s open loop to
//! one endpoint with workers on, for `--duration` seconds (default 1,800). Every minute this
//! reads the hot tables' sizes (PostgreSQL: messages, deliveries and attempts, each with its
//! indexes and its live rows as the statistics count them; SQLite: the database file and its
//! free pages) and what retention deleted so far (`/metrics`). The cleaner sweeps once a minute,
//! so from minute M + 2 on the store holds between M and M + 1 minutes of messages: the target
//! is sizes flat from then on. Reports the growth from minute M + 2 to the end, the sweeps'
//! time, deliveries and backlog per minute, the ack latency, and the ledger, in which a message
//! counts as stored when it is still in the store or retention deleted it after delivery.

use std::time::{Duration, Instant};

use anyhow::Context;

use super::soak::minute_lines;
use super::{cpu_lines, secs, Options, Rig};
use crate::api::Api;
use crate::ledger::Report;
use crate::load::Sampler;
use crate::vow_process::Database;

/// The series of `/metrics` read each minute: messages retention deleted (also read by
/// `big_store`), and its sweeps' time.
pub(super) const PURGED: &str = r#"vow_retention_purged_total{what="messages"}"#;
const SWEEP_SUM: &str = "vow_retention_sweep_seconds_sum";
const SWEEP_COUNT: &str = "vow_retention_sweep_seconds_count";

/// The PostgreSQL tables read, in the order of the query's rows.
const TABLES: [&str; 3] = ["attempts", "deliveries", "messages"];

/// One minute's reading.
struct Reading {
    /// Per table (PostgreSQL, [`TABLES`]'s order) or for the file (SQLite): bytes, and live rows
    /// (PostgreSQL) or free bytes (SQLite).
    sizes: Vec<(u64, u64)>,
    /// Messages retention deleted so far.
    purged: f64,
    /// Seconds retention's sweeps took so far, and how many there were.
    swept: (f64, f64),
}

impl Reading {
    /// Bytes in use: the tables with their indexes, or the file less its free pages.
    fn used(&self, postgres: bool) -> u64 {
        if postgres {
            self.sizes.iter().map(|(bytes, _)| bytes).sum()
        } else {
            self.sizes.first().map_or(0, |(file, free)| file - free)
        }
    }
}

/// Runs the load with a short retention and reads the store every minute.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let minutes = opts
        .vow
        .message_retention_minutes
        .context("retention needs --vow-message-retention-minutes")?;
    let duration = opts.duration_or(1800);
    let mut r = Report::new(format!(
        "retention {} endpoints=1 rate={} msg/s duration={}s message_retention_minutes={minutes}",
        opts.backend(),
        opts.rate,
        duration.as_secs(),
    ));
    let mut rig = Rig::start(opts, true, 1, &[]).await?;
    let sampler = Sampler::start(rig.target.counters.clone(), rig.receiver.clone(), 1);
    rig.begin_window();
    let (load, readings) = tokio::join!(
        rig.target
            .open_loop(opts.rate, duration, opts.max_in_flight),
        every_minute(&rig.db, &rig.target.api, duration),
    );
    let readings = readings?;
    let drained = tokio::time::timeout(
        opts.drain_cap,
        rig.receiver
            .drain(load.acked.len() as u64, Duration::from_secs(15)),
    )
    .await
    .unwrap_or(false);
    let cpu = rig.end_window();
    let samples = sampler.stop();
    let window = load.last_send_us.saturating_sub(load.window_us.0).max(1);
    r.line(format!(
        "{} POSTs at {:.0}/s, {} acked; {}",
        load.sent,
        load.sent as f64 / secs(window),
        load.acked.len(),
        if drained {
            "then drained"
        } else {
            "NOT drained"
        }
    ));
    minute_lines(&mut r, &samples, secs(window));
    size_lines(&mut r, &readings, rig.db.is_postgres(), minutes);
    let ack = r.latency("ack", &load.ack_latency);
    r.line(ack);
    cpu_lines(
        &mut r,
        &cpu,
        load.acked.len() as u64,
        "deliveries",
        rig.peak_rss(),
    );

    let purged = rig.target.api.metrics().await?.value(PURGED);
    let mut closed = rig.close(&load, true, None).await?;
    r.line(format!(
        "messages deleted by retention in all: {purged:.0}; left in the store: {}",
        closed.ledger.stored
    ));
    closed.ledger.stored += purged as u64;
    r.line(format!("vow peak RSS {:.1} MiB", closed.peak_rss));
    r.ledger(&closed.ledger);
    Ok(vec![r])
}

/// Reads the store at the start and then every minute until `duration` has passed.
async fn every_minute(
    db: &Database,
    api: &Api,
    duration: Duration,
) -> anyhow::Result<Vec<Reading>> {
    let start = Instant::now();
    let mut readings = vec![read(db, api).await?];
    for minute in 1.. {
        let at = Duration::from_secs(60 * minute);
        if at > duration {
            break;
        }
        tokio::time::sleep(at.saturating_sub(start.elapsed())).await;
        readings.push(read(db, api).await?);
    }
    Ok(readings)
}

/// One reading of the store's size and of vow's retention counters.
async fn read(db: &Database, api: &Api) -> anyhow::Result<Reading> {
    let sql = if db.is_postgres() {
        "SELECT string_agg(pg_total_relation_size(relid) || ':' || n_live_tup, ' '
                           ORDER BY relname)
         FROM pg_stat_user_tables WHERE relname IN ('attempts', 'deliveries', 'messages')"
    } else {
        "SELECT (page_count * page_size) || ':' || (freelist_count * page_size)
         FROM pragma_page_count, pragma_page_size, pragma_freelist_count"
    };
    let row = db.first_row(sql).await?.join("");
    let sizes = row
        .split(' ')
        .map(|pair| {
            let (a, b) = pair.split_once(':').context("size:count")?;
            Ok((a.parse()?, b.parse()?))
        })
        .collect::<anyhow::Result<Vec<(u64, u64)>>>()?;
    let metrics = api.metrics().await?;
    Ok(Reading {
        sizes,
        purged: metrics.value(PURGED),
        swept: (metrics.value(SWEEP_SUM), metrics.value(SWEEP_COUNT)),
    })
}

/// Sizes, deletions and sweep time minute by minute, and the growth once retention is steady.
fn size_lines(r: &mut Report, readings: &[Reading], postgres: bool, retention: u32) {
    let mib = |bytes: u64| format!("{:.0}", bytes as f64 / 1_048_576.0);
    let series = |f: &dyn Fn(&Reading) -> String| -> String {
        readings.iter().map(f).collect::<Vec<_>>().join(" ")
    };
    r.line("each minute from 0:");
    if postgres {
        for (i, table) in TABLES.iter().enumerate() {
            r.line(format!(
                "  {table} MiB with indexes: {}",
                series(&|x| mib(x.sizes[i].0))
            ));
            r.line(format!(
                "  {table} live rows: {}",
                series(&|x| x.sizes[i].1.to_string())
            ));
        }
    } else {
        r.line(format!(
            "  database file MiB: {}",
            series(&|x| mib(x.sizes[0].0))
        ));
        r.line(format!(
            "  of which free MiB: {}",
            series(&|x| mib(x.sizes[0].1))
        ));
    }
    let deltas = |f: &dyn Fn(&Reading) -> f64| -> String {
        readings
            .windows(2)
            .map(|w| format!("{:.0}", f(&w[1]) - f(&w[0])))
            .collect::<Vec<_>>()
            .join(" ")
    };
    r.line(format!(
        "  messages deleted by retention (from minute 1): {}",
        deltas(&|x| x.purged)
    ));
    r.line(format!(
        "  ms retention's sweeps took (from minute 1): {}",
        deltas(&|x| x.swept.0 * 1000.0)
    ));
    if let Some(last) = readings.last() {
        let (seconds, sweeps) = last.swept;
        r.line(format!(
            "sweeps: {sweeps:.0}, {seconds:.1} s in all, {:.0} ms each on average",
            seconds * 1000.0 / sweeps.max(1.0)
        ));
    }
    let steady = retention as usize + 2;
    match (readings.get(steady), readings.last()) {
        (Some(first), Some(last)) if readings.len() > steady + 1 => {
            let (from, to) = (first.used(postgres), last.used(postgres));
            let growth = (to as f64 / from.max(1) as f64 - 1.0) * 100.0;
            r.metric("growth_after_steady_pct", growth);
            r.line(format!(
                "in use at minute {steady}: {} MiB; at minute {}: {} MiB; growth {growth:+.1} %",
                mib(from),
                readings.len() - 1,
                mib(to)
            ));
        }
        _ => r.line(format!(
            "too short to tell: retention is steady from minute {steady} on"
        )),
    }
}
