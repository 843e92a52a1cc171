//! `vow tail`: a live stream of delivery attempts, or of an inbound source's activity, like
//! `stripe logs tail`.
//!
//! It follows one of vow's tail streams ([`crate::tail`]): every application's attempts with
//! the admin token, one application's with `--app` (the only choice of its portal token),
//! narrowed by `--endpoint` and `--status`; or with `--source` (the admin token) a source's
//! arrivals, forward outcomes and refusals ([`activity`]), `--status fail` keeping only
//! failures; from now or from `--since`. One aligned line per row (for an attempt: time, event
//! type, message → endpoint, status or error, milliseconds), or with `--output json` one JSON
//! object per line: `{"type": "connected"}` when a stream opens, then `{"type": "attempt", …}`
//! per attempt or `{"type": "activity", …}` per thing a source did.
//! A dropped stream is reconnected from the last row printed (vow sends again the few seconds
//! before it, in case some landed late, and what was printed is skipped), so no row is printed
//! twice or missed. Ctrl-C (or SIGTERM) stops it.
//!
//! # Layout
//! - [`activity`]: a source's activity, line by line.

pub mod activity;

use std::collections::BTreeSet;
use std::sync::Mutex;

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use clap::Args;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;
use vow_core::AttemptId;
use vow_store::inbound::activity::ActivityKey;

use super::follow::{self, Ended};
use super::output::{Colour, Printer};
use super::signal::stopped;
use super::target::{Client, ClientArgs};
use super::when;
use crate::tail::activity::{ActivityLine, ACTIVITY_EVENT};
use crate::tail::feed::Cursor;
use crate::tail::wire::{Outcome, Ready, TailEvent, ATTEMPT_EVENT, READY_EVENT};

/// How long before the newest row printed the keys printed are remembered: far longer than
/// vow goes back when a stream is resumed.
const HORIZON: chrono::TimeDelta = chrono::TimeDelta::minutes(1);

/// `vow tail`'s flags.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Examples:
  vow tail
  vow tail --app my-shop --status fail
  vow tail --app my-shop --since 10m
  vow tail --app app_2x0... --endpoint ep_2x1... --output json
  vow tail --source src_2x2... --status fail")]
#[command(group = clap::ArgGroup::new("whose").args(["app", "source"]))]
pub struct TailArgs {
    /// Only this application's attempts: its id (`app_…`) or its uid (a portal token needs it).
    #[arg(long, value_name = "APP")]
    pub app: Option<String>,
    /// Only attempts to this endpoint of `--app`: its id (`ep_…`) or its uid.
    #[arg(long, value_name = "ENDPOINT", requires = "app")]
    pub endpoint: Option<String>,
    /// Instead of attempts, this inbound source's activity (`src_…`; the admin token): each
    /// event as it arrives (received or quarantined), each forward's outcome, each refusal.
    #[arg(long, value_name = "SOURCE")]
    pub source: Option<String>,
    /// Only failed (`fail`) or only successful (`success`) attempts; with `--source`, `fail`
    /// only: refusals, quarantined events, forwards not completed.
    #[arg(long, value_name = "STATUS", value_parser = outcome)]
    pub status: Option<Outcome>,
    /// Start this far back (`90s`, `10m`, `2h`, `7d`) or at this time (RFC 3339) instead of now.
    #[arg(long, value_name = "WHEN", value_parser = since)]
    pub since: Option<DateTime<Utc>>,
    /// Which vow, as whom, and how to print (`--url`, `--token`, `--profile`, `--output`).
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `--status`'s value.
fn outcome(s: &str) -> Result<Outcome, String> {
    Outcome::parse(s).ok_or_else(|| "expected `fail` or `success`".to_string())
}

/// `--since`'s value: a time, or a span back from now.
fn since(s: &str) -> Result<DateTime<Utc>, String> {
    when::time("--since", s, Utc::now()).map_err(|e| e.to_string())
}

/// What a tail prints: one kind of row of one kind of stream.
trait Rows {
    /// A row's place in its stream.
    type Key: Cursor;
    /// A row, as the stream carries it.
    type Row: DeserializeOwned + Serialize;
    /// The stream's event name of a row.
    const EVENT: &'static str;
    /// The `type` of a row's JSON line.
    const TYPE: &'static str;
    /// `row`'s key.
    fn key(row: &Self::Row) -> Option<Self::Key>;
    /// `row`'s human line.
    fn human(printer: &Printer, row: &Self::Row) -> String;
}

/// Delivery attempts.
struct Attempts;

impl Rows for Attempts {
    type Key = AttemptId;
    type Row = TailEvent;
    const EVENT: &'static str = ATTEMPT_EVENT;
    const TYPE: &'static str = "attempt";

    fn key(row: &TailEvent) -> Option<AttemptId> {
        AttemptId::parse(&row.id).ok()
    }

