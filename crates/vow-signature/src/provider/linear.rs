//! Linear: `Linear-Signature: <hex HMAC-SHA256(body)>`, and the replay
//! window from `webhookTimestamp` (unix **milliseconds**) inside the JSON
//! body.
//!
//! The order is Linear SDK's: the MAC first (so only an authentic body is
//! parsed), then the timestamp, against the tolerance in both directions.
//! A signed body without a numeric top-level `webhookTimestamp` is a bad
//! request: Linear always sends one.

use crate::header::check_tolerance;
use crate::provider::hmac::{self, LINEAR};
use crate::provider::{Error, Headers, Request, Verified};

/// Name of the body field holding the send time in milliseconds.
const WEBHOOK_TIMESTAMP: &str = "webhookTimestamp";

pub(crate) fn verify<H: Headers + ?Sized>(
    keys: &[&[u8]],
    request: &Request<'_, H>,
    now: u64,
    tolerance_secs: u64,
) -> Result<Verified, Error> {
    hmac::verify(&LINEAR, keys, request, now, tolerance_secs)?;
    let timestamp = webhook_timestamp_ms(request.body())? / 1000;
    check_tolerance(timestamp, now, tolerance_secs)?;
    Ok(Verified {
        timestamp: Some(timestamp),
        id: None,
    })
}

/// The top-level `webhookTimestamp` of a JSON object body.
fn webhook_timestamp_ms(body: &[u8]) -> Result<u64, Error> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| Error::MalformedBody("not JSON"))?;
    value
        .get(WEBHOOK_TIMESTAMP)
        .ok_or(Error::MalformedBody("no `webhookTimestamp`"))?
        .as_u64()
        .ok_or(Error::MalformedBody(
            "`webhookTimestamp` is not an unsigned integer",
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_top_level_millisecond_timestamp_only() {
        let body = br#"{"data":{"webhookTimestamp":1},"webhookTimestamp":1700000000123}"#;
        assert_eq!(webhook_timestamp_ms(body), Ok(1_700_000_000_123));
    }

    #[test]
    fn bodies_without_a_usable_timestamp_are_malformed() {
        for body in [
            &b""[..],
            b"[1]",
            b"not json",
            br#"{"data":{"webhookTimestamp":1}}"#,
            br#"{"webhookTimestamp":"1700000000123"}"#,
            br#"{"webhookTimestamp":-1}"#,
            br#"{"webhookTimestamp":1.5}"#,
        ] {
            assert!(
                matches!(webhook_timestamp_ms(body), Err(Error::MalformedBody(_))),
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
