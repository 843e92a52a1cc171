//! `vow listen <local-url>`: deliveries of an application, or the forwarded events of an inbound
//! source (`--source`), relayed to a URL on this machine, with no public URL ([`crate::relay`]).
//!
//! It creates a relay endpoint (`POST /api/v1/app/{app}/listen`, with `--events` and
//! `--channel` as its filters) or a source's relay destination (`POST
//! /api/v1/source/{source}/listen`), prints its signing secret, and streams its deliveries
//! (server-sent events). Each is posted to the local URL with the exact bytes and headers vow
//! signed, many at once; the local answers (status, time, start of the body) go back to vow in
//! batches, where each is the attempt's outcome: a local 500 is retried on vow's schedule. One
//! line per delivery. A dropped stream is reconnected with backoff (vow keeps what arrives
//! meanwhile and sends it on reconnect); Ctrl-C (or SIGTERM) deletes the relay endpoint (or
//! destination).
//!
//! # Layout
//! - [`local`]: one delivery posted to the local URL, and its answer as a result.

pub mod local;

use std::sync::Arc;

use anyhow::Context;
use chrono::Utc;
use clap::{ArgGroup, Args};
use reqwest::Method;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::follow::{self, Ended};
use super::output::{Colour, Printer};
use super::signal::stopped;
use super::target::{Client, ClientArgs};
use crate::relay::wire::{Answer, RelayResult, Relayed, DELIVERY_EVENT, READY_EVENT};

/// Results posted to vow per request at most.
const RESULT_BATCH: usize = 512;

/// `vow listen`'s flags.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("relayed").required(true).args(["app", "source"])))]
#[command(after_help = "\
Examples:
  vow listen http://localhost:3000/webhooks --app my-shop
  vow listen http://localhost:3000/webhooks --app app_2x0... --events order.created,order.paid
  vow listen http://127.0.0.1:8000/hook --app my-shop --channel eu --output json
  vow listen http://localhost:3000/stripe --source src_2x0...")]
pub struct ListenArgs {
    /// Where deliveries are posted on this machine, e.g. http://localhost:3000/webhooks.
    #[arg(value_name = "LOCAL_URL")]
    pub local_url: String,
    /// The application: its id (`app_…`) or its uid.
    #[arg(long, value_name = "APP")]
    pub app: Option<String>,
    /// An inbound source instead (`src_…`): its forwarded events, as its destinations get them.
    #[arg(long, value_name = "SOURCE", conflicts_with_all = ["events", "channel"])]
    pub source: Option<String>,
    /// Only these event types (comma-separated, or repeat the flag).
    #[arg(long, value_name = "TYPES", value_delimiter = ',')]
    pub events: Vec<String>,
    /// Only messages on these channels (comma-separated, or repeat the flag).
    #[arg(long, value_name = "CHANNELS", value_delimiter = ',')]
    pub channel: Vec<String>,
    /// Which vow, as whom, and how to print (`--url`, `--token`, `--profile`, `--output`).
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `ListenIn`, as sent.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ListenIn<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    event_types: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channels: Option<&'a [String]>,
    description: String,
}

/// `ListenOut`, as read: a relay endpoint's, or a source's relay destination's.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListenOut {
    endpoint_id: Option<String>,
    destination_id: Option<String>,
    secret: String,
    stream: String,
    results: String,
}

/// What is relayed: an application's deliveries, or a source's forwarded events.
enum Scope {
    App(String),
    Source(String),
}

impl Scope {
    fn of(args: &ListenArgs) -> anyhow::Result<Self> {
        match (&args.app, &args.source) {
            (Some(app), _) => Ok(Self::App(app.clone())),
            (None, Some(source)) => Ok(Self::Source(source.clone())),
            (None, None) => anyhow::bail!("say what to listen to: --app APP or --source SOURCE"),
        }
    }

    /// Where a session is created.
    fn create(&self) -> String {
        match self {
            Self::App(app) => format!("/api/v1/app/{app}/listen"),
            Self::Source(source) => format!("/api/v1/source/{source}/listen"),
        }
    }

    /// The relay target's id, and where it is deleted.
    fn created(&self, session: &ListenOut) -> anyhow::Result<(String, String)> {
        let id = session
            .endpoint_id
            .as_ref()
            .or(session.destination_id.as_ref());
        let id = id
            .context("vow answered a listen session with no id")?
            .clone();
        let delete = match self {
            Self::App(app) => format!("/api/v1/app/{app}/endpoint/{id}"),
            Self::Source(source) => format!("/api/v1/source/{source}/listen/{id}"),
        };
        Ok((id, delete))
    }

    /// What the relay target is called.
    fn what(&self) -> &'static str {
        match self {
            Self::App(_) => "relay endpoint",
            Self::Source(_) => "relay destination",
        }
    }
}

/// Runs `vow listen` until Ctrl-C or SIGTERM, then deletes the relay endpoint (or destination).
pub async fn run(args: &ListenArgs) -> anyhow::Result<()> {
    let local = local::Target::new(&args.local_url)?;
    let client = args.client.connect()?;
    let printer = args.client.printer();
    let scope = Scope::of(args)?;
    let session: ListenOut = match &scope {
        Scope::App(_) => {
            let body = ListenIn {
                event_types: nonempty(&args.events),
                channels: nonempty(&args.channel),
                description: format!("vow listen → {}", args.local_url),
            };
            client.post(&scope.create(), &body, None).await?
        }
        Scope::Source(_) => {
            let body = serde_json::json!({});
            client.post(&scope.create(), &body, None).await?
        }
    };
    let (id, delete) = scope.created(&session)?;
    announce(&printer, args, &scope, &id, &session)?;
    let session = Arc::new(session);
    let relaying = relay(client.clone(), session.clone(), local, printer);
    tokio::select! {
        result = relaying => result?,
        () = stopped() => {},
    }
    client
        .send(client.request(Method::DELETE, &delete), &delete)
        .await
        .with_context(|| format!("deleting the {}", scope.what()))?;
    if !printer.json() {
        eprintln!("Stopped: {} {id} deleted.", scope.what());
    }
    Ok(())
}

