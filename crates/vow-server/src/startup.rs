//! Start-up: open the configured store, settle the admin token, serve until told to stop.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use vow_store_postgres::PgStore;
use vow_store_sqlite::SqliteStore;

use crate::admission::DueBound;
use crate::auth::{self, AdminToken};
use crate::config::{Config, Database};
use crate::delivery::alert::DeadLetterAlert;
use crate::delivery::operational::Operational;
use crate::delivery::{DeliverySettings, Dispatcher};
use crate::forwarding::Forwarder;
use crate::http;
use crate::readiness::{Readiness, Running, WorkerKind};
use crate::relay::expiry::Expiry;
use crate::retention::Cleaner;
use crate::state::{ApiSettings, AppState, Clock, Shared};

pub use crate::stores::Stores;

/// Whether `serve` may migrate PostgreSQL itself (SQLite always migrates on open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migrate {
    /// Migrate before serving.
    Yes,
    /// Refuse to start when migrations are pending.
    No,
}

/// Opens the store the configuration names.
pub async fn open_store(config: &Config, migrate: Migrate) -> anyhow::Result<Stores> {
    match config.database()? {
        Database::Sqlite(path) => {
            let store = tokio::task::spawn_blocking(move || SqliteStore::open(&path))
                .await?
                .context("opening the SQLite store")?;
            store.shed_intake_after(config.overload_max_wait());
            Ok(Stores::new(store))
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
            warn_when_vacuum_off(&store).await;
            store.shed_intake_after(config.overload_max_wait());
            let stores = Stores::new(store.clone());
            store.spawn_work_listener(stores.wake.clone(), config.delivery_workers);
            Ok(stores)
        }
    }
}

/// Warns when PostgreSQL will not vacuum the work queues: they then slow down as vow runs.
async fn warn_when_vacuum_off(store: &PgStore) {
    match store.vacuum_off().await {
        Ok(off) if off.is_empty() => {}
        Ok(off) => tracing::warn!(
            why = %off.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
            "PostgreSQL will not autovacuum vow's work queues: claims slow down as delivered rows \
             pile up. Turn autovacuum on, or run VACUUM ANALYZE on deliveries and inbound_events \
             every minute or so"
        ),
        Err(e) => tracing::debug!(error = %e, "could not read PostgreSQL's autovacuum settings"),
    }
}

/// Applies PostgreSQL migrations (`vow migrate`); SQLite migrates on open.
pub async fn migrate(config: &Config) -> anyhow::Result<()> {
    open_store(config, Migrate::Yes).await.map(drop)
}

/// The delivery workers `config` describes, for `queue`; `wake` tells them new work is due.
pub async fn dispatcher(
    config: &Config,
    stores: &Stores,
    wake: Arc<Notify>,
) -> anyhow::Result<Dispatcher> {
    let settings = config.delivery()?;
    let egress = egress(config, &settings)?;
    let dispatcher = Dispatcher::new(stores.queue.clone(), egress, settings, wake.clone());
    if config.operational_webhook_url.is_empty() {
        return Ok(dispatcher);
    }
    let operational =
        Operational::ensure(stores.store.clone(), &config.operational_webhook_url, wake)
            .await
            .context("setting up operational webhooks")?;
    Ok(dispatcher.with_operational(operational))
}

/// The SSRF-guarded outbound client the workers send with.
fn egress(
    config: &Config,
    settings: &DeliverySettings,
) -> anyhow::Result<vow_egress::EgressClient> {
    vow_egress::EgressClient::new(vow_egress::EgressConfig {
        policy: config.address_policy()?,
        request_timeout: settings.timeout,
        // Many endpoints can share one host (a gateway, or one receiver in tests): every
        // connection an attempt may hold stays open, rather than reconnecting per attempt.
        pool_max_idle_per_host: settings.max_in_flight,
        ..Default::default()
    })
    .context("building the outbound HTTP client")
}

/// The inbound workers `config` describes: they forward inbound events to their sources'
/// destinations with the delivery workers' schedule, timeout, lease and concurrency.
pub fn forwarder(config: &Config, stores: &Stores) -> anyhow::Result<Forwarder> {
    let settings = config.delivery()?;
    let egress = egress(config, &settings)?;
    Ok(Forwarder::new(
        stores.inbound.clone(),
        egress,
        settings,
        stores.inbound_wake.clone(),
    ))
}

/// A server that is bound and ready: tests read `addr`, then `run` it.
pub struct Server {
    listener: TcpListener,
    state: AppState,
    admin: AdminToken,
    dispatcher: Option<Dispatcher>,
    forwarder: Option<Forwarder>,
    cleaner: Cleaner,
    expiry: Expiry,
    alert: Option<DeadLetterAlert>,
    /// How far the due backlog may grow before intake is refused, if at all, where the
    /// dispatcher runs ([`crate::admission`]).
    due_bound: Option<DueBound>,
}

