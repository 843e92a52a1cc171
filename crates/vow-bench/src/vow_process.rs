//! The system under test: a `vow serve` child process on a fresh database.
//!
//! Owns: creating the database (a SQLite file in a temp dir, or a new PostgreSQL database),
//! starting `vow serve` on a free loopback port with the benchmark's settings, waiting until it
//! is healthy, stopping it with SIGTERM, and counting what it stored once the run is over.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sqlx::Connection;
use tokio::process::{Child, Command};

/// The admin token every benchmark run uses.
pub const ADMIN_TOKEN: &str = "bench-admin-token-0123456789";

/// Where a run's data lives. Dropping it removes the SQLite temp dir; PostgreSQL databases are
/// dropped by [`Database::cleanup`].
#[derive(Debug)]
pub enum Database {
    /// A SQLite file inside a temp dir that lives as long as this value.
    Sqlite {
        /// The temp dir holding the file (and vow's log).
        dir: tempfile::TempDir,
    },
    /// A fresh database on a PostgreSQL server.
    Postgres {
        /// URL of the server's maintenance database (used to create and drop).
        admin_url: String,
        /// Name of the database created for this run.
        name: String,
        /// Temp dir for vow's log.
        dir: tempfile::TempDir,
    },
}

impl Database {
    /// A new SQLite file under the system temp dir.
    pub fn sqlite() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("vow-bench-")
            .tempdir()
            .context("creating a temp dir")?;
        Ok(Self::Sqlite { dir })
    }

    /// A copy of the SQLite file `seed` (and its WAL, if any) in a new temp dir.
    pub fn sqlite_copy(seed: &Path) -> anyhow::Result<Self> {
        let db = Self::sqlite()?;
        std::fs::copy(seed, db.sqlite_path())
            .with_context(|| format!("copying {}", seed.display()))?;
        let wal = PathBuf::from(format!("{}-wal", seed.display()));
        if wal.exists() {
            std::fs::copy(&wal, format!("{}-wal", db.sqlite_path().display()))?;
        }
        Ok(db)
    }

    /// A new, empty PostgreSQL database on the server at `admin_url`.
    pub async fn postgres(admin_url: &str) -> anyhow::Result<Self> {
        Self::postgres_from(admin_url, None).await
    }

    /// A new PostgreSQL database on the server at `admin_url`: a copy of the database
    /// `template` when given, else empty.
    pub async fn postgres_from(admin_url: &str, template: Option<&str>) -> anyhow::Result<Self> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "vow_bench_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut conn = sqlx::PgConnection::connect(admin_url)
            .await
            .with_context(|| "connecting to PostgreSQL (--pg-url)".to_string())?;
        sqlx::query(&format!("DROP DATABASE IF EXISTS {name}"))
            .execute(&mut conn)
            .await?;
        let template = template.map_or(String::new(), |t| format!(" TEMPLATE \"{t}\""));
        sqlx::query(&format!("CREATE DATABASE {name}{template}"))
            .execute(&mut conn)
            .await
            .context("creating the benchmark database")?;
        let dir = tempfile::Builder::new().prefix("vow-bench-").tempdir()?;
        Ok(Self::Postgres {
            admin_url: admin_url.to_string(),
            name,
            dir,
        })
    }

    /// Is this the PostgreSQL backend?
    pub fn is_postgres(&self) -> bool {
        matches!(self, Self::Postgres { .. })
    }

    fn dir(&self) -> &Path {
        match self {
            Self::Sqlite { dir } | Self::Postgres { dir, .. } => dir.path(),
        }
    }

    /// The SQLite file's path (meaningful for the SQLite backend only).
    pub fn sqlite_path(&self) -> PathBuf {
        self.dir().join("vow.db")
    }

    /// The `VOW_DATABASE_URL` for this database.
    pub fn url(&self) -> String {
        match self {
            Self::Sqlite { .. } => format!("sqlite://{}", self.sqlite_path().display()),
            Self::Postgres {
                admin_url, name, ..
            } => with_database(admin_url, name),
        }
    }

    /// Messages stored, counted directly in the database (vow should be stopped first).
    pub async fn count_messages(&self) -> anyhow::Result<u64> {
        match self {
            Self::Sqlite { .. } => {
                let conn = rusqlite::Connection::open_with_flags(
                    self.sqlite_path(),
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                )
                .context("opening the SQLite file read-only")?;
                let n: i64 = conn.query_row("SELECT count(*) FROM messages", [], |r| r.get(0))?;
                Ok(u64::try_from(n)?)
            }
            Self::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url()).await?;
                let n: i64 = sqlx::query_scalar("SELECT count(*) FROM messages")
                    .fetch_one(&mut conn)
                    .await?;
                Ok(u64::try_from(n)?)
            }
        }
    }

    /// Runs `sql` (statements without results) on the database directly.
    pub async fn execute(&self, sql: &str) -> anyhow::Result<()> {
        match self {
            Self::Sqlite { .. } => {
                rusqlite::Connection::open(self.sqlite_path())?.execute_batch(sql)?;
            }
            Self::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url()).await?;
                sqlx::raw_sql(sql).execute(&mut conn).await?;
            }
        }
        Ok(())
    }

    /// The first row of `sql`, whose columns are all text, read on the database directly.
    pub async fn first_row(&self, sql: &str) -> anyhow::Result<Vec<String>> {
        let row = match self {
            Self::Sqlite { .. } => {
                let conn = rusqlite::Connection::open(self.sqlite_path())?;
                let mut stmt = conn.prepare(sql)?;
                let n = stmt.column_count();
                stmt.query_row([], |r| (0..n).map(|i| r.get(i)).collect())?
            }
            Self::Postgres { .. } => {
                use sqlx::Row;
                let mut conn = sqlx::PgConnection::connect(&self.url()).await?;
                let row = sqlx::query(sql).fetch_one(&mut conn).await?;
                (0..row.len())
                    .map(|i| row.try_get(i))
                    .collect::<Result<_, _>>()?
            }
        };
        Ok(row)
    }

    /// PostgreSQL: the pids of the server processes connected to this database or to none
    /// (the background processes); empty for SQLite.
    pub async fn server_pids(&self) -> anyhow::Result<Vec<u32>> {
        let Self::Postgres {
            admin_url, name, ..
        } = self
        else {
            return Ok(Vec::new());
        };
        let mut conn = sqlx::PgConnection::connect(admin_url).await?;
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 OR datname IS NULL",
        )
        .bind(name)
        .fetch_all(&mut conn)
        .await?;
        Ok(pids
            .into_iter()
            .filter_map(|p| u32::try_from(p).ok())
            .collect())
    }

    /// Inbound rows, counted directly in the database (vow should be stopped first).
    pub async fn count_inbound(&self) -> anyhow::Result<InboundCounts> {
        const EVENTS: &str = "SELECT count(*), CAST(coalesce(sum(duplicates), 0) AS BIGINT),
             count(*) FILTER (WHERE state <> 'received') FROM inbound_events";
        const REJECTIONS: &str = "SELECT count(*) FROM inbound_rejections";
        let (events, duplicates, not_received, rejections): (i64, i64, i64, i64) = match self {
            Self::Sqlite { .. } => {
                let conn = rusqlite::Connection::open_with_flags(
                    self.sqlite_path(),
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                )
                .context("opening the SQLite file read-only")?;
                let (e, d, n) =
                    conn.query_row(EVENTS, [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
                (e, d, n, conn.query_row(REJECTIONS, [], |r| r.get(0))?)
            }
            Self::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url()).await?;
                let (e, d, n): (i64, i64, i64) =
                    sqlx::query_as(EVENTS).fetch_one(&mut conn).await?;
                let r: i64 = sqlx::query_scalar(REJECTIONS).fetch_one(&mut conn).await?;
                (e, d, n, r)
            }
        };
        Ok(InboundCounts {
            events: u64::try_from(events)?,
            duplicates: u64::try_from(duplicates)?,
            not_received: u64::try_from(not_received)?,
            rejections: u64::try_from(rejections)?,
        })
    }

    /// Drops the PostgreSQL database (SQLite's temp dir goes with the value).
    pub async fn cleanup(self) -> anyhow::Result<()> {
        if let Self::Postgres {
            admin_url, name, ..
        } = &self
        {
            let mut conn = sqlx::PgConnection::connect(admin_url).await?;
            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .execute(&mut conn)
                .await?;
        }
        Ok(())
    }
}

