//! `vow send`: creates a message through vow's API (`POST /api/v1/app/{app}/msg`) and says
//! where it is going: the endpoints its deliveries were written for, read back from the
//! message's attempted destinations (`GET .../msg/{id}/endpoint`).

use anyhow::Context;
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::input;
use super::output::{aligned, Colour};
use super::target::ClientArgs;

/// `vow send`'s flags.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Examples:
  vow send --app app_2x0... --type order.created --data '{\"orderId\":42}'
  vow send --app my-shop --type order.created --data @order.json --idempotency-key order-42
  vow send --app my-shop --type invoice.paid --data - --channel eu --channel vip < inv.json")]
pub struct SendArgs {
    /// The application: its id (`app_…`) or its uid.
    #[arg(long, value_name = "APP")]
    pub app: String,
    /// The event type, e.g. `order.created`.
    #[arg(long = "type", value_name = "TYPE")]
    pub event_type: String,
    /// The payload, a JSON object: the text itself, `@FILE`, or `-` for standard input. Sent
    /// byte for byte as given.
    #[arg(long, value_name = "JSON|@FILE|-")]
    pub data: String,
    /// An `Idempotency-Key`: sending again with the same key creates no second message.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// A channel the message is on; repeat for several.
    #[arg(long, value_name = "CHANNEL")]
    pub channel: Vec<String>,
    /// Your own id of the event (`eventId`).
    #[arg(long, value_name = "ID")]
    pub event_id: Option<String>,
    /// Which vow, as whom, and how to print (`--url`, `--token`, `--profile`, `--output`).
    #[command(flatten)]
    pub client: ClientArgs,
}

/// Svix's `MessageIn`, as sent.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct MessageIn<'a> {
    event_type: &'a str,
    payload: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    channels: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_id: Option<&'a str>,
}

/// What `vow send` reads of `MessageOut`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageOut {
    id: String,
    event_type: String,
}

/// One page of a list answer.
#[derive(Debug, Deserialize)]
struct ListOut<T> {
    data: Vec<T>,
    done: bool,
}

/// What `vow send` reads of `MessageEndpointOut`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Destination {
    id: String,
    url: String,
    status_text: String,
}

/// What `vow send` prints with `--output json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Sent {
    id: String,
    event_type: String,
    endpoints: Vec<Destination>,
    /// Whether `endpoints` is all of them (vow answers at most 250 at once).
    complete: bool,
}

/// Sends the message `args` describe and prints its id and destinations.
pub async fn run(args: &SendArgs) -> anyhow::Result<()> {
    let data = input::data("--data", &args.data)?;
    let text = String::from_utf8(data).context("--data is not UTF-8 text")?;
    let payload: Box<RawValue> = serde_json::from_str(&text).context("--data is not JSON")?;
    let client = args.client.connect()?;
    let app = &args.app;
    let body = MessageIn {
        event_type: &args.event_type,
        payload: &payload,
        channels: (!args.channel.is_empty()).then_some(args.channel.as_slice()),
        event_id: args.event_id.as_deref(),
    };
    let message: MessageOut = client
        .post(
            &format!("/api/v1/app/{app}/msg"),
            &body,
            args.idempotency_key.as_deref(),
        )
        .await?;
    let destinations: ListOut<Destination> = client
        .get(&format!(
            "/api/v1/app/{app}/msg/{}/endpoint?limit=250",
            message.id
        ))
        .await?;
    let sent = Sent {
        id: message.id,
        event_type: message.event_type,
        endpoints: destinations.data,
        complete: destinations.done,
    };
    let printer = args.client.printer();
    if printer.json() {
        return printer.print_json(&sent);
    }
    println!(
        "{} {} ({})",
        printer.paint("sent", Colour::Green),
        sent.id,
        sent.event_type
    );
    match sent.endpoints.len() {
        0 => println!(
            "going nowhere: no enabled endpoint of {app} takes `{}` on these channels",
            sent.event_type
        ),
        1 => println!("going to 1 endpoint:"),
        n => println!("going to {n} endpoints:"),
    }
    let rows: Vec<Vec<String>> = sent
        .endpoints
        .iter()
        .map(|d| {
            vec![
                format!("  {}", d.id),
                d.url.clone(),
                printer.paint(&d.status_text, Colour::Dim),
            ]
        })
        .collect();
    print!("{}", aligned(&rows));
    if !sent.complete {
        println!("  … and more (vow lists at most 250 here)");
    }
    Ok(())
}
