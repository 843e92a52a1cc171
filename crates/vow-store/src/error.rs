//! The one error type every backend reports in.

/// A boxed cause, kept so logs can print the whole chain.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong in the store, in terms callers can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The row the operation needs does not exist (e.g. "application", "endpoint").
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A uniqueness rule refused the write; the text names the rule, e.g. "uid already exists".
    #[error("{0}")]
    Conflict(String),
    /// The database cannot be reached or refused service (connection lost, disk full, busy).
    /// Retrying later may succeed.
    #[error("the store is unavailable")]
    Unavailable(#[source] BoxError),
    /// The store refused new work: the writes already waiting would take longer than its limit
    /// (graceful overload). Nothing was written; retrying after `retry_after` may succeed.
    #[error("the store is over its write capacity; retry in {} s", retry_after.as_secs())]
    Overloaded {
        /// How long the caller should wait before retrying.
        retry_after: std::time::Duration,
    },
    /// The idempotency lease this write was fenced by is no longer the caller's (another request
    /// took the record over, or it was released): nothing was written.
    #[error("the idempotency record is no longer owned by this request")]
    Fenced,
    /// Anything else the backend reported: a bug or corrupt data.
    #[error("the store failed")]
    Backend(#[source] BoxError),
}

impl StoreError {
    /// How long a caller is told to wait after an overload refusal, and after the store was
    /// unavailable.
    pub const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

    /// An overload refusal ([`StoreError::Overloaded`]) that says to retry after
    /// [`StoreError::RETRY_AFTER`].
    pub fn overloaded() -> Self {
        StoreError::Overloaded {
            retry_after: Self::RETRY_AFTER,
        }
    }

    /// Whole seconds (at least 1, as `Retry-After` takes them) a caller should wait before
    /// retrying, for the errors that say to retry later.
    pub fn retry_after_secs(&self) -> Option<u64> {
        let wait = match self {
            StoreError::Overloaded { retry_after } => *retry_after,
            StoreError::Unavailable(_) => Self::RETRY_AFTER,
            _ => return None,
        };
        Some(wait.as_secs().max(1))
    }
}

/// Shorthand for store results.
pub type StoreResult<T> = Result<T, StoreError>;
