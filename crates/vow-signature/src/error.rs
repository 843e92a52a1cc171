//! Typed errors for key parsing and signature verification.
//!
//! Every error names *what* went wrong (which header, which rule) without
//! echoing secret material or full signatures back: error messages end up in
//! logs and HTTP responses, so they carry header names, timestamps and short
//! static reasons only.

use thiserror::Error;

/// Why a verification (or a key-dependent operation) failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// A required header was absent. Holds the lowercase header name.
    #[error("missing `{0}` header")]
    MissingHeader(&'static str),

    /// A header was present but could not be parsed.
    #[error("malformed `{header}` header: {reason}")]
    MalformedHeader {
        /// The lowercase header name.
        header: &'static str,
        /// What is wrong with it, as a short static phrase.
        reason: &'static str,
    },

    /// The signed timestamp is further in the past than the tolerance allows.
    #[error("timestamp {timestamp} is more than {tolerance_secs} s older than now ({now})")]
    TimestampTooOld {
        /// The timestamp carried by the message (unix seconds).
        timestamp: u64,
        /// The verifier's notion of now (unix seconds).
        now: u64,
        /// The tolerance in force (seconds).
        tolerance_secs: u64,
    },

    /// The signed timestamp is further in the future than the tolerance allows.
    #[error("timestamp {timestamp} is more than {tolerance_secs} s newer than now ({now})")]
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

    /// A key could not be parsed or generated.
    #[error("invalid key: {0}")]
    InvalidKey(#[from] KeyError),
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
        let e = Error::MissingHeader("webhook-id");
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
        assert!(old.to_string().contains("older"));
        assert!(new.to_string().contains("newer"));
    }
}