/// What the inbound tables hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboundCounts {
    /// Rows of `inbound_events`.
    pub events: u64,
    /// The sum of their `duplicates`.
    pub duplicates: u64,
    /// Rows in another state than `received` (quarantined, discarded).
    pub not_received: u64,
    /// Rows of `inbound_rejections`.
    pub rejections: u64,
}

/// `url` with its database name replaced by `name`.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{name}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// How to start vow.
#[derive(Debug, Clone)]
pub struct VowSettings {
    /// The `vow` binary.
    pub bin: PathBuf,
    /// Run delivery workers.
    pub workers: bool,
    /// `VOW_DELIVERY_MAX_IN_FLIGHT`, when set.
    pub max_in_flight: Option<usize>,
    /// `VOW_DELIVERY_MAX_PER_ENDPOINT`, when set.
    pub max_per_endpoint: Option<usize>,
    /// `VOW_OTEL_ENDPOINT`, when set: traces exported there.
    pub otel_endpoint: Option<String>,
    /// `VOW_MESSAGE_RETENTION_MINUTES`, when set.
    pub message_retention_minutes: Option<u32>,
}

/// A running `vow serve`.
#[derive(Debug)]
pub struct VowProcess {
    child: Child,
    pid: u32,
    base_url: String,
    log: PathBuf,
}

