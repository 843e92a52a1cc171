//! `vow`: the command-line front. Thin: parses arguments, loads configuration, calls the library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use vow_server::cli::completions::CompletionsArgs;
use vow_server::cli::listen::ListenArgs;
use vow_server::cli::login::LoginArgs;
use vow_server::cli::replay::ReplayArgs;
use vow_server::cli::send::SendArgs;
use vow_server::cli::sign::SignArgs;
use vow_server::cli::tail::TailArgs;
use vow_server::cli::verify::{Verdict, VerifyArgs};
use vow_server::startup::{self, Migrate, Server};
use vow_server::{cli, telemetry, Config};

/// mimalloc instead of glibc's allocator, whose malloc and free took about a fifth of vow's CPU
/// under load; with it vow spends 11–29 % less CPU per message (BENCHMARKS.md, eleventh part).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// vow: a self-hosted webhooks server. Sends signed webhooks reliably, receives third-party
/// webhooks safely, and makes its own API idempotent. Runs on embedded SQLite, or PostgreSQL.
///
/// Settings come from built-in defaults, then `--config FILE`, then `VOW_*` environment
/// variables (VOW_LISTEN, VOW_DATABASE_URL, VOW_ADMIN_TOKEN, ...).
#[derive(Debug, Parser)]
#[command(
    name = "vow",
    version,
    propagate_version = true,
    after_help = "Examples:\n  vow serve\n  vow send --app my-shop --type order.created --data @order.json\n  vow help verify"
)]
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
    #[command(
        after_help = "Examples:\n  vow serve\n  VOW_DATABASE_URL=postgres://vow@db/vow vow serve --migrate"
    )]
    Serve {
        /// Apply PostgreSQL migrations before serving (SQLite always migrates on start).
        #[arg(long)]
        migrate: bool,
    },
    /// Apply pending database migrations, then exit.
    #[command(after_help = "Example:\n  VOW_DATABASE_URL=postgres://vow@db/vow vow migrate")]
    Migrate,
    /// Run seed 000's six delivery scenarios end to end on a throwaway SQLite store and print
    /// the transcript.
    #[command(after_help = "Example:\n  vow demo")]
    Demo,
    /// Print the built-in default configuration, with comments.
    #[command(after_help = "Example:\n  vow config-defaults > vow.toml")]
    ConfigDefaults,
    /// Print the signature headers vow would send with a body, to test a receiver.
    Sign(SignArgs),
    /// Verify a captured request offline and say exactly why it fails (exit 0 valid, 1
    /// invalid, 2 usage error).
    Verify(VerifyArgs),
    /// Create a message in an application and show the endpoints it is going to.
    Send(SendArgs),
    /// Check a token against a running vow and save it as a profile.
    Login(LoginArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Relay an application's deliveries to a URL on this machine (no public URL needed).
    Listen(ListenArgs),
    /// Replay an endpoint's or an inbound source's dead letters and follow them to the end.
    Replay(ReplayArgs),
    /// Stream delivery attempts live, as they happen (filter by application, endpoint, outcome).
    Tail(TailArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::ConfigDefaults => {
            print!("{}", vow_server::config::DEFAULTS);
            return Ok(ExitCode::SUCCESS);
        }
        Command::Sign(args) => return cli::sign::run(args).map(|()| ExitCode::SUCCESS),
        // Valid 0, invalid 1, and a usage error 2 (as clap's own).
        Command::Verify(args) => {
            return Ok(match cli::verify::run(args) {
                Ok(Verdict::Valid) => ExitCode::SUCCESS,
                Ok(Verdict::Invalid) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(2)
                }
            })
        }
        Command::Completions(args) => {
            cli::completions::run(args, &mut Cli::command());
            return Ok(ExitCode::SUCCESS);
        }
        Command::Send(args) => return client(cli::send::run(args)),
        Command::Login(args) => return client(cli::login::run(args)),
        Command::Replay(args) => return client(cli::replay::run(args)),
        Command::Tail(args) => return client(cli::tail::run(args)),
        // Many deliveries in flight: a runtime with a thread per core.
        Command::Listen(args) => {
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            runtime.block_on(cli::listen::run(args))?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Serve { .. } | Command::Migrate | Command::Demo => {}
    }
    let config = Config::load(cli.config.as_deref())?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    // The trace exporter, if configured, runs on this runtime.
    let telemetry = {
        let _runtime = runtime.enter();
        telemetry::init(&config)?
    };
    let outcome = runtime.block_on(async move {
        match cli.command {
            Command::Serve { migrate } => serve(config, migrate).await,
            Command::Migrate => {
                startup::migrate(&config).await?;
                tracing::info!("migrations applied");
                Ok(())
            }
            Command::Demo => vow_server::demo::run().await.map(drop),
            _ => Ok(()),
        }
    });
    telemetry.shutdown();
    outcome?;
    Ok(ExitCode::SUCCESS)
}

/// Runs a client command (no configuration, no logging set-up) on a small runtime.
fn client(
    command: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(command)?;
    Ok(ExitCode::SUCCESS)
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
