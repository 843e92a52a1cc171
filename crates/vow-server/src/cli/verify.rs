//! `vow verify`: checks a captured request offline with the verifier vow's inbound sources use
//! ([`vow_signature::provider::verify`], the scheme built as a source's is), and says exactly
//! why it fails: a missing or malformed header (which, and how), a timestamp outside the window
//! (by how much), a wrong secret, or a changed body (from which byte, given the body expected).

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::Args;
use serde::Serialize;
use vow_signature::provider::{self, Request, Scheme, Verified, DEFAULT_TOLERANCE_SECS};
use vow_signature::{Error, ErrorKind};
use vow_store::inbound::HmacSettings;

use super::capture::{self, Captured};
use super::input;
use super::output::{Colour, OutputArgs, Printer};
use super::sign::unix_now;
use crate::http::inbound::scheme;

/// `vow verify`'s flags.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Examples:
  vow verify --scheme standard-webhooks --secret whsec_... --request captured.http
  vow verify --scheme stripe --secret whsec_... --headers h.txt --body body.json --now 1700000000
  vow verify --scheme github --secret s3cret --request r.http --expected-body original.json
  vow verify --scheme hmac --hmac '{\"header\":\"x-sig\",\"prefix\":\"sha256=\"}' --secret k --request r.http

Exit status: 0 when the request verifies, 1 when it does not (the reason is printed), 2 when
the command itself is wrong (a flag, a file, an unusable secret).")]
pub struct VerifyArgs {
    /// The signature scheme, as an inbound source names it.
    #[arg(long, value_parser = scheme_names(), value_name = "SCHEME")]
    pub scheme: String,
    /// The generic HMAC's settings, as a source's `hmac` field (JSON), with `--scheme hmac`.
    #[arg(long, value_name = "JSON")]
    pub hmac: Option<String>,
    /// A secret to verify with; repeat for several (any one matching passes, as in rotation).
    #[arg(long, required = true, value_name = "SECRET")]
    pub secret: Vec<String>,
    /// A raw HTTP request: request line, headers, a blank line, then the body.
    #[arg(long, value_name = "FILE", required_unless_present = "headers", conflicts_with_all = ["headers", "body"])]
    pub request: Option<PathBuf>,
    /// The request's headers, one `Name: value` per line.
    #[arg(long, value_name = "FILE", requires = "body")]
    pub headers: Option<PathBuf>,
    /// The request's exact body bytes.
    #[arg(long, value_name = "FILE", requires = "headers")]
    pub body: Option<PathBuf>,
    /// The full URL the request was sent to (Square and Twilio sign it; default: from the
    /// request line and `Host` of `--request`).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// How far a signed timestamp may be from now, in seconds, either way.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_TOLERANCE_SECS)]
    pub tolerance: u64,
    /// The unix time to verify at, in seconds (default: now), for a reproducible result.
    #[arg(long, value_name = "SECS")]
    pub now: Option<u64>,
    /// The body as it was sent, to tell a changed body from a wrong secret.
    #[arg(long, value_name = "FILE")]
    pub expected_body: Option<PathBuf>,
    /// How to print (`--output`).
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The schemes inbound sources verify, by the names sources are configured with.
fn scheme_names() -> PossibleValuesParser {
    let named = Scheme::NAMED.map(|s| match s {
        Scheme::StandardWebhooks => PossibleValue::new(s.as_str()).alias("svix"),
        _ => PossibleValue::new(s.as_str()),
    });
    let generic = PossibleValue::new("hmac").help("a generic HMAC, described by --hmac");
    PossibleValuesParser::new(named.into_iter().chain([generic]))
}

/// Whether the request verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It verifies.
    Valid,
    /// It does not; the reason was printed.
    Invalid,
}

/// What `vow verify` found, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    valid: bool,
    scheme: String,
    /// The failure's class: `wrong_secret`, `body_changed`, `timestamp_outside_window`,
    /// `header_missing`, `header_malformed`, `body_malformed` or `url_malformed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<&'static str>,
    message: String,
    /// The first byte offset where the body differs from `--expected-body`.
    #[serde(skip_serializing_if = "Option::is_none")]
    first_difference: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
}

/// Verifies the request `args` describe and prints why it passes or fails. An error is a
/// usage problem (exit 2), not an invalid request.
pub fn run(args: &VerifyArgs) -> anyhow::Result<Verdict> {
    let hmac = args
        .hmac
        .as_deref()
        .map(|json| serde_json::from_str::<HmacSettings>(json).context("--hmac"))
        .transpose()?
        .map(scheme::normalize);
    let scheme = scheme::parse(&args.scheme, hmac.as_ref()).map_err(|e| match e.field[..] {
        ["scheme"] => anyhow::anyhow!("--scheme: {}", e.message),
        _ => anyhow::anyhow!("--hmac: {e}"),
    })?;
    let captured = read_capture(args)?;
    let url = args.url.clone().or(captured.url).unwrap_or_default();
    let expected = args
        .expected_body
        .as_deref()
        .map(|path| input::file("--expected-body", path))
        .transpose()?;
    let check = Check {
        scheme: &scheme,
        secrets: &args.secret,
        headers: &captured.headers,
        url: &url,
        now: args.now.unwrap_or_else(unix_now),
        tolerance: args.tolerance,
    };
    let report = check.report(&captured.body, expected.as_deref())?;
    let printer = Printer::new(&args.output);
    if printer.json() {
        printer.print_json(&report)?;
    } else if report.valid {
        println!(
            "{} {}",
            printer.paint("valid:", Colour::Green),
            report.message
        );
    } else {
        println!(
            "{} {}",
            printer.paint("invalid:", Colour::Red),
            report.message
        );
    }
    Ok(if report.valid {
        Verdict::Valid
    } else {
        Verdict::Invalid
    })
}