    fn human(printer: &Printer, row: &TailEvent) -> String {
        human_line(printer, row)
    }
}

/// A source's activity.
struct Activity;

impl Rows for Activity {
    type Key = ActivityKey;
    type Row = ActivityLine;
    const EVENT: &'static str = ACTIVITY_EVENT;
    const TYPE: &'static str = "activity";

    fn key(row: &ActivityLine) -> Option<ActivityKey> {
        row.key.parse().ok()
    }

    fn human(printer: &Printer, row: &ActivityLine) -> String {
        activity::human_line(printer, row)
    }
}

/// Where a tail stands across its connections.
#[derive(Debug)]
struct Seen<K> {
    /// Where the first stream started: every later one starts there at the earliest.
    start: Option<String>,
    /// The newest row printed.
    last: Option<K>,
    /// The rows printed within [`HORIZON`] of `last`.
    printed: BTreeSet<K>,
}

impl<K> Default for Seen<K> {
    fn default() -> Self {
        Self {
            start: None,
            last: None,
            printed: BTreeSet::new(),
        }
    }
}

impl<K: Cursor> Seen<K> {
    /// Whether `key` was not printed yet; from now on it was.
    fn first_time(&mut self, key: K) -> bool {
        if !self.printed.insert(key.clone()) {
            return false;
        }
        let newest = match self.last.take() {
            Some(last) => last.max(key),
            None => key,
        };
        let horizon = K::first_at(newest.made_at() - HORIZON);
        self.last = Some(newest);
        self.printed = self.printed.split_off(&horizon);
        true
    }
}

/// Runs `vow tail` until Ctrl-C or SIGTERM.
pub async fn run(args: &TailArgs) -> anyhow::Result<()> {
    let Some(source) = &args.source else {
        let path = match &args.app {
            Some(app) => format!("/api/v1/app/{app}/attempt/stream"),
            None => "/api/v1/attempt/stream".to_string(),
        };
        let mut query = Vec::new();
        if let Some(endpoint) = &args.endpoint {
            query.push(("endpoint", endpoint.clone()));
        }
        if let Some(status) = args.status {
            query.push(("status", status.as_str().to_string()));
        }
        let what = args.app.as_deref().unwrap_or("every application");
        let tail = Tail {
            path,
            query,
            what: format!("the attempts of {what}"),
        };
        return tail.run::<Attempts>(args).await;
    };
    let mut query = Vec::new();
    match args.status {
        Some(Outcome::Fail) => query.push(("status", "fail".to_string())),
        Some(Outcome::Success) => bail!("--source takes only `--status fail`"),
        None => {}
    }
    let tail = Tail {
        path: format!("/api/v1/source/{source}/event/stream"),
        query,
        what: format!("the activity of source {source}"),
    };
    tail.run::<Activity>(args).await
}

/// One tail: which stream, with which query, described how.
struct Tail {
    path: String,
    query: Vec<(&'static str, String)>,
    what: String,
}

impl Tail {
    /// Follows the stream, reconnecting, until Ctrl-C or SIGTERM.
    async fn run<R: Rows>(&self, args: &TailArgs) -> anyhow::Result<()> {
        let client = args.client.connect()?;
        let printer = args.client.printer();
        let seen = Mutex::new(Seen::<R::Key>::default());
        let since = args.since.map(|t| R::Key::first_at(t).to_string());
        let connection = || self.stream::<R>(&client, since.clone(), &printer, &seen);
        let tailing = async {
            // A first stream vow refuses, or that cannot be opened, is the command's error.
            match connection().await {
                Ok(Ended::Refused(status, why)) => return Err(follow::refused(status, &why)),
                Err(e) if lock(&seen).start.is_none() => return Err(e),
                _ => {}
            }
            follow::reconnecting(&printer, connection).await
        };
        tokio::select! {
            result = tailing => result,
            () = stopped() => Ok(()),
        }
    }

    /// One connection of the stream: prints each row not printed yet until the stream ends.
    async fn stream<R: Rows>(
        &self,
        client: &Client,
        since: Option<String>,
        printer: &Printer,
        seen: &Mutex<Seen<R::Key>>,
    ) -> anyhow::Result<Ended> {
        let mut query = self.query.clone();
        let mut request = client.request(Method::GET, &self.path);
        {
            let seen = lock(seen);
            if let Some(after) = seen.start.clone().or(since) {
                query.push(("after", after));
            }
            if let Some(last) = &seen.last {
                request = request.header("last-event-id", last.to_string());
            }
        }
        let request = request.query(&query);
        follow::connect(client, request, |event| {
            match event.name.as_str() {
                READY_EVENT => {
                    let ready: Ready = serde_json::from_str(&event.data)
                        .context("vow sent a start this vow cannot read")?;
                    let mut seen = lock(seen);
                    if printer.json() {
                        printer.print_json(&serde_json::json!({ "type": "connected" }))?;
                    } else if seen.start.is_none() {
                        let line = format!("Tailing {} (Ctrl-C stops).", self.what);
                        eprintln!("{}", printer.paint(&line, Colour::Dim));
                    }
                    seen.start.get_or_insert(ready.after);
                }
                name if name == R::EVENT => {
                    let row: R::Row = serde_json::from_str(&event.data)
                        .with_context(|| format!("vow sent {name} this vow cannot read"))?;
                    let key = R::key(&row).with_context(|| {
                        format!("vow sent {name} with a key this vow cannot read")
                    })?;
                    if lock(seen).first_time(key) {
                        print_line::<R>(printer, &row)?;
                    }
                }
                _ => {}
            }
            Ok(())
        })
        .await
    }
}

fn lock<K>(seen: &Mutex<Seen<K>>) -> std::sync::MutexGuard<'_, Seen<K>> {
    seen.lock().unwrap_or_else(|p| p.into_inner())
}

/// A row as a JSON line: `{"type": "attempt", …}`.
#[derive(Serialize)]
struct Line<'a, T> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    row: &'a T,
}

