//! Header names and the small, total parsers shared by every scheme.
//!
//! Parsers here take raw header bytes (as an HTTP stack hands them over),
//! never allocate in proportion to attacker input beyond the input itself,
//! and never panic: every failure is an [`Error`].

use crate::error::Error;

/// `webhook-id`: the message id, stable across retries (Standard Webhooks).
pub const WEBHOOK_ID: &str = "webhook-id";
/// `webhook-timestamp`: unix seconds of the attempt (Standard Webhooks).
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
/// `webhook-signature`: space-separated `<version>,<base64>` entries.
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";
/// `x-signature`: the signature header of both seed styles.
pub const X_SIGNATURE: &str = "x-signature";
/// `x-delivery-id`: the (unsigned) delivery id of the seed 000 style.
pub const X_DELIVERY_ID: &str = "x-delivery-id";

/// The three Standard Webhooks header values, as raw bytes.
///
/// `None` means the header was absent; verification then fails with
/// [`Error::MissingHeader`] naming it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebhookHeaders<'a> {
    /// Value of `webhook-id`.
    pub id: Option<&'a [u8]>,
    /// Value of `webhook-timestamp`.
    pub timestamp: Option<&'a [u8]>,
    /// Value of `webhook-signature`.
    pub signature: Option<&'a [u8]>,
}

impl<'a> WebhookHeaders<'a> {
    /// Builds the set from three optional header values.
    pub fn new(
        id: Option<&'a [u8]>,
        timestamp: Option<&'a [u8]>,
        signature: Option<&'a [u8]>,
    ) -> Self {
        Self {
            id,
            timestamp,
            signature,
        }
    }

    /// Builds the set by looking each lowercase header name up with `get`,
    /// e.g. `WebhookHeaders::from_lookup(|n| map.get(n).map(|v| v.as_bytes()))`.
    pub fn from_lookup(mut get: impl FnMut(&str) -> Option<&'a [u8]>) -> Self {
        Self {
            id: get(WEBHOOK_ID),
            timestamp: get(WEBHOOK_TIMESTAMP),
            signature: get(WEBHOOK_SIGNATURE),
        }
    }
}

/// Parses a unix timestamp in seconds: one or more ASCII digits, nothing else
/// (no sign, no whitespace, no fraction). Overflow is an error, not a panic.
pub fn parse_timestamp(header: &'static str, raw: &[u8]) -> Result<u64, Error> {
    let malformed = |reason| Error::MalformedHeader {
        header: header.into(),
        reason,
    };
    if raw.is_empty() {
        return Err(malformed("empty timestamp"));
    }
    let mut value: u64 = 0;
    for &b in raw {
        if !b.is_ascii_digit() {
            return Err(malformed("timestamp is not an unsigned integer"));
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or_else(|| malformed("timestamp is out of range"))?;
    }
    Ok(value)
}

/// Checks `timestamp` against `now` with a symmetric tolerance: exactly
/// `tolerance_secs` away passes, one second more fails.
pub fn check_tolerance(timestamp: u64, now: u64, tolerance_secs: u64) -> Result<(), Error> {
    if now.saturating_sub(timestamp) > tolerance_secs {
        Err(Error::TimestampTooOld {
            timestamp,
            now,
            tolerance_secs,
        })
    } else if timestamp.saturating_sub(now) > tolerance_secs {
        Err(Error::TimestampTooNew {
            timestamp,
            now,
            tolerance_secs,
        })
    } else {
        Ok(())
    }
}

/// Interprets a header value as UTF-8 text, or fails naming the header.
pub(crate) fn header_str<'a>(header: &'static str, raw: &'a [u8]) -> Result<&'a str, Error> {
    std::str::from_utf8(raw).map_err(|_| Error::MalformedHeader {
        header: header.into(),
        reason: "not valid UTF-8",
    })
}

/// One `<version>,<signature>` entry of a `webhook-signature` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignatureEntry<'a> {
    /// The version identifier, e.g. `v1` or `v1a`.
    pub version: &'a str,
    /// The base64 signature text (not decoded).
    pub signature: &'a str,
}

