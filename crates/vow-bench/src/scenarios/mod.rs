//! The scenarios, and the rig they share: a fresh database, `vow serve`, a receiver, an
//! application with N endpoints, and the accounting that closes every run.
//!
//! # Layout
//! - [`commit_baseline`]: single-row durable commits/s, the yardstick for ingest.
//! - [`console`]: the console's and portal's pages on a seeded store of 1M messages, idle
//!   and while a backlog drains.
//! - [`ingest`]: closed-loop POSTs with delivery workers off.
//! - [`big_store`]: the same on a store filled with millions of messages while retention
//!   deletes old ones, against an empty store.
//! - [`idempotency`]: the same, with and without `Idempotency-Key`, interleaved in one run.
//! - [`e2e`]: open-loop POSTs with workers on, 1..N endpoints (fan-out).
//! - [`idle_latency`]: one message at a time into an idle system.
//! - [`slow_neighbour`]: 10 endpoints, one answering after 2 s, against a run with none slow.
//! - [`backlog_drain`]: queue with workers off, restart with workers on, time the drain.
//! - [`soak`]: that drain on a fresh store, again after a long open-loop load: does the queue
//!   decay with use?
//! - [`retention`]: a long open-loop load with a short message retention: do the tables stay
//!   flat, and what does retention cost?
//! - [`inbound`]: signed deliveries to `/in/{source_id}` with duplicates mixed in: the most it
//!   takes, then ack latency at half of that.
//! - [`listen`]: open-loop messages to an HTTP endpoint and to a `vow listen` relay of the
//!   same receiver: what the relay adds.

pub mod backlog_drain;
pub mod big_store;
pub mod commit_baseline;
pub mod console;
pub mod e2e;
pub mod idempotency;
pub mod idle_latency;
pub mod inbound;
pub mod ingest;
pub mod listen;
pub mod retention;
pub mod slow_neighbour;
pub mod soak;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::api::Api;
use crate::ledger::{histogram, Ledger, Report};
use crate::load::{Counters, LoadResult, Target};
use crate::machine::{self, CpuUse, ProcSample};
use crate::receiver::{Clock, Receiver};
use crate::vow_process::{Database, VowProcess, VowSettings};

/// Everything the command line decided.
#[derive(Debug, Clone)]
pub struct Options {
    /// How to start vow (the `workers` field is set per scenario).
    pub vow: VowSettings,
    /// PostgreSQL maintenance URL when running against PostgreSQL.
    pub pg: Option<String>,
    /// Overrides each scenario's default duration.
    pub duration: Option<Duration>,
    /// Closed-loop clients.
    pub concurrency: usize,
    /// Open-loop offered deliveries per second.
    pub rate: f64,
    /// Endpoint counts for `e2e`.
    pub endpoints: Vec<usize>,
    /// Bound on outstanding POSTs in open-loop runs.
    pub max_in_flight: usize,
    /// Longest wait for an open-loop run's deliveries to drain after the load.
    pub drain_cap: Duration,
    /// Messages queued by `backlog-drain`.
    pub messages: u64,
    /// Messages within retention that `big-store` fills its store with.
    pub stored: u64,
    /// Messages past retention it adds before them, for retention to delete.
    pub expired: u64,
    /// Sequential messages sent by `idle-latency`.
    pub idle_count: usize,
    /// `console`'s seeded database: a SQLite file, or with `--pg` a database name.
    pub seed: Option<String>,
    /// Whether every message create carries a fresh `Idempotency-Key`.
    pub keyed: bool,
    /// Whether every message create is sent as with a Svix SDK (a realistic event, answered
    /// with its payload).
    pub like_sdk: bool,
    /// vow processes sharing the PostgreSQL database in `e2e` (1: one).
    pub nodes: usize,
}

impl Options {
    /// The scenario's duration: `--duration`, else `default`.
    pub fn duration_or(&self, default: u64) -> Duration {
        self.duration.unwrap_or(Duration::from_secs(default))
    }