/// One line per row: JSON, or its human line.
fn print_line<R: Rows>(printer: &Printer, row: &R::Row) -> anyhow::Result<()> {
    if printer.json() {
        return printer.print_json(&Line { kind: R::TYPE, row });
    }
    println!("{}", R::human(printer, row));
    Ok(())
}

/// The human line of `attempt`: time, event type, message → endpoint, status (or error), ms,
/// and which attempt it was and when the next comes, when it is not the first or there is one.
fn human_line(printer: &Printer, attempt: &TailEvent) -> String {
    let colour = if attempt.outcome.success() {
        Colour::Green
    } else {
        Colour::Red
    };
    // A status code, or `error` with the reason at the end, so the columns stay aligned.
    let mut after = Vec::new();
    let status = match (attempt.status, &attempt.error) {
        (Some(status), _) => status.to_string(),
        (None, error) => {
            after.push(error.clone().unwrap_or_else(|| "no response".into()));
            "error".to_string()
        }
    };
    if attempt.attempt > 1 {
        after.push(format!("attempt {}", attempt.attempt));
    }
    if let Some(next) = attempt.next_attempt {
        after.push(format!("next {}", next.format("%H:%M:%S")));
    }
    let after = if after.is_empty() {
        String::new()
    } else {
        printer.paint(&format!("  ({})", after.join(", ")), Colour::Dim)
    };
    format!(
        "{}  {:<24}  {} → {}  {}  {:>5} ms{after}",
        attempt.time.format("%H:%M:%S%.3f"),
        attempt.event_type,
        attempt.msg_id,
        attempt.endpoint_id,
        printer.paint(&format!("{status:<5}"), colour),
        attempt.ms,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_is_printed_once_however_often_it_comes() {
        let mut seen = Seen::<AttemptId>::default();
        let (a, b) = (AttemptId::new(), AttemptId::new());
        assert!(seen.first_time(b));
        assert!(seen.first_time(a), "an older one that came late");
        assert!(!seen.first_time(a) && !seen.first_time(b));
        assert_eq!(seen.last, Some(b));
    }

    #[test]
    fn a_line_says_status_or_error_then_attempt_and_next_try_in_aligned_columns() {
        use crate::cli::output::Format;
        use chrono::TimeZone;
        let at = |s| Utc.with_ymd_and_hms(2026, 1, 2, 10, 42, s).unwrap();
        let attempt = TailEvent {
            id: "atmpt_1".into(),
            time: at(7),
            app_id: "app_1".into(),
            endpoint_id: "ep_1".into(),
            url: "https://example.com/hook".into(),
            msg_id: "msg_1".into(),
            event_type: "order.paid".into(),
            status: Some(500),
            error: None,
            outcome: Outcome::Fail,
            ms: 12,
            attempt: 2,
            next_attempt: Some(at(39)),
        };
        let printer = Printer::with(Format::Human, false);
        let pad = " ".repeat(14);
        assert_eq!(
            human_line(&printer, &attempt),
            format!("10:42:07.000  order.paid{pad}  msg_1 → ep_1  500       12 ms  (attempt 2, next 10:42:39)")
        );
        let refused = TailEvent {
            status: None,
            error: Some("connection refused".into()),
            attempt: 1,
            next_attempt: None,
            ..attempt
        };
        assert_eq!(
            human_line(&printer, &refused),
            format!("10:42:07.000  order.paid{pad}  msg_1 → ep_1  error     12 ms  (connection refused)")
        );
    }

    #[test]
    fn what_was_printed_long_before_the_newest_is_forgotten() {
        let mut seen = Seen::<AttemptId>::default();
        let old = AttemptId::first_at(Utc::now() - HORIZON * 2);
        assert!(seen.first_time(old));
        assert!(seen.first_time(AttemptId::new()));
        assert!(!seen.printed.contains(&old));
    }
}
