//! `commit-baseline`: how many single-row durable commits per second the storage takes.
//!
//! SQLite: rusqlite on a temp file, WAL + `synchronous=FULL`, one 1 KiB row per transaction
//! (so one WAL fsync per commit). PostgreSQL: one connection, one autocommitted 1 KiB INSERT per
//! commit (`synchronous_commit` as the server has it). Ingest is reported as a ratio to this,
//! measured in the same invocation.

use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::Connection;

use super::Options;
use crate::ledger::Report;
use crate::vow_process::Database;

/// How long each baseline measures.
pub const SECONDS: f64 = 5.0;

fn payload() -> String {
    format!("{{\"pad\":\"{}\"}}", "x".repeat(1000))
}

/// Single-row commits/s on SQLite (WAL, synchronous=FULL). Blocking.
pub fn sqlite_commits_per_s(seconds: f64) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let conn = rusqlite::Connection::open(dir.path().join("baseline.db"))?;
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
         CREATE TABLE m (id TEXT PRIMARY KEY, payload TEXT NOT NULL, created_at INTEGER NOT NULL);",
    )?;
    let payload = payload();
    let mut stmt = conn.prepare("INSERT INTO m (id, payload, created_at) VALUES (?1, ?2, ?3)")?;
    let start = Instant::now();
    let limit = Duration::from_secs_f64(seconds);
    let mut n = 0u64;
    while start.elapsed() < limit {
        stmt.execute(rusqlite::params![format!("msg_{n:020}"), payload, n])?;
        n += 1;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Single-row INSERT commits/s on PostgreSQL with one connection, in a fresh database.
pub async fn pg_commits_per_s(admin_url: &str, seconds: f64) -> anyhow::Result<f64> {
    let db = Database::postgres(admin_url).await?;
    let mut conn = sqlx::PgConnection::connect(&db.url())
        .await
        .context("connecting to the baseline database")?;
    sqlx::query(
        "CREATE TABLE m (id TEXT PRIMARY KEY, payload TEXT NOT NULL, created_at BIGINT NOT NULL)",
    )
    .execute(&mut conn)
    .await?;
    let payload = payload();
    let start = Instant::now();
    let limit = Duration::from_secs_f64(seconds);
    let mut n = 0i64;
    while start.elapsed() < limit {
        sqlx::query("INSERT INTO m (id, payload, created_at) VALUES ($1, $2, $3)")
            .bind(format!("msg_{n:020}"))
            .bind(&payload)
            .bind(n)
            .execute(&mut conn)
            .await?;
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    conn.close().await?;
    db.cleanup().await?;
    Ok(rate)
}

/// The baseline of the backend in use (`--pg` or SQLite).
pub async fn for_backend(opts: &Options) -> anyhow::Result<f64> {
    match &opts.pg {
        Some(url) => pg_commits_per_s(url, SECONDS).await,
        None => tokio::task::spawn_blocking(|| sqlite_commits_per_s(SECONDS)).await?,
    }
}

/// Runs the SQLite baseline, and the PostgreSQL one with `--pg`.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let mut r = Report::new("commit-baseline");
    let sqlite = tokio::task::spawn_blocking(|| sqlite_commits_per_s(SECONDS)).await??;
    r.metric("sqlite_commits_per_s", sqlite);
    r.line(format!(
        "sqlite (WAL, synchronous=FULL, 1 row of 1 KiB per commit): {sqlite:.0} commits/s over {SECONDS} s"
    ));
    if let Some(url) = &opts.pg {
        let pg = pg_commits_per_s(url, SECONDS).await?;
        r.metric("pg_commits_per_s", pg);
        r.line(format!(
            "postgres (1 connection, 1 INSERT of 1 KiB per commit): {pg:.0} commits/s over {SECONDS} s"
        ));
    }
    Ok(vec![r])
}
