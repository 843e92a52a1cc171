//! What can go wrong sending a request out, as the delivery log needs to tell it apart.
//!
//! reqwest reports everything as one `reqwest::Error`; `EgressError::from_reqwest` walks its
//! source chain so that a refusal by [`crate::GuardedResolver`] surfaces as
//! [`EgressError::Refused`] rather than as a generic connect error. URLs are stripped from the
//! kept reqwest errors (query strings can carry tokens), and no header value or body is ever part
//! of an error.

use std::error::Error as StdError;

use crate::policy::Refusal;
use crate::resolver::ResolveError;

/// A boxed error kept as the cause of an [`EgressError`].
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// Why an egress request produced no response.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EgressError {
    /// The SSRF guard refused the destination: an IP-literal host, or every address its name
    /// resolved to. Nothing was sent. Retrying will not help unless DNS or the policy changes.
    #[error("destination refused: {0}")]
    Refused(Refusal),
    /// The request timeout (or the connect timeout) elapsed.
    ///
    /// `sent` is best effort: `true` once the whole request (head and body) had been handed to
    /// the connection, so the endpoint may have received and acted on it; `false` when it had
    /// not, so the endpoint cannot have seen a complete request. "Handed to the connection"
    /// means queued for writing on the socket, not acknowledged by the peer.
    #[error("timed out {}", if *sent { "waiting for the response" } else { "before the request was sent" })]
    Timeout {
        /// Whether the whole request had been handed to the connection (see above).
        sent: bool,
    },
    /// No connection could be established: DNS failure, connection refused or reset, host
    /// unreachable, TLS handshake or certificate failure. Nothing was delivered.
    #[error("could not connect: {reason}")]
    Connect {
        /// The innermost cause, for the delivery log.
        reason: String,
        /// The full cause chain.
        #[source]
        source: BoxError,
    },
    /// The connection broke after it was established (reset, closed before a complete response,
    /// malformed response). `sent` has the same meaning as for [`EgressError::Timeout`].
    #[error("connection failed: {reason}")]
    Transport {
        /// Whether the whole request had been handed to the connection.
        sent: bool,
        /// The innermost cause, for the delivery log.
        reason: String,
        /// The full cause chain.
        #[source]
        source: BoxError,
    },
    /// The URL cannot be a destination: not `http`/`https`, or no host.
    #[error("invalid destination URL: {reason}")]
    InvalidUrl {
        /// What is wrong with it.
        reason: String,
    },
    /// Anything else.
    #[error("egress request failed: {reason}")]
    Other {
        /// The innermost cause, for the delivery log.
        reason: String,
        /// The full cause chain.
        #[source]
        source: BoxError,
    },
}

impl EgressError {
    /// The refusal, when the SSRF guard refused the destination.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            EgressError::Refused(refusal) => Some(refusal),
            _ => None,
        }
    }

    /// Classifies a reqwest error. `sent` tells whether the request body had been fully handed
    /// to the connection when it happened.
    pub(crate) fn from_reqwest(err: reqwest::Error, sent: bool) -> Self {
        let err = err.without_url();
        if let Some(ResolveError::Refused { refusals, .. }) = find_in_chain::<ResolveError>(&err) {
            if let Some(first) = refusals.first() {
                return EgressError::Refused(*first);
            }
        }
        let reason = reason(&err);
        if err.is_timeout() {
            // A connect timeout means nothing was written.
            return EgressError::Timeout {
                sent: sent && !err.is_connect(),
            };
        }
        if err.is_connect() {
            return EgressError::Connect {
                reason,
                source: Box::new(err),
            };
        }
        if err.is_builder() {
            return EgressError::InvalidUrl { reason };
        }
        if err.is_request() || err.is_body() {
            return EgressError::Transport {
                sent,
                reason,
                source: Box::new(err),
            };
        }
        EgressError::Other {
            reason,
            source: Box::new(err),
        }
    }
}

/// The first error of type `E` in the source chain of `err` (including `err` itself).
fn find_in_chain<'a, E: StdError + 'static>(err: &'a (dyn StdError + 'static)) -> Option<&'a E> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<E>() {
            return Some(found);
        }
        current = e.source();
    }
    None
}

/// A one-line reason: the innermost cause, prefixed by our resolver's message when the failure
/// came from name resolution (so the host name is in it).
fn reason(err: &(dyn StdError + 'static)) -> String {
    let mut innermost = err;
    while let Some(next) = innermost.source() {
        innermost = next;
    }
    match find_in_chain::<ResolveError>(err) {
        Some(resolve) if !std::ptr::addr_eq(resolve, innermost) => {
            format!("{resolve}: {innermost}")
        }
        _ => innermost.to_string(),
    }
}

/// The egress HTTP client could not be built (TLS backend initialisation failed).
#[derive(Debug, thiserror::Error)]
#[error("could not build the egress HTTP client")]
pub struct BuildError(#[source] pub(crate) BoxError);

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] ResolveError);

    #[test]
    fn a_resolver_failure_deep_in_the_chain_is_found_and_named_in_the_reason() {
        let err = Outer(ResolveError::Lookup {
            host: "nowhere.invalid".into(),
            source: io::Error::other("Name or service not known"),
        });
        assert!(find_in_chain::<ResolveError>(&err).is_some());
        assert_eq!(
            reason(&err),
            "could not resolve `nowhere.invalid`: Name or service not known"
        );
    }

    #[test]
    fn timeout_messages_say_whether_the_request_was_sent() {
        assert_eq!(
            EgressError::Timeout { sent: true }.to_string(),
            "timed out waiting for the response"
        );
        assert_eq!(
            EgressError::Timeout { sent: false }.to_string(),
            "timed out before the request was sent"
        );
    }
}
