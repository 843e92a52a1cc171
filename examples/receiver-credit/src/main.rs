//! `receiver-credit`: credits balances from signed webhook events, exactly once (see the
//! library docs and the README). SQLite in a file by default; PostgreSQL with
//! `--database-url postgres://…` (or `DATABASE_URL`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use receiver_credit::db::Db;
use receiver_credit::App;

/// Credits account balances from signed webhook events, exactly once.
#[derive(Parser)]
struct Args {
    /// Where to listen.
    #[arg(long, env = "RECEIVER_CREDIT_LISTEN", default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// A PostgreSQL URL (`postgres://user@host:5432/db`); without it, SQLite.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The SQLite database file.
    #[arg(
        long,
        env = "RECEIVER_CREDIT_SQLITE",
        default_value = "receiver-credit.db",
        conflicts_with = "database_url"
    )]
    sqlite: PathBuf,
    /// A Standard Webhooks secret (`whsec_…`); repeat it, or separate with commas, while one
    /// rotates out. Enables `POST /webhooks/standard-webhooks`.
    #[arg(
        long = "standard-webhooks-secret",
        env = "RECEIVER_CREDIT_STANDARD_WEBHOOKS_SECRETS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    standard_webhooks: Vec<String>,
    /// A Stripe-style signing secret; repeat it, or separate with commas. Enables
    /// `POST /webhooks/stripe`.
    #[arg(
        long = "stripe-secret",
        env = "RECEIVER_CREDIT_STRIPE_SECRETS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    stripe: Vec<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    if args.standard_webhooks.is_empty() && args.stripe.is_empty() {
        anyhow::bail!("configure a source: --standard-webhooks-secret and/or --stripe-secret");
    }
    let (db, what) = match &args.database_url {
        Some(url) => (
            Db::postgres(url).await.context("opening PostgreSQL")?,
            "PostgreSQL".to_owned(),
        ),
        None => (
            Db::sqlite(&args.sqlite).context("opening SQLite")?,
            format!("SQLite at {}", args.sqlite.display()),
        ),
    };
    let mut app = App::new(db);
    if !args.standard_webhooks.is_empty() {
        app = app
            .with_standard_webhooks(&args.standard_webhooks)
            .context("configuring the standard-webhooks source")?;
    }
    if !args.stripe.is_empty() {
        app = app
            .with_stripe(&args.stripe)
            .context("configuring the stripe source")?;
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    tracing::info!(listen = %listener.local_addr()?, database = %what, "receiver-credit is serving");
    receiver_credit::serve(listener, app)
        .await
        .context("serving")
}
