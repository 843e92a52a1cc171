//! The vocabulary of the outcome policy: what an attempt's result was ([`AttemptResult`]), where
//! its delivery stands ([`AttemptContext`]), and what to do next ([`Decision`], with a
//! [`DeadLetterReason`] when giving up). The judging itself is in [`super::decide`](mod@super::decide).

use std::fmt;

use chrono::{DateTime, Utc};

/// What happened when one attempt was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult<'a> {
    /// The endpoint answered (redirects are not followed, so this may be a 3xx).
    Response {
        /// The HTTP status code.
        status: u16,
        /// The raw `Retry-After` header, if there was one.
        retry_after: Option<&'a str>,
    },
    /// No answer within the attempt's timeout.
    Timeout,
    /// No connection: refused, reset, DNS failure, TLS failure.
    ConnectFailed,
    /// The SSRF guard refused the destination; retrying cannot help.
    Refused,
}

impl AttemptResult<'_> {
    /// Whether this result uses up the client-error budget ([`MAX_CLIENT_ERROR_RESPONSES`](super::MAX_CLIENT_ERROR_RESPONSES)): a
    /// 4xx other than 408 (Request Timeout) and 429 (Too Many Requests), which are transient, and
    /// 410 (Gone), which disables at once. The worker adds one to
    /// [`AttemptContext::client_errors_before`] for the next attempt when this is true.
    pub fn is_client_error(&self) -> bool {
        matches!(self, Self::Response { status, .. }
            if (400..=499).contains(status) && !matches!(status, 408 | 410 | 429))
    }
}

/// Where a delivery stands when an attempt's result is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptContext {
    /// The attempt just made, 1-based (0 is read as 1).
    pub attempt: u32,
    /// How many earlier attempts of this delivery got a client error (see
    /// [`AttemptResult::is_client_error`]), not counting this one.
    pub client_errors_before: u32,
}

/// What to do with a delivery after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A 2xx: done.
    Delivered,
    /// Try again, no earlier than this time.
    RetryAt(DateTime<Utc>),
    /// Give up on this delivery; it stays replayable.
    DeadLetter {
        /// Why.
        reason: DeadLetterReason,
    },
    /// Give up on this delivery and disable its endpoint now (410 Gone).
    DeadLetterAndDisable {
        /// Why.
        reason: DeadLetterReason,
    },
}

/// Why a delivery was dead-lettered. `Display` gives the sentence stored with it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// Every attempt of the schedule failed.
    Exhausted {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's failure.
        last: Failure,
    },
    /// Too many client-error responses ([`MAX_CLIENT_ERROR_RESPONSES`](super::MAX_CLIENT_ERROR_RESPONSES)).
    ClientErrors {
        /// Client-error responses received, this one included.
        count: u32,
        /// The last status.
        last_status: u16,
    },
    /// The endpoint answered 410 Gone.
    Gone,
    /// The SSRF guard refused the destination.
    Refused,
}

impl DeadLetterReason {
    /// A short, stable label for metrics and filters: `exhausted`, `client_errors`, `gone` or
    /// `refused`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Exhausted { .. } => "exhausted",
            Self::ClientErrors { .. } => "client_errors",
            Self::Gone => "gone",
            Self::Refused => "refused",
        }
    }
}

impl fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exhausted { attempts, last } => {
                let s = if *attempts == 1 { "" } else { "s" };
                write!(f, "exhausted {attempts} attempt{s}; last: {last}")
            }
            Self::ClientErrors { count, last_status } => write!(
                f,
                "gave up after {count} client-error responses; last: {last_status}"
            ),
            Self::Gone => f.write_str("endpoint answered 410 Gone"),
            Self::Refused => f.write_str("destination refused by the SSRF guard"),
        }
    }
}

/// How a failed attempt failed; `Display` is `503`, `timeout` or `connection failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// A non-2xx status.
    Status(u16),
    /// No answer in time.
    Timeout,
    /// No connection.
    ConnectFailed,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(status) => write!(f, "{status}"),
            Self::Timeout => f.write_str("timeout"),
            Self::ConnectFailed => f.write_str("connection failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16) -> AttemptResult<'static> {
        AttemptResult::Response {
            status,
            retry_after: None,
        }
    }

    #[test]
    fn only_4xx_other_than_408_410_and_429_count_as_client_errors() {
        for status in [400, 401, 403, 404, 405, 409, 413, 422, 499] {
            assert!(response(status).is_client_error(), "{status}");
        }
        for status in [200, 301, 408, 410, 429, 500, 503] {
            assert!(!response(status).is_client_error(), "{status}");
        }
        for other in [
            AttemptResult::Timeout,
            AttemptResult::ConnectFailed,
            AttemptResult::Refused,
        ] {
            assert!(!other.is_client_error(), "{other:?}");
        }
    }

    #[test]
    fn dead_letter_reasons_read_as_sentences() {
        let cases = [
            (
                DeadLetterReason::Exhausted {
                    attempts: 8,
                    last: Failure::Status(503),
                },
                "exhausted 8 attempts; last: 503",
                "exhausted",
            ),
            (
                DeadLetterReason::Exhausted {
                    attempts: 4,
                    last: Failure::Timeout,
                },
                "exhausted 4 attempts; last: timeout",
                "exhausted",
            ),
            (
                DeadLetterReason::Exhausted {
                    attempts: 1,
                    last: Failure::ConnectFailed,
                },
                "exhausted 1 attempt; last: connection failed",
                "exhausted",
            ),
            (
                DeadLetterReason::ClientErrors {
                    count: 3,
                    last_status: 404,
                },
                "gave up after 3 client-error responses; last: 404",
                "client_errors",
            ),
            (DeadLetterReason::Gone, "endpoint answered 410 Gone", "gone"),
            (
                DeadLetterReason::Refused,
                "destination refused by the SSRF guard",
                "refused",
            ),
        ];
        for (reason, text, kind) in cases {
            assert_eq!(reason.to_string(), text);
            assert_eq!(reason.kind(), kind);
        }
    }
}