impl VowProcess {
    /// Starts vow on `db` and waits (up to 60 s) until `/api/v1/health` answers 204.
    pub async fn start(settings: &VowSettings, db: &Database) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = db.dir().join(format!("vow-{port}.log"));
        let log_file = std::fs::File::create(&log)?;
        let mut cmd = Command::new(&settings.bin);
        cmd.arg("serve");
        if db.is_postgres() {
            cmd.arg("--migrate");
        }
        cmd.env("VOW_LISTEN", format!("127.0.0.1:{port}"))
            .env("VOW_DATABASE_URL", db.url())
            .env("VOW_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("VOW_DELIVERY_WORKERS", settings.workers.to_string())
            .env("VOW_ALLOWED_SUBNETS", "127.0.0.0/8")
            .env("VOW_RETRY_SCHEDULE", "1s,1s,2s,5s")
            .env(
                "VOW_LOG",
                std::env::var("BENCH_VOW_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .kill_on_drop(true);
        if let Some(n) = settings.max_in_flight {
            cmd.env("VOW_DELIVERY_MAX_IN_FLIGHT", n.to_string());
        }
        if let Some(n) = settings.max_per_endpoint {
            cmd.env("VOW_DELIVERY_MAX_PER_ENDPOINT", n.to_string());
        }
        if let Some(endpoint) = &settings.otel_endpoint {
            cmd.env("VOW_OTEL_ENDPOINT", endpoint);
        }
        if let Some(minutes) = settings.message_retention_minutes {
            cmd.env("VOW_MESSAGE_RETENTION_MINUTES", minutes.to_string());
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", settings.bin.display()))?;
        let pid = child.id().context("vow exited at once")?;
        let mut vow = Self {
            child,
            pid,
            base_url: format!("http://127.0.0.1:{port}"),
            log,
        };
        vow.wait_healthy().await?;
        Ok(vow)
    }

    async fn wait_healthy(&mut self) -> anyhow::Result<()> {
        let client = reqwest::Client::new();
        let url = format!("{}/api/v1/health", self.base_url);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!("vow exited during start ({status}):\n{}", self.log_tail());
            }
            if let Ok(r) = client.get(&url).send().await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        bail!("vow did not become healthy in 60 s:\n{}", self.log_tail())
    }

    /// The process id (for `/proc` accounting).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The last lines vow logged (warnings and errors only).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Number of warning/error lines vow logged.
    pub fn log_lines(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// SIGTERM, then wait up to 30 s for a clean exit (SIGKILL after that).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => {
                eprintln!("warning: vow did not stop within 30 s of SIGTERM; killing it");
                self.child.kill().await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn the_database_name_is_replaced_or_added() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432", "b"),
            "postgres://postgres@127.0.0.1:5432/b"
        );
        assert_eq!(
            with_database("postgres://u:p@h:5432/postgres?sslmode=disable", "b"),
            "postgres://u:p@h:5432/b?sslmode=disable"
        );
    }
}
