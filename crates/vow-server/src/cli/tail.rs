//! `vow tail`: a live stream of delivery attempts, like `stripe logs tail`.
//!
//! It follows vow's attempt stream ([`crate::tail`]): every application's attempts with the
//! admin token, one application's with `--app` (the only choice of its portal token), narrowed
//! by `--endpoint` and `--status`, from now or from `--since`. One aligned line per attempt (time, event type, message →
//! endpoint, status or error, milliseconds), or with `--output json` one JSON object per line:
//! `{"type": "connected"}` when a stream opens, then `{"type": "attempt", …}` per attempt.
//! A dropped stream is reconnected from the last attempt printed (vow sends again the few
//! seconds before it, in case some landed late, and what was printed is skipped), so no
//! attempt is printed twice or missed. Ctrl-C (or SIGTERM) stops it.

use std::collections::BTreeSet;
use std::sync::Mutex;

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::Args;
use reqwest::Method;
use serde::Serialize;
use vow_core::AttemptId;

use super::follow::{self, Ended};
use super::output::{Colour, Printer};
use super::signal::stopped;
use super::target::{Client, ClientArgs};
use super::when;
use crate::tail::wire::{Outcome, Ready, TailEvent, ATTEMPT_EVENT, READY_EVENT};

/// How long before the newest attempt printed the ids printed are remembered: far longer than
/// vow goes back when a stream is resumed.
const HORIZON: chrono::TimeDelta = chrono::TimeDelta::minutes(1);

/// `vow tail`'s flags.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Examples:
  vow tail
  vow tail --app my-shop --status fail
  vow tail --app my-shop --since 10m
  vow tail --app app_2x0... --endpoint ep_2x1... --output json")]
pub struct TailArgs {
    /// Only this application's attempts: its id (`app_…`) or its uid (a portal token needs it).
    #[arg(long, value_name = "APP")]
    pub app: Option<String>,
    /// Only attempts to this endpoint of `--app`: its id (`ep_…`) or its uid.
    #[arg(long, value_name = "ENDPOINT", requires = "app")]
    pub endpoint: Option<String>,
    /// Only failed (`fail`) or only successful (`success`) attempts.
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

/// Where a tail stands across its connections.
#[derive(Debug, Default)]
struct Seen {
    /// Where the first stream started: every later one starts there at the earliest.
    start: Option<String>,
    /// The newest attempt printed.
    last: Option<AttemptId>,
    /// The attempts printed within [`HORIZON`] of `last`.
    printed: BTreeSet<AttemptId>,
}

impl Seen {
    /// Whether `id` was not printed yet; from now on it was.
    fn first_time(&mut self, id: AttemptId) -> bool {
        if !self.printed.insert(id) {
            return false;
        }
        let last = *self.last.insert(self.last.map_or(id, |last| last.max(id)));
        self.printed = self
            .printed
            .split_off(&AttemptId::first_at(last.made_at() - HORIZON));
        true
    }
}

/// Runs `vow tail` until Ctrl-C or SIGTERM.
pub async fn run(args: &TailArgs) -> anyhow::Result<()> {
    let client = args.client.connect()?;
    let printer = args.client.printer();
    let seen = Mutex::new(Seen::default());
    let connection = || stream(&client, args, &printer, &seen);
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

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|p| p.into_inner())
}

/// One connection of the stream: prints each attempt not printed yet until the stream ends.
async fn stream(
    client: &Client,
    args: &TailArgs,
    printer: &Printer,
    seen: &Mutex<Seen>,
) -> anyhow::Result<Ended> {
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
    let mut request = client.request(Method::GET, &path);
    {
        let seen = lock(seen);
        let start = seen.start.clone();
        let since = args.since.map(|t| AttemptId::first_at(t).to_string());
        if let Some(after) = start.or(since) {
            query.push(("after", after));
        }
        if let Some(last) = seen.last {
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
                    let what = args.app.as_deref().unwrap_or("every application");
                    eprintln!(
                        "{}",
                        printer.paint(
                            &format!("Tailing the attempts of {what} (Ctrl-C stops)."),
                            Colour::Dim
                        )
                    );
                }
                seen.start.get_or_insert(ready.after);
            }
            ATTEMPT_EVENT => {
                let attempt: TailEvent = serde_json::from_str(&event.data)
                    .context("vow sent an attempt this vow cannot read")?;
                let id = AttemptId::parse(&attempt.id)
                    .context("vow sent an attempt with an id this vow cannot read")?;
                if lock(seen).first_time(id) {
                    print_line(printer, &attempt)?;
                }
            }
            _ => {}
        }
        Ok(())
    })
    .await
}

/// An attempt as a JSON line: `{"type": "attempt", …}`.
#[derive(Serialize)]
struct Line<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    attempt: &'a TailEvent,
}

/// One line per attempt: time, event type, message → endpoint, status (or error), ms, and
/// which attempt it was and when the next comes, when it is not the first or there is one.
fn print_line(printer: &Printer, attempt: &TailEvent) -> anyhow::Result<()> {
    if printer.json() {
        return printer.print_json(&Line {
            kind: "attempt",
            attempt,
        });
    }
    println!("{}", human_line(printer, attempt));
    Ok(())
}

/// The human line of `attempt`.
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
        let mut seen = Seen::default();
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
        let mut seen = Seen::default();
        let old = AttemptId::first_at(Utc::now() - HORIZON * 2);
        assert!(seen.first_time(old));
        assert!(seen.first_time(AttemptId::new()));
        assert!(!seen.printed.contains(&old));
    }
}
