//! Start-up: open the configured store, settle the admin token, serve until told to stop.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use vow_store::Store;
use vow_store_postgres::PgStore;
use vow_store_sqlite::SqliteStore;

use crate::auth::{self, AdminToken};
use crate::config::{Config, Database};
use crate::http::{self, ApiSettings, AppState};

/// Whether `serve` may migrate PostgreSQL itself (SQLite always migrates on open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migrate {
    /// Migrate before serving.
    Yes,
    /// Refuse to start when migrations are pending.
    No,
}

/// Opens the store the configuration names.
pub async fn open_store(config: &Config, migrate: Migrate) -> anyhow::Result<Arc<dyn Store>> {
    match config.database()? {
        Database::Sqlite(path) => {
            let store = tokio::task::spawn_blocking(move || SqliteStore::open(&path))
                .await?
                .context("opening the SQLite store")?;
            Ok(Arc::new(store))
        }
        Database::Postgres(url) => {
            let store = PgStore::connect(&url, config.database_max_connections)
                .await
                .context("connecting to PostgreSQL")?;
            if migrate == Migrate::Yes {
                store.migrate().await.context("migrating PostgreSQL")?;
            } else if store.pending_migrations().await? {
                anyhow::bail!(
                    "the PostgreSQL schema is missing or out of date: run `vow migrate` or start with `vow serve --migrate`"
                );
            }
            Ok(Arc::new(store))
        }
    }
}

/// Applies PostgreSQL migrations (`vow migrate`); SQLite migrates on open.
pub async fn migrate(config: &Config) -> anyhow::Result<()> {
    open_store(config, Migrate::Yes).await.map(drop)
}

/// A server that is bound and ready: tests read `addr`, then `run` it.
pub struct Server {
    listener: TcpListener,
    state: AppState,
    admin: AdminToken,
}

impl Server {
    /// Binds `listener` for `store` with `config`'s settings, settling the admin token.
    pub async fn build(
        config: &Config,
        store: Arc<dyn Store>,
        listener: TcpListener,
    ) -> anyhow::Result<Server> {
        let admin = auth::resolve_admin_token(&config.admin_token, store.as_ref()).await?;
        let settings = ApiSettings {
            max_body_bytes: config.max_body_bytes,
            secret_rotation_grace: Duration::from_secs(config.secret_rotation_grace_seconds.into()),
        };
        let state = AppState {
            store,
            settings: Arc::new(settings),
        };
        Ok(Server {
            listener,
            state,
            admin,
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// The token generated at this start, if one was (to show the operator once).
    pub fn generated_token(&self) -> Option<&str> {
        match &self.admin {
            AdminToken::Generated(_, token) => Some(token),
            _ => None,
        }
    }

    /// Serves until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let router = http::router(self.state, self.admin.hash());
        http::serve(self.listener, router, shutdown)
            .await
            .context("serving HTTP")
    }
}
