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
    /// The idempotency lease this write was fenced by is no longer the caller's (another request
    /// took the record over, or it was released): nothing was written.
    #[error("the idempotency record is no longer owned by this request")]
    Fenced,
    /// Anything else the backend reported: a bug or corrupt data.
    #[error("the store failed")]
    Backend(#[source] BoxError),
}

/// Shorthand for store results.
pub type StoreResult<T> = Result<T, StoreError>;
