//! `big-store`: does ingest slow down when the store holds millions of messages and retention
//! is deleting old ones?
//!
//! One store is filled by SQL ([`crate::fill`]) with `--stored` delivered messages (default
//! 10,000,000) of the run's application, made evenly over vow's message retention (90 days, or
//! `--vow-message-retention-minutes`) and, before it, enough for `--expired` more (default
//! 1,000,000): those are past retention, so vow's cleaner deletes them, in batches, all
//! through the measurements. Then three rounds, each measuring an empty store and the big one
//! in turn, the same way: vow started anew with workers off (as in `ingest`), 65 s left for
//! the cleaner's first sweep (a minute after start), then `--concurrency` closed-loop clients
//! (default 64) posting 1 KiB messages for `--duration` seconds (default 30). Reports each
//! round's acks/s and ack latency on both, what retention deleted during the big store's
//! windows, the medians, and the ratio of the big store's median to the empty one's (target
//! ≥ 0.8). The big store's ledger counts its new messages by id, above each window's start.

use std::time::Duration;

use anyhow::Context;
use chrono::{TimeDelta, Utc};
use vow_core::MessageId;

use super::retention::PURGED;
use super::{cpu_lines, Cpu, Options, Rig};
use crate::fill::{fill, History};
use crate::ledger::{ms, spread, Ledger, Report};
use crate::load::LoadResult;

/// Rounds of one empty-store and one big-store measurement.
const ROUNDS: usize = 3;

/// How long vow runs before a measurement: its cleaner first sweeps a minute after start.
const FIRST_SWEEP: Duration = Duration::from_secs(65);

/// vow's default message retention, minutes.
const DEFAULT_RETENTION_MINUTES: u32 = 90 * 24 * 60;

/// One measurement.
struct Window {
    load: LoadResult,
    cpu: Cpu,
    /// Messages retention deleted during it.
    purged: f64,
    /// vow's peak RSS (MiB) by its end.
    rss: f64,
}

impl Window {
    fn rate(&self) -> f64 {
        self.load.acked.len() as f64 / self.load.seconds()
    }

    fn p99(&self) -> f64 {
        ms(self.load.ack_latency.value_at_quantile(0.99))
    }
}

/// Fills the big store, then measures both stores in interleaved rounds.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let duration = opts.duration_or(30);
    let retention = opts
        .vow
        .message_retention_minutes
        .unwrap_or(DEFAULT_RETENTION_MINUTES);
    anyhow::ensure!(
        retention > 1,
        "big-store fills the store over the message retention: give it more than 1 minute"
    );
    let title = |what: &str| {
        format!(
            "big-store {} {what} concurrency={} duration={}s",
            opts.backend(),
            opts.concurrency,
            duration.as_secs()
        )
    };
    let mut big = Rig::start(opts, false, 1, &[]).await?;
    big.stop_vow().await?;
    let endpoint = big
        .db
        .first_row("SELECT id FROM endpoints")
        .await?
        .pop()
        .context("the rig's endpoint")?;
    let kept = TimeDelta::minutes(retention.into());
    let now = Utc::now();
    let to = now - TimeDelta::minutes(1);
    let total = opts.stored + opts.expired;
    let per_message = (kept - TimeDelta::minutes(1)) / i32::try_from(opts.stored.max(1))?;
    let history = History {
        app: big.target.app.clone(),
        endpoint,
        messages: total,
        from: to - per_message * i32::try_from(total)?,
        to,
    };
    fill(&big.db, &history).await?;

    let mut reports = Vec::new();
    let (mut empties, mut bigs) = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let mut empty = Rig::start(opts, false, 1, &[]).await?;
        let window = measure(&mut empty, opts.concurrency, duration).await?;
        let mut r = Report::new(title(&format!("empty round={round}")));
        window_lines(&mut r, &window);
        let closed = empty.close(&window.load, false, None).await?;
        r.ledger(&closed.ledger);
        empties.push(window);
        reports.push(r);

        big.restart(false).await?;
        let since = MessageId::first_at(Utc::now()).to_string();
        let window = measure(&mut big, opts.concurrency, duration).await?;
        big.stop_vow().await?;
        let mut r = Report::new(title(&format!(
            "stored={} expired={} round={round}",
            opts.stored, opts.expired
        )));
        window_lines(&mut r, &window);
        r.metric("retention_deleted", window.purged);
        r.line(format!(
            "retention deleted {:.0} messages during the window ({:.0}/s)",
            window.purged,
            window.purged / window.load.seconds()
        ));
        let stored = big
            .db
            .first_row(&format!(
                "SELECT CAST(count(*) AS TEXT) FROM messages WHERE app_id = '{}' AND id >= '{since}'",
                big.target.app
            ))
            .await?
            .pop()
            .context("a count")?
            .parse()?;
        r.ledger(&Ledger {
            sent: window.load.sent,
            acked: window.load.acked.len() as u64,
            rejected: window.load.rejected,
            failed: window.load.failed,
            stored,
            ..Ledger::default()
        });
        bigs.push(window);
        reports.push(r);
    }
    big.db.cleanup().await?;

    let mut r = Report::new(title(&format!(
        "summary stored={} expired={}",
        opts.stored, opts.expired
    )));
    let median =
        |ws: &[Window], f: fn(&Window) -> f64| spread(&ws.iter().map(f).collect::<Vec<_>>()).0;
    let (empty_rate, big_rate) = (median(&empties, Window::rate), median(&bigs, Window::rate));
    let ratio = big_rate / empty_rate;
    r.metric("empty_acks_per_s", empty_rate);
    r.metric("big_acks_per_s", big_rate);
    r.metric("ratio", ratio);
    r.line(format!(
        "medians of {ROUNDS} rounds: empty store {empty_rate:.0} acks/s (ack p99 {:.2} ms); \
         big store {big_rate:.0} acks/s (ack p99 {:.2} ms), retention deleting {:.0}/s",
        median(&empties, Window::p99),
        median(&bigs, Window::p99),
        median(&bigs, |w| w.purged / w.load.seconds()),
    ));
    r.line(format!(
        "big / empty: {ratio:.3}; target >= 0.8: {}",
        if ratio >= 0.8 { "MET" } else { "MISSED" }
    ));
    reports.push(r);
    Ok(reports)
}

/// Lets vow's cleaner start, then posts closed loop for `duration`.
async fn measure(rig: &mut Rig, concurrency: usize, duration: Duration) -> anyhow::Result<Window> {
    tokio::time::sleep(FIRST_SWEEP).await;
    let before = rig.target.api.metrics().await?.value(PURGED);
    rig.begin_window();
    let load = rig.target.closed_loop(concurrency, duration, None).await;
    let mut cpu = rig.end_window();
    rig.attribute_postgres(&mut cpu).await?;
    let purged = rig.target.api.metrics().await?.value(PURGED) - before;
    Ok(Window {
        load,
        cpu,
        purged,
        rss: rig.peak_rss(),
    })
}

/// A window's rate, latency and CPU.
fn window_lines(r: &mut Report, w: &Window) {
    let rate = w.rate();
    r.metric("acks_per_s", rate);
    r.line(format!("acks/s {rate:.0}"));
    let lat = r.latency("ack", &w.load.ack_latency);
    r.line(lat);
    if w.load.shed > 0 {
        r.line(format!("refused with Retry-After: {}", w.load.shed));
    }
    if let Some(s) = w.load.first_rejection {
        r.line(format!("first non-2xx status: {s}"));
    }
    cpu_lines(r, &w.cpu, w.load.acked.len() as u64, "messages", w.rss);
}