impl Server {
    /// Binds `listener` for `store` with `config`'s settings, settling the admin token.
    pub async fn build(
        config: &Config,
        stores: Stores,
        listener: TcpListener,
    ) -> anyhow::Result<Server> {
        let admin = auth::resolve_admin_token(&config.admin_token, stores.store.as_ref()).await?;
        let wake = stores.wake.clone();
        let relay = Arc::new(crate::relay::Hub::default());
        let (dispatcher, forwarder) = if config.delivery_workers {
            (
                Some(
                    dispatcher(config, &stores, wake.clone())
                        .await?
                        .with_relay(relay.clone()),
                ),
                Some(forwarder(config, &stores)?.with_relay(relay.clone())),
            )
        } else {
            (None, None)
        };
        // Inbound quarantines are reported whether or not this process delivers: the event is
        // stored, and whichever process runs workers sends it.
        let operational = match config.operational_webhook_url.as_str() {
            "" => None,
            url => Some(
                Operational::ensure(stores.store.clone(), url, wake.clone())
                    .await
                    .context("setting up operational webhooks")?,
            ),
        };
        let settings = ApiSettings {
            max_body_bytes: config.max_body_bytes,
            secret_rotation_grace: Duration::from_secs(config.secret_rotation_grace_seconds.into()),
            payload_retention_days: config.payload_retention_days.into(),
            idempotency_required: config
                .idempotency_required()
                .map_err(|name| anyhow::anyhow!("require_idempotency_key names {name:?}"))?,
            retry_schedule: config.schedule()?,
            idempotency: config.idempotency(),
            rejections_kept: config.inbound_rejections_kept,
            console: config.console(),
            portal: config.portal(),
        };
        let alert = config.dead_letter_alert().map(|settings| {
            DeadLetterAlert::new(stores.store.clone(), operational.clone(), settings)
        });
        let state = AppState::new(Shared {
            store: stores.store.clone(),
            queue: stores.queue.clone(),
            inbound: stores.inbound.clone(),
            settings: Arc::new(settings),
            wake,
            inbound_wake: stores.inbound_wake.clone(),
            operational,
            clock: Clock::default(),
            in_flight: Arc::default(),
            relay: relay.clone(),
            readiness: Arc::new(Readiness::with_workers(&started(&dispatcher, &forwarder))),
            admission: Arc::default(),
        });
        let expiry = Expiry::new(
            stores.store.clone(),
            stores.inbound.clone(),
            relay,
            Duration::from_secs(config.relay_expiry_seconds.into()),
        );
        let cleaner = Cleaner::new(stores, config.retention());
        Ok(Server {
            listener,
            due_bound: config.overload_due_bound(),
            state,
            admin,
            dispatcher,
            forwarder,
            cleaner,
            expiry,
            alert,
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// The clock the API answers by; tests move it ahead to reach expiries.
    pub fn clock(&self) -> Clock {
        self.state.clock.clone()
    }

    /// The token generated at this start, if one was (to show the operator once).
    pub fn generated_token(&self) -> Option<&str> {
        match &self.admin {
            AdminToken::Generated(_, token) => Some(token),
            _ => None,
        }
    }

    /// Serves (and delivers) until `shutdown` is cancelled; then finishes in-flight requests
    /// and attempts.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let readiness = self.state.readiness.clone();
        let occupancy = self.dispatcher.as_ref().map(Dispatcher::occupancy);
        let workers = self.dispatcher.map(|d| {
            let running = readiness.running(WorkerKind::Delivery);
            spawn_worker(running, d.run(shutdown.clone()))
        });
        let forwarders = self.forwarder.map(|f| {
            let running = readiness.running(WorkerKind::Inbound);
            spawn_worker(running, f.run(shutdown.clone()))
        });
        let stopping = shutdown.clone();
        tokio::spawn(async move {
            stopping.cancelled().await;
            readiness.stop();
        });
        tokio::spawn(self.cleaner.run(Duration::from_secs(60), shutdown.clone()));
        tokio::spawn(self.expiry.run(shutdown.clone()));
        if let Some(alert) = self.alert {
            tokio::spawn(alert.run(shutdown.clone()));
        }
        if let (Some(bound), Some(occupancy)) = (self.due_bound, occupancy) {
            let clock = self.state.clock.clone();
            let (admission, store) = (self.state.admission.clone(), self.state.store.clone());
            let now = move || clock.now();
            let recording = occupancy.clone();
            let on_the_endpoint = move || occupancy.on_the_endpoint();
            let recorded_of_places = move || recording.recorded_of_places();
            let stop = shutdown.clone();
            let watch =
                admission.watch(store, now, bound, on_the_endpoint, recorded_of_places, stop);
            tokio::spawn(watch);
        }
        let router = http::router(self.state, self.admin.hash());
        let served = http::serve(self.listener, router, shutdown).await;
        if let Some(workers) = workers {
            workers.await.context("the delivery workers panicked")?;
        }
        if let Some(forwarders) = forwarders {
            forwarders.await.context("the inbound workers panicked")?;
        }
        served.context("serving HTTP")
    }
}

/// Spawns a worker loop that holds `running` until it returns or panics.
fn spawn_worker(
    running: Running,
    work: impl std::future::Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _running = running;
        work.await;
    })
}

/// The kinds of worker this process was built with.
fn started(dispatcher: &Option<Dispatcher>, forwarder: &Option<Forwarder>) -> Vec<WorkerKind> {
    let built = [
        (WorkerKind::Delivery, dispatcher.is_some()),
        (WorkerKind::Inbound, forwarder.is_some()),
    ];
    built
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(kind, _)| kind)
        .collect()
}
