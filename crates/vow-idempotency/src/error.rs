//! The record store's error: fenced (the lease was taken over), a row that does not decode, the
//! database's own error, or a database that cannot be reached at all, with its cause chain.

/// Why a record operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lease token no longer owns the record (it was taken over, released or purged): the
    /// host must roll back the transaction its business write is in.
    #[error("the lease token no longer owns the idempotency record")]
    Fenced,
    /// A stored row has a value this crate cannot read.
    #[error("an idempotency record is corrupt: {0}")]
    Corrupt(&'static str),
    /// SQLite failed.
    #[cfg(feature = "sqlite")]
    #[error("SQLite failed on an idempotency record")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed.
    #[cfg(feature = "postgres")]
    #[error("PostgreSQL failed on an idempotency record")]
    Postgres(#[from] sqlx::Error),
    /// The database could not be reached to run the operation at all (e.g. the thread or task
    /// that holds the connection is gone).
    #[error("the idempotency records cannot be reached")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// Whether this is [`Error::Fenced`].
    pub fn is_fenced(&self) -> bool {
        matches!(self, Self::Fenced)
    }
}

/// A record operation's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
