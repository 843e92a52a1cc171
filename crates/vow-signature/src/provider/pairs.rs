//! Timestamped `key=value` signature headers: Stripe
//! (`Stripe-Signature: t=…,v1=…`), Paddle (`Paddle-Signature: ts=…;h1=…`)
//! and seed 003 (`x-signature: t=…,v1=…`).
//!
//! All three sign `timestamp ‖ joiner ‖ body` with HMAC-SHA256 keyed by the
//! secret text as configured, in lowercase hex, and may carry several
//! signature entries while a secret rolls over: any entry matching any
//! secret passes. The parser and verifier here are the only implementation;
//! [`crate::seed::timestamped`] delegates to them.

use crate::error::Error;
use crate::header::{check_tolerance, header_str, parse_timestamp, X_SIGNATURE};
use crate::provider::{Headers, Request, Verified};
use crate::seed::decode_hex_mac;
use crate::seed::timestamped::ParsedSignature;
use crate::symmetric::Digest;

/// The shape of one scheme's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PairFormat {
    /// Lowercase header name.
    header: &'static str,
    /// Separates `key=value` entries.
    separator: char,
    /// Key of the timestamp entry.
    timestamp_key: &'static str,
    /// Key of a signature entry (others are ignored).
    signature_key: &'static str,
    /// Signed between the timestamp and the body.
    joiner: &'static str,
}

/// Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=…][,v0=…]`, signed `t.body`.
pub(crate) const STRIPE: PairFormat = PairFormat {
    header: "stripe-signature",
    separator: ',',
    timestamp_key: "t",
    signature_key: "v1",
    joiner: ".",
};

/// Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=…]`, signed `ts:body`.
pub(crate) const PADDLE: PairFormat = PairFormat {
    header: "paddle-signature",
    separator: ';',
    timestamp_key: "ts",
    signature_key: "h1",
    joiner: ":",
};

/// Seed 003: `x-signature: t=<unix>,v1=<hex>`, signed `t.body`.
pub(crate) const SEED: PairFormat = PairFormat {
    header: X_SIGNATURE,
    ..STRIPE
};

/// Parses a header of `format`. Entries are `key=value` (surrounding spaces
/// tolerated, unknown keys and entries without `=` ignored). Fails if the
/// timestamp is missing, repeated or not an unsigned integer, or if there
/// is no signature entry at all. Undecodable signature values are dropped:
/// they cannot match.
pub(crate) fn parse(format: &PairFormat, raw: &[u8]) -> Result<ParsedSignature, Error> {
    let malformed = |reason| Error::MalformedHeader {
        header: format.header.into(),
        reason,
    };
    let text = header_str(format.header, raw)?;
    let mut timestamp = None;
    let mut signatures = Vec::new();
    let mut saw_signature = false;
    for part in text.split(format.separator) {
        let Some((key, value)) = part.trim().split_once('=') else {
            continue;
        };
        if key == format.timestamp_key {
            if timestamp.is_some() {
                return Err(malformed("repeated timestamp entry"));
            }
            timestamp = Some(parse_timestamp(format.header, value.as_bytes())?);
        } else if key == format.signature_key {
            saw_signature = true;
            signatures.extend(decode_hex_mac(value));
        }
    }
    let timestamp = timestamp.ok_or_else(|| malformed("no timestamp entry"))?;
    if !saw_signature {
        return Err(malformed("no signature entry"));
    }
    Ok(ParsedSignature {
        timestamp,
        signatures,
    })
}

/// Verifies the header value `raw` over `body` with any of the secret texts
/// `keys`, as of `now`; returns the signed timestamp. Checks, in order:
/// present, well-formed, within the tolerance (both directions), a match.
pub(crate) fn verify(
    format: &PairFormat,
    keys: &[&[u8]],
    raw: Option<&[u8]>,
    body: &[u8],
    now: u64,
    tolerance_secs: u64,
) -> Result<u64, Error> {
    let raw = raw.ok_or(Error::MissingHeader(format.header.into()))?;
    let parsed = parse(format, raw)?;
    check_tolerance(parsed.timestamp, now, tolerance_secs)?;
    let t = parsed.timestamp.to_string();
    let parts: [&[u8]; 3] = [t.as_bytes(), format.joiner.as_bytes(), body];
    let candidates: Vec<&[u8]> = parsed.signatures.iter().map(|s| &s[..]).collect();
    if Digest::Sha256.any_matches(keys, &parts, &candidates) {
        Ok(parsed.timestamp)
    } else {
        Err(Error::NoMatchingSignature)
    }
}

/// [`verify`] over a request, for the provider entry point.
pub(crate) fn verify_request<H: Headers + ?Sized>(
    format: &PairFormat,
    keys: &[&[u8]],
    request: &Request<'_, H>,
    now: u64,
    tolerance_secs: u64,
) -> Result<Verified, Error> {
    let raw = request.header(format.header);
    let timestamp = verify(format, keys, raw, request.body(), now, tolerance_secs)?;
    Ok(Verified {
        timestamp: Some(timestamp),
        id: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIG: &str = "eb4d0dc8853be92b7f063b9f3ba5233eb920a09459b6e6b2c26705b4364db151";

    #[test]
    fn parses_paddle_semicolons_and_keeps_every_h1_entry() {
        let header = format!("ts=1671552777;h1={SIG};h1={}", "0".repeat(64));
        let parsed = parse(&PADDLE, header.as_bytes()).unwrap();
        assert_eq!(parsed.timestamp, 1_671_552_777);
        assert_eq!(parsed.signatures.len(), 2);
        // Stripe's comma form is not Paddle's.
        let stripe_like = format!("ts=1671552777,h1={SIG}");
        assert!(parse(&PADDLE, stripe_like.as_bytes()).is_err());
    }

    #[test]
    fn stripe_ignores_v0_entries_and_unknown_keys() {
        let header = format!("t=1492774577,v0={SIG},scheme=x,v1={SIG}");
        let parsed = parse(&STRIPE, header.as_bytes()).unwrap();
        assert_eq!(parsed.signatures.len(), 1);
        let only_v0 = format!("t=1492774577,v0={SIG}");
        assert_eq!(
            parse(&STRIPE, only_v0.as_bytes()),
            Err(Error::MalformedHeader {
                header: "stripe-signature".into(),
                reason: "no signature entry"
            })
        );
    }

    #[test]
    fn errors_name_the_header_of_the_format() {
        assert_eq!(
            verify(&PADDLE, &[b"k"], None, b"", 0, 300),
            Err(Error::MissingHeader("paddle-signature".into()))
        );
        assert!(matches!(
            parse(&SEED, b"t=x,v1=00"),
            Err(Error::MalformedHeader { header, .. }) if header == "x-signature"
        ));
    }

    #[test]
    fn the_joiner_is_part_of_the_signed_content() {
        let mac = crate::symmetric::hmac_sha256(b"k", &[b"5:body"]);
        let header = format!("ts=5;h1={}", hex::encode(mac));
        assert_eq!(
            verify(&PADDLE, &[b"k"], Some(header.as_bytes()), b"body", 5, 0),
            Ok(5)
        );
        let stripe = format!("t=5,v1={}", hex::encode(mac));
        assert_eq!(
            verify(&STRIPE, &[b"k"], Some(stripe.as_bytes()), b"body", 5, 0),
            Err(Error::NoMatchingSignature)
        );
    }
}
