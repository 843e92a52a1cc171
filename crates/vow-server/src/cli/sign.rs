//! `vow sign`: the signature headers vow would send with a body, for testing a receiver
//! without a running vow. The signing is the delivery workers' own
//! ([`signature_headers`]), so what this prints is what vow sends.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use vow_core::{MessageId, SignatureStyle};

use super::input;
use super::output::{OutputArgs, Printer};
use crate::delivery::request::signature_headers;

/// `vow sign`'s flags.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Examples:
  vow sign --secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw --data '{\"type\":\"ping\"}'
  vow sign --secret whsec_... --data @body.json --id msg_1 --timestamp 1700000000 -o json
  vow sign --style timestamped --secret my-secret-text --data - < body.json

Human output is one `name: value` line per header, ready for `curl -H`.")]
pub struct SignArgs {
    /// The signing secret; repeat it to sign with several (rotation: the current one first).
    /// Standard Webhooks takes `whsec_` secrets (`v1`) and `whsk_` ed25519 keys (`v1a`); the
    /// seed styles key their HMAC with the secret's text as written (`timestamped` adds a `v1=`
    /// per secret, `sha256` uses the first) and refuse `whsk_` keys.
    #[arg(long, required = true, value_name = "SECRET")]
    pub secret: Vec<String>,
    /// The body: the text itself, `@FILE` for a file's bytes, or `-` for standard input.
    #[arg(long, value_name = "TEXT|@FILE|-")]
    pub data: String,
    /// The message id to sign (default: a new `msg_` id).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// The unix timestamp to sign, in seconds (default: now).
    #[arg(long, value_name = "SECS")]
    pub timestamp: Option<u64>,
    /// The signature style, as an endpoint's `signatureStyle` names it.
    #[arg(long, default_value = "standard-webhooks", value_parser = style_names(), value_name = "STYLE")]
    pub style: String,
    /// How to print (`--output`).
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The styles vow sends, by the names endpoints are configured with.
fn style_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(SignatureStyle::ALL.map(SignatureStyle::as_str))
}

/// Prints the headers `args` ask for.
pub fn run(args: &SignArgs) -> anyhow::Result<()> {
    let style: SignatureStyle = args.style.parse()?;
    let body = input::data("--data", &args.data)?;
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| MessageId::new().to_string());
    let timestamp = args.timestamp.unwrap_or_else(unix_now);
    let headers = signature_headers(style, &args.secret, &id, timestamp, &body)
        .map_err(|e| anyhow::anyhow!("--secret: {e}"))?;
    let printer = Printer::new(&args.output);
    if printer.json() {
        let object: BTreeMap<&str, &str> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        printer.print_json(&object)
    } else {
        for (name, value) in &headers {
            println!("{name}: {value}");
        }
        Ok(())
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
