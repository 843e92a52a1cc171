//! Typed errors for key parsing and signature verification, and the HTTP
//! class of each ([`ErrorKind`]: 400, 401 or 500).
//!
//! Every error names *what* went wrong (which header, which rule) without
//! echoing secret material or full signatures back: error messages end up in
//! logs and HTTP responses, so they carry header names, timestamps and short
//! static reasons only, and [`Error::reason`] gives a stable code.

use std::borrow::Cow;

use thiserror::Error;

/// The HTTP class of a verification failure (see [`Error::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request lacks or garbles what the scheme needs (400).
    BadRequest,
    /// The request is readable but not authentic, or outside the tolerance (401).
    Unauthorized,
    /// The scheme or its keys are unusable: fix the configuration, not the
    /// request (500).
    Misconfigured,
}

impl ErrorKind {
    /// The HTTP status code for this class: 400, 401 or 500.
    pub fn status(self) -> u16 {
        match self {
            Self::BadRequest => 400,
            Self::Unauthorized => 401,
            Self::Misconfigured => 500,
        }
    }
}

/// Why a verification (or a key-dependent operation) failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// A required header was absent. Holds the lowercase header name.
    #[error("missing `{0}` header")]
    MissingHeader(Cow<'static, str>),

    /// A header was present but could not be parsed.
    #[error("malformed `{header}` header: {reason}")]
    MalformedHeader {
        /// The lowercase header name.
        header: Cow<'static, str>,
        /// What is wrong with it, as a short static phrase.
        reason: &'static str,
    },

    /// The body lacks something the scheme reads from it (Linear's
    /// `webhookTimestamp`).
    #[error("malformed body: {0}")]
    MalformedBody(&'static str),

    /// The request URL carries something unreadable (Twilio's `bodySHA256`).
    #[error("malformed URL: {0}")]
    MalformedUrl(&'static str),

    /// The signed timestamp is further in the past than the tolerance allows.
    #[error(
        "timestamp {timestamp} is {age} s old: {over} s older than the {tolerance_secs} s \
         window allows (now is {now})",
        age = seconds_from(.timestamp, .now),
        over = outside_window(.timestamp, .now, .tolerance_secs)
    )]
    TimestampTooOld {
        /// The timestamp carried by the message (unix seconds).
        timestamp: u64,
        /// The verifier's notion of now (unix seconds).
        now: u64,
        /// The tolerance in force (seconds).
        tolerance_secs: u64,
    },

    /// The signed timestamp is further in the future than the tolerance allows.
    #[error(
        "timestamp {timestamp} is {ahead} s in the future: {over} s newer than the \
         {tolerance_secs} s window allows (now is {now})",
        ahead = seconds_from(.now, .timestamp),
        over = outside_window(.timestamp, .now, .tolerance_secs)
    )]
    TimestampTooNew {
        /// The timestamp carried by the message (unix seconds).
        timestamp: u64,
        /// The verifier's notion of now (unix seconds).
        now: u64,
        /// The tolerance in force (seconds).
        tolerance_secs: u64,
    },

    /// The header parsed, but no entry verified with any of the keys.
    #[error("no signature matched")]
    NoMatchingSignature,

    /// The signature matched, but the body is not the one whose hash was
    /// signed (Twilio's `bodySHA256`).
    #[error("the body does not match its signed hash")]
    BodyHashMismatch,

    /// No key is configured at all.
    #[error("no secret is configured")]
    NoSecrets,

    /// A key could not be parsed or generated.
    #[error("invalid key: {0}")]
    InvalidKey(#[from] KeyError),

    /// A scheme's configuration cannot work (generic HMAC only).
    #[error("invalid scheme configuration: {0}")]
    InvalidConfig(&'static str),
}

impl Error {
    /// The HTTP class of this failure: [`ErrorKind::BadRequest`] for
    /// missing or malformed input, [`ErrorKind::Unauthorized`] for a wrong
    /// signature or a timestamp outside the tolerance,
    /// [`ErrorKind::Misconfigured`] for unusable keys or configuration.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::MissingHeader(_)
            | Self::MalformedHeader { .. }
            | Self::MalformedBody(_)
            | Self::MalformedUrl(_) => ErrorKind::BadRequest,
            Self::TimestampTooOld { .. }
            | Self::TimestampTooNew { .. }
            | Self::NoMatchingSignature
            | Self::BodyHashMismatch => ErrorKind::Unauthorized,
            Self::NoSecrets | Self::InvalidKey(_) | Self::InvalidConfig(_) => {
                ErrorKind::Misconfigured
            }
        }
    }

    /// The HTTP status code: 400, 401 or 500 (see [`Error::kind`]).
    pub fn status(&self) -> u16 {
        self.kind().status()
    }

    /// A stable snake_case code for recording the failure, e.g.
    /// `"signature_mismatch"`. Never contains request or secret data.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingHeader(_) => "missing_header",
            Self::MalformedHeader { .. } => "malformed_header",
            Self::MalformedBody(_) => "malformed_body",
            Self::MalformedUrl(_) => "malformed_url",
            Self::TimestampTooOld { .. } => "timestamp_too_old",
            Self::TimestampTooNew { .. } => "timestamp_too_new",
            Self::NoMatchingSignature => "signature_mismatch",
            Self::BodyHashMismatch => "body_hash_mismatch",
            Self::NoSecrets => "no_secrets",
            Self::InvalidKey(_) => "invalid_key",
            Self::InvalidConfig(_) => "invalid_config",
        }
    }

    /// Re-points a header error at `header` (for configured header names,
    /// which the `&'static str` parsers of [`crate::header`] cannot name).
    pub(crate) fn with_header(self, header: Cow<'static, str>) -> Self {
        match self {
            Self::MissingHeader(_) => Self::MissingHeader(header),
            Self::MalformedHeader { reason, .. } => Self::MalformedHeader { header, reason },
            other => other,
        }
    }
}

