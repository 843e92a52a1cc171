//! `vow-bench`: the load generator, receiver and ledger behind `BENCHMARKS.md`.
//!
//! Starts `vow serve` as a child process on a fresh SQLite file (or, with `--pg`, a fresh
//! PostgreSQL database), points its deliveries at an in-process hyper receiver, drives load
//! over loopback, and prints one result block per run. Every run keeps a ledger (sent,
//! acknowledged, stored, delivered, duplicates); one that does not balance is marked VOID and
//! left out of the medians. With `--runs N` each scenario repeats N times (scenarios
//! interleaved) and a summary gives the median, min and max of every metric.
//!
//! # Layout
//! - [`machine`]: `/proc` readings (load, CPU per process and thread, peak RSS).
//! - [`vow_process`]: the database and the `vow serve` child.
//! - [`receiver`]: the endpoints, recording first arrival per `webhook-id`.
//! - [`api`]: the few API calls a run makes, and the 1 KiB message body.
//! - [`fill`]: a store filled with delivered history by SQL, for `big-store`.
//! - [`load`]: closed- and open-loop generators, and the per-second sampler.
//! - [`ledger`]: the ledger, reports, histograms.
//! - [`signed`]: signed inbound deliveries and the order they are sent in.
//! - [`otel_sink`]: a discarding OTLP collector, for runs with traces exported (`--otel-sink`).
//! - [`scenarios`]: one module per scenario.

mod api;
mod fill;
mod ledger;
mod load;
mod machine;
mod otel_sink;
mod probe;
mod receiver;
mod scenarios;
mod signed;
mod vow_process;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};

use ledger::{spread, Report};
use scenarios::Options;
use vow_process::VowSettings;

/// Benchmarks vow end to end on this machine (loopback only, bounded in count and time).
#[derive(Debug, Parser)]
#[command(name = "vow-bench")]
struct Cli {
    /// Which scenario to run.
    scenario: Scenario,

    /// The `vow` binary to test (default: `vow` next to this binary, i.e. the release build
    /// in the same target dir).
    #[arg(long, value_name = "PATH")]
    vow_bin: Option<PathBuf>,

    /// Run against PostgreSQL instead of SQLite (a fresh database per run).
    #[arg(long)]
    pg: bool,

    /// PostgreSQL server URL used to create and drop the per-run databases.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pg_url: String,

    /// Seconds of load per run (default per scenario: ingest 20, e2e 60, slow-neighbour 30,
    /// soak and retention 1,800; inbound: phase A 10, phase B twice that).
    #[arg(long, value_name = "SECS")]
    duration: Option<u64>,

    /// Closed-loop clients (ingest, backlog-drain's queueing phase, inbound's phase A).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,

    /// Open-loop offered deliveries per second (e2e, slow-neighbour, soak, retention); with N endpoints,
    /// rate/N messages per second are posted. For listen: messages (relayed deliveries) per
    /// second.
    #[arg(long, default_value_t = 10_000.0)]
    rate: f64,

    /// Endpoint counts for e2e, comma-separated (e.g. `1,10,100`).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    endpoints: Vec<usize>,

    /// Most POSTs outstanding in open-loop runs (past it the schedule slips).
    #[arg(long, default_value_t = 1024)]
    max_in_flight: usize,

    /// Longest wait, after an open-loop load ends, for its deliveries to drain (e2e,
    /// slow-neighbour); a run not drained by then is VOID.
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    drain_cap: u64,

    /// Messages queued by backlog-drain (and by soak, before and after its load).
    #[arg(long, default_value_t = 100_000)]
    messages: u64,

    /// Messages within retention that big-store fills its store with.
    #[arg(long, default_value_t = 10_000_000)]
    stored: u64,

    /// Messages past retention big-store adds before them, for retention to delete.
    #[arg(long, default_value_t = 1_000_000)]
    expired: u64,

    /// Sequential messages sent by idle-latency.
    #[arg(long, default_value_t = 200)]
    idle_count: usize,

    /// The seeded database `console` copies for each run: a SQLite file, or with `--pg` the
    /// name of a database on the server (see the scenario's docs for how to fill one).
    #[arg(long, value_name = "FILE|DATABASE")]
    seed: Option<String>,

