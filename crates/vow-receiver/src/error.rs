//! The claims store's [`Error`]: the database's own error with its cause chain, a stored row
//! this crate cannot read, a quarantine asked for inside a transaction, or a database that
//! cannot be reached at all.

/// Why a claim, a quarantine or the transaction around them failed. Nothing was acknowledged:
/// answer 503 so the provider delivers again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A stored claim has a value this crate cannot read.
    #[error("a stored claim is corrupt: {0}")]
    Corrupt(&'static str),
    /// `sqlite::quarantine` was called on a connection inside a transaction: the
    /// quarantined payload would be rolled back with it.
    #[error("a quarantine must be stored outside any transaction")]
    InsideTransaction,
    /// SQLite failed.
    #[cfg(feature = "sqlite")]
    #[error("SQLite failed on a webhook claim")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed.
    #[cfg(feature = "postgres")]
    #[error("PostgreSQL failed on a webhook claim")]
    Postgres(#[from] sqlx::Error),
    /// The database could not be reached to run the claim at all (e.g. its blocking task was
    /// cancelled).
    #[error("the webhook claims cannot be reached")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A claims store result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
