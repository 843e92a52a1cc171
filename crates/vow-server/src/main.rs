//! `vow`: the command-line front. Thin: parses arguments, loads configuration, calls the library.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use vow_server::startup::{self, Migrate, Server};
use vow_server::{telemetry, Config};

/// vow: a self-hosted webhooks server. Sends signed webhooks reliably, receives third-party
/// webhooks safely, and makes its own API idempotent. Runs on embedded SQLite, or PostgreSQL.
///
/// Settings come from built-in defaults, then `--config FILE`, then `VOW_*` environment
/// variables (VOW_LISTEN, VOW_DATABASE_URL, VOW_ADMIN_TOKEN, ...).
#[derive(Debug, Parser)]
#[command(name = "vow", version, propagate_version = true)]
struct Cli {
    /// A TOML file of settings (keys as printed by `vow config-defaults`), applied over the defaults.
    #[arg(long, global = true, value_name = "FILE", env = "VOW_CONFIG")]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the API and run the delivery workers until SIGINT/SIGTERM (then finish in-flight
    /// requests and attempts).
    Serve {
        /// Apply PostgreSQL migrations before serving (SQLite always migrates on start).
        #[arg(long)]
        migrate: bool,
    },
    /// Apply pending database migrations, then exit.
    Migrate,
    /// Run seed 000's six delivery scenarios end to end on a throwaway SQLite store and print
    /// the transcript.
    Demo,
    /// Print the built-in default configuration, with comments.
    ConfigDefaults,
    /// Relay an application's deliveries to a URL on this machine (no public URL needed).
    Listen(vow_server::cli::listen::ListenArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::ConfigDefaults = cli.command {
        print!("{}", vow_server::config::DEFAULTS);
        return Ok(());
    }
    if let Command::Listen(args) = &cli.command {
        let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
        return runtime.block_on(vow_server::cli::listen::run(args));
    }
    let config = Config::load(cli.config.as_deref())?;
    telemetry::init(&config.log, config.log_format);
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        match cli.command {
            Command::Serve { migrate } => serve(config, migrate).await,
            Command::Migrate => {
                startup::migrate(&config).await?;
                tracing::info!("migrations applied");
                Ok(())
            }
            Command::Demo => vow_server::demo::run().await.map(drop),
            Command::ConfigDefaults | Command::Listen(_) => Ok(()),
        }
    })
}

async fn serve(config: Config, migrate: bool) -> anyhow::Result<()> {
    let migrate = if migrate { Migrate::Yes } else { Migrate::No };
    let stores = startup::open_store(&config, migrate).await?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {} (setting `listen`)", config.listen))?;
    let server = Server::build(&config, stores, listener).await?;
    if let Some(token) = server.generated_token() {
        eprintln!(
            "\nvow generated an admin API token. It is shown only now; vow keeps just its hash.\n\n    {token}\n\nUse it as `Authorization: Bearer <token>`. Set VOW_ADMIN_TOKEN to choose your own.\n"
        );
    }
    let addr = server.local_addr()?;
    tracing::info!(%addr, "vow is listening");
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    server.run(shutdown).await?;
    tracing::info!("vow stopped");
    Ok(())
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
async fn stop_on_signal(shutdown: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down: finishing in-flight requests");
    shutdown.cancel();
}