/// Splits a `webhook-signature` value into its entries.
///
/// Entries are separated by one or more spaces. Entries without a `,` are
/// skipped (they cannot match any version). Fails if the value is not UTF-8
/// or holds no entry at all.
pub fn parse_signature_entries(raw: &[u8]) -> Result<Vec<SignatureEntry<'_>>, Error> {
    let text = header_str(WEBHOOK_SIGNATURE, raw)?;
    let entries: Vec<_> = text
        .split(' ')
        .filter_map(|e| e.split_once(','))
        .map(|(version, signature)| SignatureEntry { version, signature })
        .collect();
    if entries.is_empty() {
        return Err(Error::MalformedHeader {
            header: WEBHOOK_SIGNATURE.into(),
            reason: "no `<version>,<signature>` entry",
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(raw: &str) -> Result<u64, Error> {
        parse_timestamp(WEBHOOK_TIMESTAMP, raw.as_bytes())
    }

    #[test]
    fn parses_plain_decimal_timestamps() {
        assert_eq!(ts("1614265330"), Ok(1_614_265_330));
        assert_eq!(ts("0"), Ok(0));
        assert_eq!(ts("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn rejects_signs_whitespace_fractions_and_garbage_in_timestamps() {
        for bad in [
            "", "+1", "-1", " 1", "1 ", "1.5", "1e9", "abc", "0x10", "１",
        ] {
            assert!(
                matches!(
                    ts(bad),
                    Err(Error::MalformedHeader { header, .. }) if header == WEBHOOK_TIMESTAMP
                ),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn rejects_a_timestamp_that_overflows_without_panicking() {
        assert!(matches!(
            ts("18446744073709551616"),
            Err(Error::MalformedHeader {
                reason: "timestamp is out of range",
                ..
            })
        ));
        assert!(ts(&"9".repeat(10_000)).is_err());
    }

    #[test]
    fn tolerance_boundary_is_inclusive_in_both_directions() {
        assert_eq!(check_tolerance(1000, 1300, 300), Ok(()));
        assert_eq!(check_tolerance(1300, 1000, 300), Ok(()));
        assert!(matches!(
            check_tolerance(999, 1300, 300),
            Err(Error::TimestampTooOld { .. })
        ));
        assert!(matches!(
            check_tolerance(1301, 1000, 300),
            Err(Error::TimestampTooNew { .. })
        ));
    }

    #[test]
    fn tolerance_check_survives_extreme_values() {
        assert!(check_tolerance(0, u64::MAX, 300).is_err());
        assert!(check_tolerance(u64::MAX, 0, 300).is_err());
        assert!(check_tolerance(u64::MAX, u64::MAX, 0).is_ok());
    }

    #[test]
    fn splits_signature_entries_on_spaces_and_skips_junk() {
        let entries = parse_signature_entries(b"v1,abc  junk v1a,def,g ").unwrap();
        assert_eq!(
            entries,
            vec![
                SignatureEntry {
                    version: "v1",
                    signature: "abc"
                },
                SignatureEntry {
                    version: "v1a",
                    signature: "def,g"
                },
            ]
        );
    }

    #[test]
    fn rejects_a_signature_header_with_no_entries() {
        for bad in [&b""[..], b"   ", b"nocomma", b"\xff,\xfe"] {
            assert!(matches!(
                parse_signature_entries(bad),
                Err(Error::MalformedHeader { header, .. }) if header == WEBHOOK_SIGNATURE
            ));
        }
    }

    #[test]
    fn builds_headers_from_a_lookup_function() {
        let h = WebhookHeaders::from_lookup(|name| match name {
            WEBHOOK_ID => Some(&b"msg_1"[..]),
            WEBHOOK_TIMESTAMP => Some(&b"5"[..]),
            _ => None,
        });
        assert_eq!(h, WebhookHeaders::new(Some(b"msg_1"), Some(b"5"), None));
    }
}
