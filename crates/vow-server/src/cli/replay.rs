//! `vow replay`: replays an endpoint's dead letters through vow's API
//! (`POST /api/v1/app/{app}/endpoint/{ep}/replay`, the same action as the console's Replay
//! button), or an inbound source's dead-lettered and rejected forwards
//! (`POST /api/v1/source/{src}/replay`), then follows what it requeued to the end by the
//! replay's id (`GET …/endpoint/{ep}/stats?replay_id=`, `GET …/source/{src}/replay/{id}`) with
//! a [`progress`](super::progress) display, and prints a summary with the true counts.
//! `--dry-run` only counts.

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use clap::{ArgGroup, Args};
use serde::{Deserialize, Serialize};

use super::output::{Colour, Printer};
use super::progress::{self, Followed, Tally};
use super::target::{Client, ClientArgs};
use super::when::time;

/// `vow replay`'s flags.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["endpoint", "source"])))]
#[command(after_help = "\
Times are RFC 3339 (2026-12-01T09:00:00Z) or a span ago: 90s, 30m, 2h, 7d, 1w.
With --source, they pick inbound events by when vow received them.

Examples:
  vow replay --app my-shop --endpoint ep_2x0... --dry-run
  vow replay --app my-shop --endpoint ep_2x0... --since 2h --event-type order.created,order.paid
  vow replay --app app_2x0... --endpoint billing --since 2026-12-01T09:00:00Z --until 1h -o json
  vow replay --source src_2x0... --destination dst_2x0... --since 1d --dry-run")]
pub struct ReplayArgs {
    /// The application: its id (`app_…`) or its uid.
    #[arg(long, value_name = "APP", requires = "endpoint")]
    pub app: Option<String>,
    /// The endpoint: its id (`ep_…`) or its uid.
    #[arg(long, value_name = "EP", requires = "app")]
    pub endpoint: Option<String>,
    /// Or an inbound source (`src_…`): replay its dead-lettered and rejected forwards.
    #[arg(long, value_name = "SRC", conflicts_with = "event_type")]
    pub source: Option<String>,
    /// With --source: only forwards to this destination (`dst_…`).
    #[arg(long, value_name = "DST", requires = "source")]
    pub destination: Option<String>,
    /// Only dead letters of messages created (inbound events received) at or after this time.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only dead letters of messages created (inbound events received) before this time.
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only these event types (comma-separated, or repeat the flag; not with --source).
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

/// What is replayed: an endpoint's deliveries or a source's forwards.
#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    Endpoint { app: &'a str, endpoint: &'a str },
    Source { source: &'a str },
}

impl<'a> Target<'a> {
    fn of(args: &'a ReplayArgs) -> anyhow::Result<Self> {
        match (&args.app, &args.endpoint, &args.source) {
            (Some(app), Some(endpoint), None) => Ok(Target::Endpoint { app, endpoint }),
            (None, None, Some(source)) => Ok(Target::Source { source }),
            _ => bail!("name either --app and --endpoint, or --source"),
        }
    }

    /// The API path of what is replayed.
    fn path(self) -> String {
        match self {
            Target::Endpoint { app, endpoint } => format!("/api/v1/app/{app}/endpoint/{endpoint}"),
            Target::Source { source } => format!("/api/v1/source/{source}"),
        }
    }

    /// Where replay `id`'s progress is read.
    fn progress(self, id: &str) -> String {
        match self {
            Target::Endpoint { .. } => format!("{}/stats?replay_id={id}", self.path()),
            Target::Source { .. } => format!("{}/replay/{id}", self.path()),
        }
    }

    /// The endpoint or source, as the user named it.
    fn name(self) -> &'a str {
        match self {
            Target::Endpoint { endpoint, .. } => endpoint,
            Target::Source { source } => source,
        }
    }

    /// How replay `id`'s deliveries or forwards stand now.
    async fn read(self, client: &Client, id: &str) -> anyhow::Result<Tally> {
        let path = self.progress(id);
        Ok(match self {
            Target::Endpoint { .. } => client.get::<StatsOut>(&path).await?.into(),
            Target::Source { .. } => client.get::<SourceStatsOut>(&path).await?.into(),
        })
    }
}

/// vow's `ReplayIn` (an endpoint's) and `SourceReplayIn`: each leaves out what the other has.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplayIn<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    event_types: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    destination: Option<&'a str>,
    dry_run: bool,
}

/// vow's `ReplayOut` and `SourceReplayOut` (which says what it skipped).
#[derive(Debug, Deserialize)]
struct ReplayOut {
    id: Option<String>,
    count: u64,
    #[serde(default)]
    skipped: Option<u64>,
}

