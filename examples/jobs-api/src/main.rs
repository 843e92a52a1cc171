//! `jobs-api`: serves seed 000's `POST /jobs` (see the library docs and the README). SQLite by
//! default, in memory unless `--sqlite PATH`; PostgreSQL with `--database-url postgres://…`
//! (or `DATABASE_URL`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use jobs_api::db::Db;
use jobs_api::App;

/// Seed 000's `POST /jobs` with `Idempotency-Key`, on SQLite or PostgreSQL.
#[derive(Debug, Parser)]
struct Args {
    /// Where to listen.
    #[arg(long, env = "JOBS_API_LISTEN", default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// A PostgreSQL URL (`postgres://user@host:5432/db`); without it, SQLite.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The SQLite database file; without it, an in-memory database.
    #[arg(long, env = "JOBS_API_SQLITE", conflicts_with = "database_url")]
    sqlite: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let (db, what) = match (&args.database_url, &args.sqlite) {
        (Some(url), _) => (
            Db::postgres(url).await.context("opening PostgreSQL")?,
            "PostgreSQL".to_owned(),
        ),
        (None, Some(path)) => (
            Db::sqlite(Some(path)).context("opening SQLite")?,
            format!("SQLite at {}", path.display()),
        ),
        (None, None) => (
            Db::sqlite(None).context("opening SQLite")?,
            "SQLite in memory".to_owned(),
        ),
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    tracing::info!(listen = %listener.local_addr()?, database = %what, "jobs-api is serving");
    jobs_api::serve(listener, App::new(db))
        .await
        .context("serving")
}
