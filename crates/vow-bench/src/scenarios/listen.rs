//! `listen`: what `vow listen` adds to a delivery.
//!
//! One application whose every message goes twice to the same in-process receiver: to
//! receiver endpoint 0 as an ordinary HTTP endpoint, and to receiver endpoint 1 through a real
//! `vow listen` process (the binary under test) relaying its relay endpoint's deliveries over
//! its stream. An open-loop generator posts `--rate` messages per second (each one relayed
//! delivery) for D seconds (default 30). Reports relayed deliveries/s while the load ran (and
//! in its second half), the relay's added latency per message (its arrival through `listen`
//! minus the same message's direct arrival), ack → first byte on both paths, the CPU of
//! `vow listen`, and whether it printed one line per relayed delivery. Target: ≥ 1,000
//! relayed deliveries/s with p99 added latency ≤ 5 ms.

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use super::{secs, Options, Rig};
use crate::ledger::{histogram, Report};
use crate::machine::{self, CpuUse};
use crate::vow_process::ADMIN_TOKEN;

/// The receiver endpoint `vow listen` posts to.
const RELAYED: usize = 1;

/// Runs one measurement at `--rate` messages per second.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let duration = opts.duration_or(30);
    let mut rig = Rig::start_with(opts, true, 2, 1, &[]).await?;
    let base = rig.base_url().context("vow is running")?.to_string();
    let listener = Listener::start(opts, &base, &rig.target.app, &rig.receiver.url(RELAYED))
        .await
        .context("starting vow listen")?;
    rig.begin_window();
    let listen_before = machine::sample(listener.pid);
    let started = std::time::Instant::now();
    let load = rig
        .target
        .open_loop(opts.rate, duration, opts.max_in_flight)
        .await;
    let expected = load.acked.len() as u64 * 2;
    let drained = tokio::time::timeout(
        opts.drain_cap,
        rig.receiver.drain(expected, Duration::from_secs(15)),
    )
    .await
    .unwrap_or(false);
    let listen_cpu = CpuUse::between(
        &listen_before,
        &machine::sample(listener.pid),
        started.elapsed().as_secs_f64(),
    );
    let cpu = rig.end_window();
    let lines = listener.stop().await?;
    let direct = rig.receiver.seen_at(0);
    let relayed = rig.receiver.seen_at(RELAYED);
    let closed = rig.close(&load, true, None).await?;
    let j = &closed.joined;

    let mut r = Report::new(format!(
        "listen {} rate={} msg/s (each delivered direct and through vow listen) duration={}s",
        opts.backend(),
        opts.rate,
        duration.as_secs()
    ));
    let (start, end) = (
        load.window_us.0,
        load.last_send_us.max(load.window_us.0 + 1),
    );
    let mid = start + (end - start) / 2;
    let offered = load.sent as f64 / secs(end - start);
    let during = j.count_between(RELAYED..RELAYED + 1, start, end) as f64 / secs(end - start);
    let second_half = j.count_between(RELAYED..RELAYED + 1, mid, end) as f64 / secs(end - mid);
    r.metric("offered_msg_per_s", offered);
    r.metric("relayed_per_s", during);
    r.metric("relayed_per_s_second_half", second_half);
    r.line(format!(
        "offered {offered:.0} msg/s ({} scheduled unsent); relayed/s during load {during:.0} (second half {second_half:.0}); {}",
        load.unsent,
        if drained { "all delivered on both paths" } else { "NOT drained" }
    ));

    let mut added = histogram();
    let mut relay_first = 0u64;
    for (id, at_relay) in &relayed {
        if let Some(at_direct) = direct.get(id) {
            if at_relay < at_direct {
                relay_first += 1;
            }
            let _ = added.record(at_relay.saturating_sub(*at_direct).max(1));
        }
    }
    let line = r.latency("added_by_listen", &added);
    r.line(format!(
        "{line} (relayed arrival - direct arrival of the same message; {relay_first} relayed first, counted as ~0)"
    ));
    let line = r.latency("e2e_direct", &j.latency(0..1));
    r.line(line);
    let line = r.latency("e2e_relayed", &j.latency(RELAYED..RELAYED + 1));
    r.line(line);
    let line = r.latency("ack", &load.ack_latency);
    r.line(line);
    let relayed_count = j.arrivals[RELAYED].len() as u64;
    r.metric(
        "listen_lines_missing",
        relayed_count.saturating_sub(lines) as f64,
    );
    r.line(format!(
        "vow listen printed {lines} delivery lines for {relayed_count} relayed deliveries; {:.1} CPU-s = {:.3} CPU-s per 1,000 relayed",
        listen_cpu.seconds,
        listen_cpu.seconds * 1000.0 / relayed_count.max(1) as f64
    ));
    let p99 = added.value_at_quantile(0.99) as f64 / 1000.0;
    let met = second_half >= 1_000.0 && !added.is_empty() && p99 <= 5.0 && drained;
    r.line(format!(
        "target >= 1,000 relayed deliveries/s with p99 added <= 5 ms: {}",
        if met { "MET" } else { "MISSED" }
    ));
    closed.finish_report(&mut r, &cpu);
    Ok(vec![r])
}

/// A running `vow listen`, counting the delivery lines it prints.
struct Listener {
    child: Child,
    pid: u32,
    lines: Arc<AtomicU64>,
    reading: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Starts `vow listen <local> --app <app>` against `base` and waits (up to 30 s) until its
    /// stream is connected.
    async fn start(opts: &Options, base: &str, app: &str, local: &str) -> anyhow::Result<Self> {
        let mut child = Command::new(&opts.vow.bin)
            .args([
                "listen", local, "--app", app, "--url", base, "--output", "json",
            ])
            .env("VOW_TOKEN", ADMIN_TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().context("vow listen exited at once")?;
        let stdout = child.stdout.take().context("vow listen's stdout")?;
        let mut out = BufReader::new(stdout).lines();
        let connected = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = out.next_line().await? {
                if line.contains(r#""type":"connected""#) {
                    return Ok(true);
                }
            }
            anyhow::Ok(false)
        });
        if !connected.await.unwrap_or(Ok(false))? {
            bail!("vow listen did not connect within 30 s");
        }
        let lines = Arc::new(AtomicU64::new(0));
        let reading = tokio::spawn(count_deliveries(out, lines.clone()));
        Ok(Self {
            child,
            pid,
            lines,
            reading,
        })
    }

    /// Ctrl-C (it deletes its relay endpoint), then the delivery lines it printed.
    async fn stop(mut self) -> anyhow::Result<u64> {
        let _ = std::process::Command::new("kill")
            .args(["-INT", &self.pid.to_string()])
            .status();
        match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => {
                eprintln!("warning: vow listen did not stop within 15 s of SIGINT; killing it");
                self.child.kill().await?;
            }
        }
        let _ = self.reading.await;
        Ok(self.lines.load(Ordering::Relaxed))
    }
}

/// Counts the `delivery` lines `vow listen -o json` prints with a 2xx status.
async fn count_deliveries(mut out: Lines<BufReader<ChildStdout>>, lines: Arc<AtomicU64>) {
    while let Ok(Some(line)) = out.next_line().await {
        if line.contains(r#""type":"delivery""#) && line.contains(r#""status":2"#) {
            lines.fetch_add(1, Ordering::Relaxed);
        }
    }
}