    /// " keyed" when every create carries an `Idempotency-Key`, " like-sdk" when it is sent as
    /// with a Svix SDK, for report titles.
    pub fn load_label(&self) -> String {
        let mut label = String::new();
        if self.keyed {
            label.push_str(" keyed");
        }
        if self.like_sdk {
            label.push_str(" like-sdk");
        }
        label
    }

    /// "sqlite" or "postgres".
    pub fn backend(&self) -> &'static str {
        if self.pg.is_some() {
            "postgres"
        } else {
            "sqlite"
        }
    }
}

/// CPU readings at the start of a measurement window.
struct Window {
    at: Instant,
    vow: ProcSample,
    bench: ProcSample,
    postgres: Option<ProcSample>,
}

/// CPU used over a measurement window.
#[derive(Debug)]
pub struct Cpu {
    /// The vow process.
    pub vow: CpuUse,
    /// This process (load generator and receiver).
    pub bench: CpuUse,
    /// The PostgreSQL server's processes, in `--pg` runs.
    pub postgres: Option<CpuUse>,
    /// Of those, the CPU-seconds of this run's database's backends and of the server's
    /// background processes (its WAL writer, checkpointer, ...), when attributed with
    /// [`Rig::attribute_postgres`]: the server is shared with other people's tests.
    pub postgres_ours: Option<f64>,
    /// The postgres samples at the start and end of the window, for that attribution.
    postgres_samples: Option<(ProcSample, ProcSample)>,
}

/// A running system under test with its receiver and an application.
pub struct Rig {
    /// The run's database.
    pub db: Database,
    vow: Option<VowProcess>,
    /// More vow processes on the same database (`--nodes`), delivering too, each taking its
    /// turn of the message creates.
    peers: Vec<VowProcess>,
    settings: VowSettings,
    /// The in-process endpoints.
    pub receiver: Receiver,
    /// Where load goes.
    pub target: Target,
    /// Receiver endpoints, each owed every acknowledged message.
    pub endpoints: usize,
    window: Option<Window>,
    peak_rss: f64,
}

impl Rig {
    /// A fresh database, vow (`workers` on or off), a receiver with `endpoints` endpoints
    /// (`delays[i]` before endpoint i answers), an application and its endpoints.
    pub async fn start(
        opts: &Options,
        workers: bool,
        endpoints: usize,
        delays: &[Duration],
    ) -> anyhow::Result<Self> {
        Self::start_with(opts, workers, endpoints, endpoints, delays).await
    }

    /// [`Rig::start`] with `receivers` receiver endpoints of which only the first `endpoints`
    /// get a vow endpoint: the others are reached another way (`vow listen`), and count in
    /// the books like the rest.
    pub async fn start_with(
        opts: &Options,
        workers: bool,
        receivers: usize,
        endpoints: usize,
        delays: &[Duration],
    ) -> anyhow::Result<Self> {
        let db = match &opts.pg {
            Some(url) => Database::postgres(url).await?,
            None => Database::sqlite()?,
        };
        let settings = VowSettings {
            workers,
            ..opts.vow.clone()
        };
        let vow = VowProcess::start(&settings, &db).await?;
        let mut peers = Vec::new();
        for _ in 1..opts.nodes {
            peers.push(VowProcess::start(&settings, &db).await?);
        }
        let clock = Clock::start();
        let receiver = Receiver::start(clock, receivers, delays).await?;
        let mut api = Api::new(vow.base_url(), opts.max_in_flight.max(opts.concurrency))?;
        if !peers.is_empty() {
            let nodes = std::iter::once(&vow).chain(&peers);
            api.spread_over(nodes.map(|v| v.base_url().to_string()).collect());
        }
        let app = api.create_app().await?;
        for i in 0..endpoints {
            api.create_endpoint(&app, &receiver.url(i)).await?;
        }
        let target = Target {
            api,
            app,
            clock,
            counters: Arc::new(Counters::default()),
            keyed: opts.keyed,
            like_sdk: opts.like_sdk,
        };
        Ok(Self {
            db,
            vow: Some(vow),
            peers,
            settings,
            receiver,
            target,
            endpoints: receivers,
            window: None,
            peak_rss: 0.0,
        })
    }