/// vow's `EndpointStats`, for one replay's deliveries.
#[derive(Debug, Deserialize)]
struct StatsOut {
    success: u64,
    pending: u64,
    sending: u64,
    fail: u64,
}

impl From<StatsOut> for Tally {
    fn from(s: StatsOut) -> Self {
        Tally {
            delivered: s.success,
            failed: s.fail,
            pending: s.pending,
            sending: s.sending,
            ..Tally::default()
        }
    }
}

/// vow's `SourceReplayStatsOut`, for one replay's forwards. Rejected, dead-lettered and
/// uncertain ones (which wait for an operator) failed.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SourceStatsOut {
    completed: u64,
    pending: u64,
    processing: u64,
    rejected: u64,
    dead_lettered: u64,
    uncertain: u64,
}

impl From<SourceStatsOut> for Tally {
    fn from(s: SourceStatsOut) -> Self {
        Tally {
            delivered: s.completed,
            failed: s.rejected + s.dead_lettered + s.uncertain,
            pending: s.pending,
            sending: s.processing,
            ..Tally::default()
        }
    }
}

/// What `vow replay` prints with `--output json` (a dry run prints vow's `{dryRun, count}`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary<'a> {
    replay_id: &'a str,
    #[serde(flatten)]
    tally: Tally,
    /// Forwards of a source left alone: their event was being processed.
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u64>,
    /// Every requeued delivery settled while followed.
    finished: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    elapsed_ms: Option<u128>,
}

/// Replays the dead letters `args` pick and follows them (unless `--dry-run`/`--no-wait`).
pub async fn run(args: &ReplayArgs) -> anyhow::Result<()> {
    let target = Target::of(args)?;
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
    let body = ReplayIn {
        since,
        until,
        event_types: &args.event_type,
        destination: args.destination.as_deref(),
        dry_run: args.dry_run,
    };
    let replayed: ReplayOut = client
        .post(&format!("{}/replay", target.path()), &body, None)
        .await?;
    let printer = args.client.printer();
    if args.dry_run {
        return dry_run(&printer, target, &replayed);
    }
    let id = replayed
        .id
        .context("vow answered a replay without its id: is it older than this vow CLI?")?;
    let requeued = replayed.count;
    let report = Report {
        target,
        id: &id,
        skipped: replayed.skipped,
    };
    if args.no_wait {
        let tally = Tally {
            requeued,
            pending: requeued,
            ..Tally::default()
        };
        return report.print(&printer, None, tally);
    }
    let followed = progress::follow(requeued, || target.read(&client, &id)).await?;
    report.print(&printer, Some(&followed), followed.tally)
}

fn dry_run(printer: &Printer, target: Target<'_>, replayed: &ReplayOut) -> anyhow::Result<()> {
    let count = replayed.count;
    if printer.json() {
        let mut out = serde_json::json!({"dryRun": true, "count": count});
        if let Some(skipped) = replayed.skipped {
            out["skipped"] = skipped.into();
        }
        return printer.print_json(&out);
    }
    println!(
        "{} {count} dead letter{} of {} would be replayed; nothing was changed.",
        printer.paint("dry run:", Colour::Yellow),
        plural(count),
        target.name()
    );
    skipped_note(replayed.skipped);
    Ok(())
}

/// Says how many forwards a source replay left alone, if any.
fn skipped_note(skipped: Option<u64>) {
    if let Some(n @ 1..) = skipped {
        println!(
            "{n} more {} skipped: {} being processed; replay again once it settles.",
            if n == 1 { "is" } else { "are" },
            if n == 1 {
                "its event is"
            } else {
                "their events are"
            }
        );
    }
}

/// What a replay did, for its summary.
struct Report<'a> {
    target: Target<'a>,
    id: &'a str,
    skipped: Option<u64>,
}

impl Report<'_> {
    /// Prints the final counts: after following (`followed`), or right after requeueing.
    fn print(
        &self,
        printer: &Printer,
        followed: Option<&Followed>,
        tally: Tally,
    ) -> anyhow::Result<()> {
        let Report {
            target,
            id,
            skipped,
        } = *self;
        let finished = followed.is_some_and(|f| !f.interrupted);
        if printer.json() {
            let summary = Summary {
                replay_id: id,
                tally,
                skipped,
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
            let to = match target {
                Target::Endpoint { .. } => "to",
                Target::Source { .. } => "of",
            };
            let head = format!(
                "replayed {requeued} dead letter{} {to} {} ({id}):",
                plural(requeued),
                target.name()
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
            skipped_note(skipped);
        }
        if followed.is_some_and(|f| f.interrupted) {
            eprintln!(
                "Stopped following; the replay continues in vow. See it again with GET {}",
                target.progress(id)
            );
        }
        Ok(())
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