/// Seconds from `earlier` to `later` (0 if it is not later).
fn seconds_from(earlier: &u64, later: &u64) -> u64 {
    later.saturating_sub(*earlier)
}

/// How many seconds `timestamp` lies outside the window of `tolerance_secs` around `now`, in
/// either direction (0 inside it).
fn outside_window(timestamp: &u64, now: &u64, tolerance_secs: &u64) -> u64 {
    now.abs_diff(*timestamp).saturating_sub(*tolerance_secs)
}

/// Why a key string or key bytes were rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key (after any prefix) was empty, or decoded to zero bytes.
    #[error("key is empty")]
    Empty,

    /// The key carries the prefix of another kind of key.
    #[error("expected a `{expected}` key, found a `{found}` key")]
    WrongPrefix {
        /// The prefix this parser wanted.
        expected: &'static str,
        /// The prefix that was found.
        found: &'static str,
    },

    /// The key is not valid standard base64 (with padding).
    #[error("key is not valid base64 (standard alphabet, padded)")]
    NotBase64,

    /// The key is not valid hex (a Discord application public key).
    #[error("key is not valid hex")]
    NotHex,

    /// The decoded key has a length this kind of key cannot have.
    #[error("key decodes to {actual} bytes, expected {expected}")]
    WrongLength {
        /// Human-readable expected length(s), e.g. `"32 or 64"`.
        expected: &'static str,
        /// The decoded length.
        actual: usize,
    },

    /// The bytes are not a valid ed25519 public key.
    #[error("not a valid ed25519 public key")]
    InvalidPublicKey,

    /// A `whsk_` key's embedded public half does not match its seed.
    #[error("the public half of the key does not match its secret seed")]
    PublicKeyMismatch,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_header_message_names_the_header() {
        let e = Error::MissingHeader("webhook-id".into());
        assert_eq!(e.to_string(), "missing `webhook-id` header");
    }

    #[test]
    fn key_errors_convert_into_invalid_key() {
        let e: Error = KeyError::NotBase64.into();
        assert!(matches!(e, Error::InvalidKey(KeyError::NotBase64)));
        assert!(e.to_string().starts_with("invalid key:"));
    }

    #[test]
    fn timestamp_errors_say_which_direction() {
        let old = Error::TimestampTooOld {
            timestamp: 1,
            now: 400,
            tolerance_secs: 300,
        };
        let new = Error::TimestampTooNew {
            timestamp: 800,
            now: 400,
            tolerance_secs: 300,
        };
        assert_eq!(
            old.to_string(),
            "timestamp 1 is 399 s old: 99 s older than the 300 s window allows (now is 400)"
        );
        assert_eq!(
            new.to_string(),
            "timestamp 800 is 400 s in the future: 100 s newer than the 300 s window allows \
             (now is 400)"
        );
    }

    /// One error of every variant, with the status it must map to.
    fn one_of_each() -> Vec<(Error, u16)> {
        let timestamps = |timestamp| (timestamp, 400, 300);
        let (old, now, tolerance_secs) = timestamps(1);
        vec![
            (Error::MissingHeader("x".into()), 400),
            (
                Error::MalformedHeader {
                    header: "x".into(),
                    reason: "r",
                },
                400,
            ),
            (Error::MalformedBody("r"), 400),
            (Error::MalformedUrl("r"), 400),
            (
                Error::TimestampTooOld {
                    timestamp: old,
                    now,
                    tolerance_secs,
                },
                401,
            ),
            (
                Error::TimestampTooNew {
                    timestamp: 800,
                    now,
                    tolerance_secs,
                },
                401,
            ),
            (Error::NoMatchingSignature, 401),
            (Error::BodyHashMismatch, 401),
            (Error::NoSecrets, 500),
            (Error::InvalidKey(KeyError::Empty), 500),
            (Error::InvalidConfig("r"), 500),
        ]
    }

    #[test]
    fn input_problems_are_bad_requests_bad_signatures_unauthorized_and_keys_misconfigured() {
        for (e, status) in one_of_each() {
            assert_eq!(e.status(), status, "{e}");
            assert_eq!(e.kind() == ErrorKind::Misconfigured, status == 500, "{e}");
        }
    }

    #[test]
    fn reasons_are_distinct_snake_case_codes() {
        let all = one_of_each();
        let mut reasons: Vec<_> = all.iter().map(|(e, _)| e.reason()).collect();
        assert!(reasons
            .iter()
            .all(|r| r.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
        reasons.sort_unstable();
        reasons.dedup();
        assert_eq!(reasons.len(), all.len());
    }

    #[test]
    fn with_header_renames_only_header_errors() {
        let name: Cow<'static, str> = Cow::Owned("x-my-signature".to_owned());
        let e = Error::MissingHeader("".into()).with_header(name.clone());
        assert_eq!(e.to_string(), "missing `x-my-signature` header");
        assert_eq!(
            Error::NoMatchingSignature.with_header(name),
            Error::NoMatchingSignature
        );
    }
}
