//! `vow replay`: replays an endpoint's dead letters through vow's API
//! (`POST /api/v1/app/{app}/endpoint/{ep}/replay`, the same action as the console's Replay
//! button), then follows the replayed deliveries to the end by the replay's id
//! (`GET …/endpoint/{ep}/stats?replay_id=`) with a [`progress`](super::progress) display, and
//! prints a summary with the true counts. `--dry-run` only counts.

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use clap::Args;
use serde::{Deserialize, Serialize};

use super::output::{Colour, Printer};
use super::progress::{self, Followed, Tally};
use super::target::{Client, ClientArgs};
use super::when::time;

/// `vow replay`'s flags.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Times are RFC 3339 (2026-12-01T09:00:00Z) or a span ago: 90s, 30m, 2h, 7d, 1w.

Examples:
  vow replay --app my-shop --endpoint ep_2x0... --dry-run
  vow replay --app my-shop --endpoint ep_2x0... --since 2h --event-type order.created,order.paid
  vow replay --app app_2x0... --endpoint billing --since 2026-12-01T09:00:00Z --until 1h -o json")]
pub struct ReplayArgs {
    /// The application: its id (`app_…`) or its uid.
    #[arg(long, value_name = "APP")]
    pub app: String,
    /// The endpoint: its id (`ep_…`) or its uid.
    #[arg(long, value_name = "EP")]
    pub endpoint: String,
    /// Only dead letters of messages created at or after this time.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only dead letters of messages created before this time.
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only these event types (comma-separated, or repeat the flag).
    #[arg(long, value_name = "TYPE,…", value_delimiter = ',')]
    pub event_type: Vec<String>,
    /// Count what would be replayed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Requeue, print the replay's id and return without following the deliveries.
    #[arg(long)]
    pub no_wait: bool,
    /// Which vow, as whom, and how to print (`--url`, `--token`, `--profile`, `--output`).
    #[command(flatten)]
    pub client: ClientArgs,
}

/// vow's `ReplayIn`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplayIn<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    event_types: &'a [String],
    dry_run: bool,
}

/// vow's `ReplayOut`.
#[derive(Debug, Deserialize)]
struct ReplayOut {
    id: Option<String>,
    count: u64,
}

/// vow's `EndpointStats`, for one replay's deliveries.
#[derive(Debug, Deserialize)]
struct StatsOut {
    success: u64,
    pending: u64,
    sending: u64,
    fail: u64,
}

/// What `vow replay` prints with `--output json` (a dry run prints vow's `{dryRun, count}`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary<'a> {
    replay_id: &'a str,
    #[serde(flatten)]
    tally: Tally,
    /// Every requeued delivery settled while followed.
    finished: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    elapsed_ms: Option<u128>,
}

/// Replays the dead letters `args` pick and follows them (unless `--dry-run`/`--no-wait`).
pub async fn run(args: &ReplayArgs) -> anyhow::Result<()> {
    let now = Utc::now();
    let since = args
        .since
        .as_deref()
        .map(|t| time("--since", t, now))
        .transpose()?;
    let until = args
        .until
        .as_deref()
        .map(|t| time("--until", t, now))
        .transpose()?;
    if let (Some(since), Some(until)) = (since, until) {
        if since >= until {
            bail!("--since ({since}) must be before --until ({until})");
        }
    }
    let client = args.client.connect()?;
    client.require_token()?;
    let endpoint = format!("/api/v1/app/{}/endpoint/{}", args.app, args.endpoint);
    let body = ReplayIn {
        since,
        until,
        event_types: &args.event_type,
        dry_run: args.dry_run,
    };
    let replayed: ReplayOut = client
        .post(&format!("{endpoint}/replay"), &body, None)
        .await?;
    let printer = args.client.printer();
    if args.dry_run {
        return dry_run(&printer, args, replayed.count);
    }
    let id = replayed
        .id
        .context("vow answered a replay without its id: is it older than this vow CLI?")?;
    let requeued = replayed.count;
    if args.no_wait {
        let tally = Tally {
            requeued,
            pending: requeued,
            ..Tally::default()
        };
        return summary(&printer, args, &id, None, tally);
    }
    let stats = format!("{endpoint}/stats?replay_id={id}");
    let followed = progress::follow(requeued, || read(&client, &stats)).await?;
    summary(&printer, args, &id, Some(&followed), followed.tally)
}

/// How the replay's deliveries stand now.
async fn read(client: &Client, stats: &str) -> anyhow::Result<Tally> {
    let s: StatsOut = client.get(stats).await?;
    Ok(Tally {
        delivered: s.success,
        failed: s.fail,
        pending: s.pending,
        sending: s.sending,
        ..Tally::default()
    })
}

fn dry_run(printer: &Printer, args: &ReplayArgs, count: u64) -> anyhow::Result<()> {
    if printer.json() {
        return printer.print_json(&serde_json::json!({"dryRun": true, "count": count}));
    }
    println!(
        "{} {count} dead letter{} of {} would be replayed; nothing was changed.",
        printer.paint("dry run:", Colour::Yellow),
        plural(count),
        args.endpoint
    );
    Ok(())
}

/// Prints the final counts: after following (`followed`), or right after requeueing.
fn summary(
    printer: &Printer,
    args: &ReplayArgs,
    id: &str,
    followed: Option<&Followed>,
    tally: Tally,
) -> anyhow::Result<()> {
    let finished = followed.is_some_and(|f| !f.interrupted);
    if printer.json() {
        let summary = Summary {
            replay_id: id,
            tally,
            finished,
            elapsed_ms: followed.map(|f| f.elapsed.as_millis()),
        };
        printer.print_json(&summary)?;
    } else {
        let Tally {
            requeued,
            delivered,
            failed,
            ..
        } = tally;
        let failed_text = format!("{failed} failed");
        let failed_text = match failed {
            0 => failed_text,
            _ => printer.paint(&failed_text, Colour::Red),
        };
        let head = format!(
            "replayed {requeued} dead letter{} to {} ({id}):",
            plural(requeued),
            args.endpoint
        );
        match followed {
            None => println!("{head} requeued; vow delivers them in the background."),
            Some(f) => println!(
                "{head} {} delivered, {failed_text}, {} waiting in {:.1}s.",
                printer.paint(&delivered.to_string(), Colour::Green),
                tally.outstanding(),
                f.elapsed.as_secs_f64()
            ),
        }
        if tally.taken_over() > 0 {
            println!(
                "{} of them were taken over by a later replay or resend.",
                tally.taken_over()
            );
        }
    }
    if followed.is_some_and(|f| f.interrupted) {
        eprintln!(
            "Stopped following; the replay continues in vow. See it again with \
             GET /api/v1/app/{}/endpoint/{}/stats?replay_id={id}",
            args.app, args.endpoint
        );
    }
    Ok(())
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