fn read_capture(args: &VerifyArgs) -> anyhow::Result<Captured> {
    match (&args.request, &args.headers, &args.body) {
        (Some(path), _, _) => capture::request("--request", &input::file("--request", path)?),
        (None, Some(headers), Some(body)) => Ok(Captured {
            headers: capture::headers("--headers", &input::file("--headers", headers)?)?,
            body: input::file("--body", body)?,
            url: None,
        }),
        _ => bail!("give --request FILE, or --headers FILE and --body FILE"),
    }
}

/// One verification's fixed inputs; the body varies (the captured one, the expected one).
struct Check<'a> {
    scheme: &'a Scheme,
    secrets: &'a [String],
    headers: &'a Vec<(String, Vec<u8>)>,
    url: &'a str,
    now: u64,
    tolerance: u64,
}

impl Check<'_> {
    fn verify(&self, body: &[u8]) -> Result<Verified, Error> {
        let request = Request::new(self.headers, body, self.url);
        provider::verify(
            self.scheme,
            self.secrets,
            &request,
            self.now,
            self.tolerance,
        )
    }

    /// The verdict on `body`, told apart from `expected` when the signature does not match.
    fn report(&self, body: &[u8], expected: Option<&[u8]>) -> anyhow::Result<Report> {
        let difference = expected.and_then(|e| first_difference(body, e));
        let mut report = Report {
            valid: false,
            scheme: self.scheme.as_str().to_string(),
            failure: None,
            message: String::new(),
            first_difference: difference,
            timestamp: None,
            id: None,
        };
        let error = match self.verify(body) {
            Ok(verified) => {
                report.valid = true;
                report.message = self.valid_message(&verified, difference);
                report.timestamp = verified.timestamp;
                report.id = verified.id;
                return Ok(report);
            }
            Err(e) if e.kind() == ErrorKind::Misconfigured => bail!("--secret or --hmac: {e}"),
            Err(e) => e,
        };
        let (failure, message) = match &error {
            Error::MissingHeader(name) => ("header_missing", format!("header missing: `{name}`")),
            Error::MalformedHeader { header, reason } => (
                "header_malformed",
                format!("header malformed: `{header}`: {reason}"),
            ),
            Error::TimestampTooOld { .. } | Error::TimestampTooNew { .. } => (
                "timestamp_outside_window",
                format!("timestamp outside the window: {error}"),
            ),
            Error::MalformedBody(reason) => ("body_malformed", format!("body malformed: {reason}")),
            Error::MalformedUrl(reason) => ("url_malformed", format!("URL malformed: {reason}")),
            _ => self.mismatch(&error, expected, difference, body.len()),
        };
        report.failure = Some(failure);
        report.message = message;
        Ok(report)
    }

    /// A well-formed request whose signature does not match: a wrong secret, or a changed body
    /// when the signature matches the expected body instead (or the scheme's signed body hash
    /// says so).
    fn mismatch(
        &self,
        error: &Error,
        expected: Option<&[u8]>,
        difference: Option<usize>,
        len: usize,
    ) -> (&'static str, String) {
        let changed = |why: &str| match (difference, expected) {
            (Some(at), Some(e)) => format!(
                "body changed: {why}; it differs from --expected-body from byte {at} on \
                 ({len} bytes, expected {})",
                e.len()
            ),
            _ => format!("body changed: {why}"),
        };
        if matches!(error, Error::BodyHashMismatch) {
            return (
                "body_changed",
                changed("it does not match the hash that was signed"),
            );
        }
        let secrets = match self.secrets.len() {
            1 => "the secret given".to_string(),
            n => format!("any of the {n} secrets given"),
        };
        if let (Some(_), Some(expected)) = (difference, expected) {
            if self.verify(expected).is_ok() {
                return (
                    "body_changed",
                    changed("the signature matches --expected-body, not this body"),
                );
            }
        }
        let hint = match expected {
            Some(_) => "with this body and with --expected-body",
            None => {
                "(if the secret is right, the body or a signed header changed: --expected-body \
                 FILE tells which)"
            }
        };
        (
            "wrong_secret",
            format!(
                "wrong secret: the signature is well-formed but does not match {secrets} {hint}"
            ),
        )
    }

    fn valid_message(&self, verified: &Verified, difference: Option<usize>) -> String {
        let mut message = format!("the {} signature matches", self.scheme);
        if let Some(id) = &verified.id {
            message.push_str(&format!(", id {id}"));
        }
        if let Some(ts) = verified.timestamp {
            let age = self.now.abs_diff(ts);
            let when = if ts <= self.now { "old" } else { "ahead" };
            message.push_str(&format!(
                ", timestamp {ts} ({age} s {when}, window {} s)",
                self.tolerance
            ));
        }
        if let Some(at) = difference {
            message.push_str(&format!(
                "; note: the body differs from --expected-body from byte {at} on, but it is \
                 the body that was signed"
            ));
        }
        message
    }
}

/// The first offset at which `a` and `b` differ (the shorter one's length if one is a prefix
/// of the other), or `None` if they are equal.
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))
}

#[cfg(test)]
mod tests {
    use super::first_difference;

    #[test]
    fn the_first_difference_is_the_first_unequal_byte_or_where_one_ends() {
        assert_eq!(first_difference(b"abc", b"abc"), None);
        assert_eq!(first_difference(b"abc", b"abd"), Some(2));
        assert_eq!(first_difference(b"ab", b"abc"), Some(2));
        assert_eq!(first_difference(b"", b"x"), Some(0));
    }
}