    /// Send every message create with a fresh Idempotency-Key, as the Svix SDKs do (the
    /// idempotency scenario chooses its own).
    #[arg(long)]
    keyed: bool,

    /// Send every message create as an application using a Svix SDK would: a realistic 1 KiB
    /// order event (which compresses as real JSON does) and the SDK's default answer, which
    /// carries the payload. Without it: a payload padded with one letter, answered without it.
    #[arg(long)]
    like_sdk: bool,

    /// vow processes sharing the database in e2e (needs --pg): each delivers, and message
    /// creates go to each in turn.
    #[arg(long, default_value_t = 1, value_name = "N")]
    nodes: usize,

    /// Repeat every scenario this many times and print medians.
    #[arg(long, default_value_t = 1)]
    runs: usize,

    /// Before each scenario run, wait (up to 20 min) until the machine is below this busy
    /// percentage over 3 s; 0 disables the wait.
    #[arg(long, default_value_t = 0.0, value_name = "PCT")]
    quiet_below: f64,

    /// Sets VOW_DELIVERY_MAX_IN_FLIGHT for the vow under test (default: vow's own).
    #[arg(long)]
    vow_max_in_flight: Option<usize>,

    /// Sets VOW_DELIVERY_MAX_PER_ENDPOINT for the vow under test (default: vow's own).
    #[arg(long)]
    vow_max_per_endpoint: Option<usize>,

    /// Sets VOW_MESSAGE_RETENTION_MINUTES for the vow under test (default: vow's own, 90
    /// days; `retention` needs it).
    #[arg(long, value_name = "MINUTES")]
    vow_message_retention_minutes: Option<u32>,

    /// Exports the vow under test's traces (VOW_OTEL_ENDPOINT) to this OTLP/HTTP collector.
    #[arg(long, value_name = "URL", conflicts_with = "otel_sink")]
    vow_otel_endpoint: Option<String>,

    /// Exports the vow under test's traces to a discarding OTLP collector in this process, and
    /// prints how many exports (and bytes) it got.
    #[arg(long)]
    otel_sink: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    CommitBaseline,
    Ingest,
    Idempotency,
    E2e,
    IdleLatency,
    SlowNeighbour,
    BacklogDrain,
    Soak,
    Retention,
    BigStore,
    Inbound,
    Console,
    Listen,
    All,
}

impl Scenario {
    fn expand(self) -> Vec<Scenario> {
        match self {
            Scenario::All => vec![
                Scenario::CommitBaseline,
                Scenario::Ingest,
                Scenario::Idempotency,
                Scenario::E2e,
                Scenario::IdleLatency,
                Scenario::SlowNeighbour,
                Scenario::BacklogDrain,
                Scenario::Inbound,
            ],
            one => vec![one],
        }
    }

    async fn run(self, opts: &Options) -> anyhow::Result<Vec<Report>> {
        match self {
            Scenario::CommitBaseline => scenarios::commit_baseline::run(opts).await,
            Scenario::Ingest => scenarios::ingest::run(opts).await,
            Scenario::Idempotency => scenarios::idempotency::run(opts).await,
            Scenario::E2e => scenarios::e2e::run(opts).await,
            Scenario::IdleLatency => scenarios::idle_latency::run(opts).await,
            Scenario::SlowNeighbour => scenarios::slow_neighbour::run(opts).await,
            Scenario::BacklogDrain => scenarios::backlog_drain::run(opts).await,
            Scenario::Soak => scenarios::soak::run(opts).await,
            Scenario::Retention => scenarios::retention::run(opts).await,
            Scenario::BigStore => scenarios::big_store::run(opts).await,
            Scenario::Inbound => scenarios::inbound::run(opts).await,
            Scenario::Console => scenarios::console::run(opts).await,
            Scenario::Listen => scenarios::listen::run(opts).await,
            Scenario::All => unreachable!("expanded before running"),
        }
    }
}

