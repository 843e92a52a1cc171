//! The balances, on SQLite (one connection behind a mutex, a file) or on PostgreSQL (a pool).
//! Each backend's schema holds vow-receiver's claims and quarantine
//! (`vow_receiver::{sqlite, postgres}::SCHEMA`) next to the balances, so a credit and the claim
//! of its event commit in one transaction.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgConnection, PgPool};

/// Why the database failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// SQLite failed.
    #[error("SQLite failed")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed.
    #[error("PostgreSQL failed")]
    Postgres(#[from] sqlx::Error),
    /// The SQLite connection's blocking task did not finish.
    #[error("the database cannot be reached")]
    Unavailable(#[from] tokio::task::JoinError),
}

/// Where the balances are.
#[derive(Clone)]
pub enum Db {
    /// One SQLite connection.
    Sqlite(Arc<Mutex<Connection>>),
    /// A PostgreSQL pool.
    Postgres(PgPool),
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Sqlite(_) => "Db::Sqlite",
            Self::Postgres(_) => "Db::Postgres",
        })
    }
}

const SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS balances (
    account TEXT    PRIMARY KEY,
    balance INTEGER NOT NULL
);
";

const POSTGRES_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS balances (
    account text   PRIMARY KEY,
    balance bigint NOT NULL
);
";

/// Adds `amount` to `account`'s balance, creating it at 0 first. The same statement on both
/// backends (`?1`/`$1` aside).
const CREDIT: &str = "INSERT INTO balances (account, balance) VALUES ($1, $2) \
     ON CONFLICT (account) DO UPDATE SET balance = balances.balance + excluded.balance";

impl Db {
    /// SQLite at `path` (WAL mode), with the schema created.
    pub fn sqlite(path: &Path) -> Result<Self, DbError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.execute_batch(vow_receiver::sqlite::SCHEMA)?;
        conn.execute_batch(SQLITE_SCHEMA)?;
        Ok(Self::Sqlite(Arc::new(Mutex::new(conn))))
    }

    /// PostgreSQL at `url`, with the schema created.
    pub async fn postgres(url: &str) -> Result<Self, DbError> {
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .connect(url)
            .await?;
        Self::postgres_pool(pool).await
    }

    /// PostgreSQL through `pool`, with the schema created (in the pool's `search_path`).
    pub async fn postgres_pool(pool: PgPool) -> Result<Self, DbError> {
        sqlx::raw_sql(vow_receiver::postgres::SCHEMA)
            .execute(&pool)
            .await?;
        sqlx::raw_sql(POSTGRES_SCHEMA).execute(&pool).await?;
        Ok(Self::Postgres(pool))
    }

    /// `account`'s balance, if it was ever credited.
    pub async fn balance(&self, account: &str) -> Result<Option<i64>, DbError> {
        const SQL: &str = "SELECT balance FROM balances WHERE account = $1";
        match self {
            Self::Sqlite(conn) => {
                let (conn, account) = (Arc::clone(conn), account.to_owned());
                let read = tokio::task::spawn_blocking(move || {
                    let conn = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    let balance = conn.prepare_cached(SQL)?.query_row([account], |r| r.get(0));
                    balance.optional()
                });
                Ok(read.await??)
            }
            Self::Postgres(pool) => Ok(sqlx::query_scalar(SQL)
                .bind(account)
                .fetch_optional(pool)
                .await?),
        }
    }
}

/// Credits `amount` to `account` on SQLite, in the caller's transaction.
pub fn credit_sqlite(conn: &Connection, account: &str, amount: i64) -> Result<(), DbError> {
    conn.prepare_cached(CREDIT)?
        .execute(params![account, amount])?;
    Ok(())
}

/// Credits `amount` to `account` on PostgreSQL, in the caller's transaction.
pub async fn credit_postgres(
    conn: &mut PgConnection,
    account: &str,
    amount: i64,
) -> Result<(), DbError> {
    sqlx::query(CREDIT)
        .bind(account)
        .bind(amount)
        .execute(conn)
        .await?;
    Ok(())
}
