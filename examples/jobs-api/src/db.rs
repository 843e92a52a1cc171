//! The jobs and their ids, on SQLite (one connection behind a mutex, a file or in memory) or on
//! PostgreSQL (a pool). Each backend's schema holds the idempotency records
//! (`vow_idempotency::{sqlite, postgres}::SCHEMA`) next to the jobs, so a job row and its key's
//! record commit in one transaction.
//!
//! Job ids are sequential and gapless (`job_1`, `job_2`, …): they come from a one-row counter
//! updated in the creating transaction, so a create that rolls back does not use up an id.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use serde_json::Value;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgConnection, PgPool};
use vow_idempotency::http::sqlite::WithConnection;

/// A job as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job {
    /// `job_<n>`.
    pub id: String,
    /// The request body it was created from.
    pub request: Value,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// Why the database failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite failed.
    #[error("SQLite failed")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed.
    #[error("PostgreSQL failed")]
    Postgres(#[from] sqlx::Error),
    /// A stored job does not decode.
    #[error("a stored job is corrupt")]
    Corrupt,
    /// The SQLite connection could not be reached.
    #[error("the database cannot be reached")]
    Unavailable(#[from] vow_idempotency::Error),
}

/// Where the jobs are.
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
CREATE TABLE IF NOT EXISTS job_ids (last INTEGER NOT NULL);
INSERT INTO job_ids (last) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM job_ids);
CREATE TABLE IF NOT EXISTS jobs (
    id         TEXT    PRIMARY KEY,
    request    TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
";

const POSTGRES_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS job_ids (last bigint NOT NULL);
INSERT INTO job_ids (last) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM job_ids);
CREATE TABLE IF NOT EXISTS jobs (
    id         text        PRIMARY KEY,
    request    text        NOT NULL,
    created_at timestamptz NOT NULL
);
";

/// The update that hands out the next id, in the caller's transaction.
const NEXT_ID: &str = "UPDATE job_ids SET last = last + 1 RETURNING last";

impl Db {
    /// SQLite at `path` (WAL mode), or in memory when `None`, with the schema created.
    pub fn sqlite(path: Option<&Path>) -> Result<Self, DbError> {
        let conn = match path {
            Some(path) => {
                let conn = Connection::open(path)?;
                conn.busy_timeout(Duration::from_secs(5))?;
                conn.pragma_update(None, "journal_mode", "WAL")?;
                conn
            }
            None => Connection::open_in_memory()?,
        };
        conn.execute_batch(vow_idempotency::sqlite::SCHEMA)?;
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
        sqlx::raw_sql(vow_idempotency::postgres::SCHEMA)
            .execute(&pool)
            .await?;
        sqlx::raw_sql(POSTGRES_SCHEMA).execute(&pool).await?;
        Ok(Self::Postgres(pool))
    }

    /// The job `id`, if there is one.
    pub async fn job(&self, id: &str) -> Result<Option<Job>, DbError> {
        match self {
            Self::Sqlite(conn) => {
                let id = id.to_owned();
                let read = move |c: &Connection| -> Result<Option<Job>, DbError> {
                    let row = c
                        .prepare_cached("SELECT id, request, created_at FROM jobs WHERE id = ?1")?
                        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?)))
                        .optional()?;
                    row.map(|(id, request, at)| {
                        let at = DateTime::from_timestamp_micros(at).ok_or(DbError::Corrupt)?;
                        decode(id, request, at)
                    })
                    .transpose()
                };
                conn.with_connection(move |c| Ok(read(c))).await?
            }
            Self::Postgres(pool) => {
                let row: Option<(String, String, DateTime<Utc>)> =
                    sqlx::query_as("SELECT id, request, created_at FROM jobs WHERE id = $1")
                        .bind(id)
                        .fetch_optional(pool)
                        .await?;
                row.map(|(id, request, at)| decode(id, request, at))
                    .transpose()
            }
        }
    }
}

fn decode(id: String, request: String, created_at: DateTime<Utc>) -> Result<Job, DbError> {
    let request = serde_json::from_str(&request).map_err(|_| DbError::Corrupt)?;
    Ok(Job {
        id,
        request,
        created_at,
    })
}

/// Creates a job from `request` on SQLite, in the caller's transaction: its id.
pub fn insert_sqlite(
    conn: &Connection,
    request: &Value,
    now: DateTime<Utc>,
) -> Result<String, DbError> {
    let n: i64 = conn.prepare_cached(NEXT_ID)?.query_row([], |r| r.get(0))?;
    let id = format!("job_{n}");
    conn.prepare_cached("INSERT INTO jobs (id, request, created_at) VALUES (?1, ?2, ?3)")?
        .execute(params![id, request.to_string(), now.timestamp_micros()])?;
    Ok(id)
}

/// Creates a job from `request` on PostgreSQL, in the caller's transaction: its id.
pub async fn insert_postgres(
    conn: &mut PgConnection,
    request: &Value,
    now: DateTime<Utc>,
) -> Result<String, DbError> {
    let n: i64 = sqlx::query_scalar(NEXT_ID).fetch_one(&mut *conn).await?;
    let id = format!("job_{n}");
    sqlx::query("INSERT INTO jobs (id, request, created_at) VALUES ($1, $2, $3)")
        .bind(&id)
        .bind(request.to_string())
        .bind(now)
        .execute(&mut *conn)
        .await?;
    Ok(id)
}