    fn pid(&self) -> u32 {
        self.vow.as_ref().map_or(0, VowProcess::pid)
    }

    /// The CPU of every vow process of the rig now, as one.
    fn vow_sample(&self) -> ProcSample {
        let pids: Vec<u32> = self
            .vow
            .iter()
            .chain(&self.peers)
            .map(VowProcess::pid)
            .collect();
        machine::sample_all(&pids)
    }

    /// The running vow's `http://127.0.0.1:<port>` (it changes with [`Rig::restart`]).
    pub fn base_url(&self) -> Option<&str> {
        self.vow.as_ref().map(VowProcess::base_url)
    }

    /// Starts the CPU accounting window (vow, this process, and PostgreSQL's processes).
    pub fn begin_window(&mut self) {
        self.window = Some(Window {
            at: Instant::now(),
            vow: self.vow_sample(),
            bench: machine::sample(std::process::id()),
            postgres: self
                .db
                .is_postgres()
                .then(|| machine::sample_named("postgres")),
        });
    }

    /// CPU used since [`Rig::begin_window`].
    pub fn end_window(&mut self) -> Cpu {
        let w = self.window.take().expect("begin_window first");
        let wall = w.at.elapsed().as_secs_f64();
        let postgres_samples = w.postgres.map(|p0| (p0, machine::sample_named("postgres")));
        Cpu {
            vow: CpuUse::between(&w.vow, &self.vow_sample(), wall),
            bench: CpuUse::between(&w.bench, &machine::sample(std::process::id()), wall),
            postgres: postgres_samples
                .as_ref()
                .map(|(p0, p1)| CpuUse::between(p0, p1, wall)),
            postgres_ours: None,
            postgres_samples,
        }
    }

    /// Fills [`Cpu::postgres_ours`]: the server processes that serve this run's database now
    /// (vow's pool keeps its connections) or no database (background processes).
    pub async fn attribute_postgres(&self, cpu: &mut Cpu) -> anyhow::Result<()> {
        if let Some((p0, p1)) = &cpu.postgres_samples {
            let pids = self.db.server_pids().await?;
            cpu.postgres_ours = Some(machine::seconds_of(p0, p1, &pids));
        }
        Ok(())
    }

    /// vow's peak RSS (MiB) so far, over every process the rig ran (the largest one's).
    pub fn peak_rss(&self) -> f64 {
        let running = self.vow.iter().chain(&self.peers);
        running.fold(self.peak_rss, |peak, v| {
            peak.max(machine::peak_rss_mib(v.pid()))
        })
    }

    /// Stops vow, and its peers (recording their peak RSS first).
    pub async fn stop_vow(&mut self) -> anyhow::Result<()> {
        self.peak_rss = self.peak_rss();
        for vow in self.vow.take().into_iter().chain(self.peers.drain(..)) {
            if vow.log_lines() > 0 {
                eprintln!("vow logged (last lines):\n{}", vow.log_tail());
            }
            vow.stop().await?;
        }
        Ok(())
    }

    /// Starts vow again on the same database, with workers on or off, and points the load
    /// at it.
    pub async fn restart(&mut self, workers: bool) -> anyhow::Result<()> {
        self.stop_vow().await?;
        self.settings.workers = workers;
        let vow = VowProcess::start(&self.settings, &self.db).await?;
        self.target.api.moved_to(vow.base_url());
        self.vow = Some(vow);
        Ok(())
    }