/// `v`, or `None` when it is empty (no filter).
fn nonempty(v: &[String]) -> Option<&[String]> {
    (!v.is_empty()).then_some(v)
}

/// Says what is relayed where, and the secret the local app verifies with.
fn announce(
    printer: &Printer,
    args: &ListenArgs,
    scope: &Scope,
    id: &str,
    session: &ListenOut,
) -> anyhow::Result<()> {
    if printer.json() {
        let key = match scope {
            Scope::App(_) => "endpointId",
            Scope::Source(_) => "destinationId",
        };
        let mut line = serde_json::json!({
            "type": "listening",
            "secret": session.secret,
            "localUrl": args.local_url,
        });
        line[key] = id.into();
        return printer.print_json(&line);
    }
    let what = match scope {
        Scope::App(app) => format!("deliveries of {app}"),
        Scope::Source(source) => format!("forwarded events of source {source}"),
    };
    println!(
        "Relaying {what} to {} ({} {id}).",
        args.local_url,
        scope.what()
    );
    println!("Signing secret: {}", session.secret);
    let stop = format!("Ctrl-C stops and deletes the {}.", scope.what());
    println!("{}", printer.paint(&stop, Colour::Dim));
    Ok(())
}

/// Streams deliveries and relays them, reconnecting with backoff when the stream drops. Ends
/// only with an error vow will keep giving (the relay endpoint is gone, the token refused).
async fn relay(
    client: Client,
    session: Arc<ListenOut>,
    local: local::Target,
    printer: Printer,
) -> anyhow::Result<()> {
    let (results, rx) = mpsc::unbounded_channel();
    tokio::spawn(report(client.clone(), session.clone(), rx));
    follow::reconnecting(&printer, || {
        stream(&client, &session, &local, &printer, &results)
    })
    .await
}

/// One connection of the stream: relays each delivery as it arrives until the stream ends.
async fn stream(
    client: &Client,
    session: &ListenOut,
    local: &local::Target,
    printer: &Printer,
    results: &mpsc::UnboundedSender<RelayResult>,
) -> anyhow::Result<Ended> {
    let request = client.request(Method::GET, &session.stream);
    follow::connect(client, request, |event| {
        match event.name.as_str() {
            READY_EVENT if printer.json() => {
                printer.print_json(&serde_json::json!({ "type": "connected" }))?;
            }
            READY_EVENT => eprintln!("{}", printer.paint("Connected.", Colour::Green)),
            DELIVERY_EVENT => {
                let relayed: Relayed = serde_json::from_str(&event.data)
                    .context("vow sent a delivery this vow cannot read")?;
                let (local, printer, results) = (local.clone(), *printer, results.clone());
                tokio::spawn(async move {
                    let result = local.post(&relayed).await;
                    print_line(&printer, &relayed, &result);
                    let _ = results.send(result);
                });
            }
            _ => {}
        }
        Ok(())
    })
    .await
}

/// Posts results to vow in batches while deliveries keep coming. A batch that cannot be
/// posted is dropped: its attempts time out at vow and are retried on its schedule.
async fn report(
    client: Client,
    session: Arc<ListenOut>,
    mut rx: mpsc::UnboundedReceiver<RelayResult>,
) {
    let mut batch = Vec::with_capacity(RESULT_BATCH);
    while rx.recv_many(&mut batch, RESULT_BATCH).await > 0 {
        let request = client.request(Method::POST, &session.results).json(&batch);
        if let Err(e) = client.send(request, &session.results).await {
            eprintln!("Reporting {} result(s) to vow failed: {e:#}", batch.len());
        }
        batch.clear();
    }
}

/// One line per delivery: time, event type, message id, attempt → status (or error), ms.
fn print_line(printer: &Printer, relayed: &Relayed, result: &RelayResult) {
    let time = Utc::now().format("%H:%M:%S%.3f").to_string();
    if printer.json() {
        let (status, error) = match &result.answer {
            Answer::Response { status, .. } => (Some(*status), None),
            Answer::Failed { reason, .. } => (None, Some(reason.as_str())),
        };
        let _ = printer.print_json(&serde_json::json!({
            "type": "delivery",
            "time": time,
            "eventType": relayed.event_type,
            "msgId": relayed.msg_id,
            "attempt": relayed.attempt,
            "status": status,
            "error": error,
            "ms": result.ms,
        }));
        return;
    }
    let outcome = match &result.answer {
        Answer::Response { status, .. } if (200..300).contains(status) => {
            printer.paint(&status.to_string(), Colour::Green)
        }
        Answer::Response { status, .. } => printer.paint(&status.to_string(), Colour::Red),
        Answer::Failed { reason, .. } => printer.paint(reason, Colour::Red),
    };
    let attempt = match relayed.attempt {
        1 => String::new(),
        n => printer.paint(&format!(" (attempt {n})"), Colour::Dim),
    };
    println!(
        "{time}  {}  {}{attempt} → {outcome}  {} ms",
        relayed.event_type, relayed.msg_id, result.ms
    );
}
