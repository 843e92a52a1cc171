//! [`Outcome`]: how processing a verified delivery ended, and the status it is answered with.

use crate::error::Error;

/// How `sqlite::process` / `postgres::process` ended.
#[derive(Debug)]
#[must_use]
#[non_exhaustive]
pub enum Outcome<T, E> {
    /// The business change committed, with the claim when the delivery has an event id: answer
    /// 200. Holds the closure's value.
    Processed(T),
    /// The event was already processed with the same payload: nothing was done; answer 200.
    Duplicate,
    /// The event id was already processed with another payload: the new payload is stored in
    /// the quarantine (committed on its own), not applied; answer 202.
    Quarantined,
    /// The business closure failed: its writes and the claim rolled back together, so the
    /// redelivery processes the event. Answer with the error (a 5xx, so the provider retries).
    Failed(E),
    /// The claims could not be read or written, or the transaction not committed: nothing was
    /// acknowledged. Answer 503; the cause is for the logs.
    StoreFailed(Error),
}

impl<T, E> Outcome<T, E> {
    /// The status to answer with: 200, 200, 202, the app's own for [`Outcome::Failed`]
    /// (`None`), 503.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Processed(_) | Self::Duplicate => Some(200),
            Self::Quarantined => Some(202),
            Self::Failed(_) => None,
            Self::StoreFailed(_) => Some(503),
        }
    }

    /// A stable word for the JSON answer and the logs: `processed`, `duplicate`,
    /// `quarantined`, `failed`, `store_unavailable`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Processed(_) => "processed",
            Self::Duplicate => "duplicate",
            Self::Quarantined => "quarantined",
            Self::Failed(_) => "failed",
            Self::StoreFailed(_) => "store_unavailable",
        }
    }
}

impl<T, E> From<Error> for Outcome<T, E> {
    fn from(error: Error) -> Self {
        Self::StoreFailed(error)
    }
}

/// Logs a quarantine: an operator should look at it. The identity is not secret; the payload
/// is not logged.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn log_quarantine(identity: &crate::Identity, newly_stored: bool) {
    tracing::warn!(
        source = identity.source(),
        account = identity.account(),
        event_id = identity.event_id(),
        newly_stored,
        "another payload under an event id already processed was quarantined"
    );
}