    /// Stops vow and hands back the database (for the caller to count and clean up) and vow's
    /// peak RSS (MiB), for scenarios that keep their own books.
    pub async fn close_bare(mut self) -> anyhow::Result<(Database, f64)> {
        self.stop_vow().await?;
        Ok((self.db, self.peak_rss))
    }

    /// Stops vow, counts what was stored, matches deliveries against acknowledged messages,
    /// and drops the database. With `expect_deliveries`, every acknowledged message must reach
    /// every endpoint, except that endpoint `may_lag` may leave some queued (the cutoff).
    pub async fn close(
        mut self,
        load: &LoadResult,
        expect_deliveries: bool,
        may_lag: Option<usize>,
    ) -> anyhow::Result<Closed> {
        self.stop_vow().await?;
        let stored = self.db.count_messages().await?;
        let joined = Joined::new(load, &self.receiver, 0..self.endpoints);
        let cutoff = may_lag.map_or(0, |ep| {
            (load.acked.len() as u64).saturating_sub(joined.arrivals[ep].len() as u64)
        });
        let ledger = Ledger {
            sent: load.sent,
            acked: load.acked.len() as u64,
            rejected: load.rejected,
            failed: load.failed,
            stored,
            endpoints: if expect_deliveries {
                self.endpoints as u64
            } else {
                0
            },
            delivered: joined.delivered,
            cutoff,
            duplicates: self.receiver.duplicates(),
            unexpected: joined.unexpected + self.receiver.strays(),
        };
        if !expect_deliveries && joined.delivered > 0 {
            eprintln!("warning: deliveries arrived although workers were off");
        }
        self.db.cleanup().await?;
        Ok(Closed {
            ledger,
            joined,
            peak_rss: self.peak_rss,
        })
    }
}

/// What a closed rig leaves: its books, the matched deliveries and vow's peak memory.
#[derive(Debug)]
pub struct Closed {
    /// The run's ledger.
    pub ledger: Ledger,
    /// Deliveries matched to acknowledged messages.
    pub joined: Joined,
    /// Peak RSS (MiB) over every vow process the rig ran.
    pub peak_rss: f64,
}

impl Closed {
    /// Ends a delivery run's report: CPU per 1,000 deliveries, peak memory, the ledger.
    pub fn finish_report(&self, r: &mut Report, cpu: &Cpu) {
        cpu_lines(r, cpu, self.ledger.delivered, "deliveries", self.peak_rss);
        r.ledger(&self.ledger);
    }
}

/// Deliveries matched against the messages that were acknowledged.
#[derive(Debug)]
pub struct Joined {
    /// Unique deliveries of acknowledged ids.
    pub delivered: u64,
    /// Deliveries of ids not acknowledged.
    pub unexpected: u64,
    /// Arrival times (µs) per endpoint, of acknowledged ids, with their POST start time.
    pub arrivals: Vec<Vec<(u64, u64)>>,
}

impl Joined {
    /// Joins `load`'s acknowledged ids with what `receiver` saw on `endpoints`.
    pub fn new(load: &LoadResult, receiver: &Receiver, endpoints: std::ops::Range<usize>) -> Self {
        let sent: HashMap<&str, u64> = load.acked.iter().map(|a| (&*a.id, a.sent_us)).collect();
        let mut out = Self {
            delivered: 0,
            unexpected: 0,
            arrivals: Vec::new(),
        };
        for ep in endpoints {
            let mut list = Vec::new();
            for (id, at) in receiver.seen_at(ep) {
                match sent.get(&*id) {
                    Some(s) => list.push((at, *s)),
                    None => out.unexpected += 1,
                }
            }
            out.delivered += list.len() as u64;
            out.arrivals.push(list);
        }
        out
    }

    /// POST -> receiver's first byte, over the endpoints `eps`.
    pub fn latency(&self, eps: std::ops::Range<usize>) -> Histogram<u64> {
        let mut h = histogram();
        for ep in eps {
            for (at, sent) in &self.arrivals[ep] {
                let _ = h.record(at.saturating_sub(*sent).max(1));
            }
        }
        h
    }