fn default_vow_bin() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("vow")))
        .unwrap_or_else(|| PathBuf::from("target/release/vow"))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let bin = cli.vow_bin.clone().unwrap_or_else(default_vow_bin);
    anyhow::ensure!(
        bin.exists(),
        "{} not found: build it with `cargo build --release -p vow-server --bin vow` or pass --vow-bin",
        bin.display()
    );
    let mut opts = Options {
        vow: VowSettings {
            bin,
            workers: true,
            max_in_flight: cli.vow_max_in_flight,
            max_per_endpoint: cli.vow_max_per_endpoint,
            otel_endpoint: cli.vow_otel_endpoint.clone(),
            message_retention_minutes: cli.vow_message_retention_minutes,
        },
        pg: cli.pg.then(|| cli.pg_url.clone()),
        duration: cli.duration.map(Duration::from_secs),
        concurrency: cli.concurrency.max(1),
        rate: cli.rate.max(1.0),
        endpoints: cli.endpoints.iter().copied().filter(|n| *n > 0).collect(),
        max_in_flight: cli.max_in_flight.max(1),
        drain_cap: Duration::from_secs(cli.drain_cap),
        messages: cli.messages,
        stored: cli.stored,
        expired: cli.expired,
        idle_count: cli.idle_count,
        seed: cli.seed.clone(),
        keyed: cli.keyed,
        like_sdk: cli.like_sdk,
        nodes: cli.nodes.max(1),
    };
    anyhow::ensure!(
        opts.nodes == 1 || (opts.pg.is_some() && cli.scenario == Scenario::E2e),
        "--nodes {} needs --pg and the e2e scenario: several vow processes share one PostgreSQL database",
        opts.nodes
    );
    println!("{}", machine::banner());
    println!(
        "vow: {} ({})",
        opts.vow.bin.display(),
        if opts.pg.is_some() {
            "postgres"
        } else {
            "sqlite"
        }
    );
    let runtime = tokio::runtime::Runtime::new().context("starting tokio")?;
    let sink = if cli.otel_sink {
        let sink = runtime.block_on(otel_sink::OtelSink::start())?;
        opts.vow.otel_endpoint = Some(sink.url());
        Some(sink)
    } else {
        None
    };
    if let Some(endpoint) = &opts.vow.otel_endpoint {
        println!("traces exported to {endpoint}");
    }
    runtime.block_on(run_all(
        cli.scenario,
        cli.runs.max(1),
        cli.quiet_below / 100.0,
        &opts,
    ))?;
    if let Some(sink) = sink {
        let (exports, bytes, spans) = sink.received();
        println!("otel sink: {spans} spans in {exports} exports, {bytes} bytes");
    }
    Ok(())
}

async fn run_all(
    scenario: Scenario,
    runs: usize,
    quiet_below: f64,
    opts: &Options,
) -> anyhow::Result<()> {
    // title -> metric -> values (valid and VOID runs apart); title -> (valid, total) runs.
    let mut values: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    let mut void_values = values.clone();
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for run in 1..=runs {
        for s in scenario.expand() {
            if quiet_below > 0.0 {
                let (busy, quiet) =
                    machine::wait_quiet(quiet_below, Duration::from_secs(1200)).await;
                println!(
                    "\n(machine busy {:.0}% over 3 s before this run{})",
                    100.0 * busy,
                    if quiet { "" } else { ": NOT QUIET, ran anyway" }
                );
            }
            println!(
                "\n-- run {run}/{runs}: {s:?} (load average {})",
                machine::load_average()
            );
            for report in s.run(opts).await? {
                print!("{}", report.render());
                let c = counts.entry(report.title.clone()).or_default();
                c.1 += 1;
                c.0 += usize::from(report.valid);
                let into = if report.valid {
                    &mut values
                } else {
                    &mut void_values
                };
                let m = into.entry(report.title.clone()).or_default();
                for (name, v) in &report.metrics {
                    m.entry(name.clone()).or_default().push(*v);
                }
            }
        }
    }
    if runs > 1 {
        println!("\n== summary over {runs} runs: median [min .. max]");
        for (title, (valid, total)) in &counts {
            // Medians of the valid runs; when none balanced, of the VOID ones, so labelled.
            let (which, set) = if *valid > 0 {
                ("valid runs", &values)
            } else {
                ("VOID runs only", &void_values)
            };
            println!("{title} ({valid} of {total} runs valid; medians of {which})");
            for (name, vs) in set.get(title).into_iter().flatten() {
                let (median, min, max) = spread(vs);
                println!("  {name:<34} {median:>12.2}  [{min:.2} .. {max:.2}]");
            }
        }
    }
    Ok(())
}