    /// Deliveries to endpoints `eps` that arrived in `[from, to]` µs.
    pub fn count_between(&self, eps: std::ops::Range<usize>, from: u64, to: u64) -> u64 {
        eps.map(|ep| {
            self.arrivals[ep]
                .iter()
                .filter(|(at, _)| (from..=to).contains(at))
                .count() as u64
        })
        .sum()
    }

    /// The last arrival (µs) on any endpoint.
    pub fn last_arrival(&self) -> u64 {
        self.arrivals
            .iter()
            .flatten()
            .map(|(at, _)| *at)
            .max()
            .unwrap_or(0)
    }
}

/// Adds the CPU and memory lines: vow's CPU per 1,000 `units` (and PostgreSQL's, in `--pg`
/// runs), peak RSS, the busiest threads, this process's share and how busy the machine was.
pub fn cpu_lines(r: &mut Report, cpu: &Cpu, units: u64, unit: &str, rss: f64) {
    let per_1000 = |seconds: f64| {
        if units == 0 {
            0.0
        } else {
            seconds * 1000.0 / units as f64
        }
    };
    let vow = &cpu.vow;
    r.metric(&format!("vow_cpu_s_per_1000_{unit}"), per_1000(vow.seconds));
    r.metric("vow_cores", vow.seconds / vow.wall.max(1e-9));
    r.metric("vow_peak_rss_mib", rss);
    r.metric("machine_busy_pct", 100.0 * cpu.bench.machine_busy);
    r.line(format!(
        "vow: {:.1} CPU-s in {:.1} s wall ({:.2} cores) = {:.3} CPU-s per 1,000 {unit}; peak RSS {rss:.1} MiB",
        vow.seconds,
        vow.wall,
        vow.seconds / vow.wall.max(1e-9),
        per_1000(vow.seconds)
    ));
    r.line(format!("vow threads: {}", vow.top_threads(4)));
    if let Some(pg) = &cpu.postgres {
        r.metric(&format!("pg_cpu_s_per_1000_{unit}"), per_1000(pg.seconds));
        r.line(format!(
            "postgres server: {:.1} CPU-s ({:.2} cores) = {:.3} CPU-s per 1,000 {unit}",
            pg.seconds,
            pg.seconds / pg.wall.max(1e-9),
            per_1000(pg.seconds)
        ));
        if let Some(ours) = cpu.postgres_ours {
            r.metric(&format!("pg_ours_cpu_s_per_1000_{unit}"), per_1000(ours));
            r.metric("pg_ours_cores", ours / pg.wall.max(1e-9));
            r.line(format!(
                "  of which this run's database's backends and the background processes: {ours:.1} CPU-s ({:.2} cores) = {:.3} CPU-s per 1,000 {unit}; other databases' backends {:.1} CPU-s",
                ours / pg.wall.max(1e-9),
                per_1000(ours),
                (pg.seconds - ours).max(0.0)
            ));
        }
    }
    let me = &cpu.bench;
    let cores = |c: &CpuUse| c.seconds / c.wall.max(1e-9);
    // Other databases' backends on a shared server count as other processes.
    let pg_ours = match (&cpu.postgres, cpu.postgres_ours) {
        (Some(pg), Some(ours)) => ours / pg.wall.max(1e-9),
        (Some(pg), None) => cores(pg),
        (None, _) => 0.0,
    };
    let ours = cores(vow) + cores(me) + pg_ours;
    let others = (me.machine_busy * machine::cpus() as f64 - ours).max(0.0);
    r.metric("other_processes_cores", others);
    r.line(format!(
        "bench process (load + receiver): {:.2} cores; machine busy {:.0}% of {} CPUs, of which other processes {others:.2} cores; load avg now {}",
        cores(me),
        100.0 * me.machine_busy,
        machine::cpus(),
        machine::load_average()
    ));
}

/// "x.xx s" for µs.
pub fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}
