//! Seed 004's consumer, built on `vow-receiver`: signed `credit` events are applied to an
//! account balance exactly once, however often and however concurrently they are delivered.
//!
//! - `POST /webhooks/standard-webhooks`: Standard Webhooks (`webhook-id`, `webhook-timestamp`,
//!   `webhook-signature`; `whsec_` secrets); the event id is the signed `webhook-id`.
//! - `POST /webhooks/stripe`: Stripe-style (`Stripe-Signature: t=…,v1=…`); the event id is the
//!   body's `/id` and the account scope its `/account` (Connect), both optional.
//! - `GET /balances/{account}`: `{"account": "a1", "balance": 5}`, or 404.
//!
//! An event is `{"type": "credit", "data": {"account": "a1", "amount": 5}}` (a positive
//! integer); another `type` is acknowledged and ignored (claimed, so never looked at again).
//! Answers: 200 `processed` (credited, with its claim, in one transaction) or `duplicate`
//! (already credited: nothing done); 202 `quarantined` (another payload under a credited id:
//! kept, not applied); 400 / 401 when verification fails (nothing stored); 422 for an authentic
//! event that is not a valid credit (nothing stored); 503 when the credit or the database fails
//! (nothing stored: the provider's redelivery credits it).
//!
//! # Layout
//! - [`db`]: the schema, the credit on each backend, and the balance read.
//! - [`event`]: the events this app understands.
//! - this file: the [`App`] state (database, receivers, clock, fault switches), the [`router`]
//!   and its handlers, and [`serve`].

pub mod db;
pub mod event;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde_json::json;
use tokio::sync::Notify;
use vow_receiver::{postgres, sqlite, Config, ConfigError, Delivery, Locator, Outcome, Receiver};
use vow_signature::provider::Scheme;

use crate::db::{Db, DbError};
use crate::event::Event;

/// The source name (and route) of the Standard Webhooks receiver.
pub const STANDARD_WEBHOOKS: &str = "standard-webhooks";
/// The source name (and route) of the Stripe-style receiver.
pub const STRIPE: &str = "stripe";

/// The service's state.
#[derive(Clone)]
pub struct App {
    db: Db,
    receivers: Vec<Arc<Receiver>>,
    clock: Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>,
    faults: Arc<Faults>,
}

/// Switches the tests flip to make a credit fail, or a request die after its commit.
#[derive(Default)]
struct Faults {
    failing_credits: AtomicU32,
    stall_after_commit: Mutex<Option<Arc<Notify>>>,
}

impl App {
    /// The service on `db` with no source yet, on the system clock.
    pub fn new(db: Db) -> Self {
        Self {
            db,
            receivers: Vec::new(),
            clock: Arc::new(Utc::now),
            faults: Arc::default(),
        }
    }

    /// The same, receiving Standard Webhooks signed with any of `secrets` (`whsec_…`).
    pub fn with_standard_webhooks(self, secrets: &[String]) -> Result<Self, ConfigError> {
        self.with(Config::new(
            STANDARD_WEBHOOKS,
            Scheme::StandardWebhooks,
            secrets,
        ))
    }

    /// The same, receiving Stripe-style deliveries signed with any of `secrets`.
    pub fn with_stripe(self, secrets: &[String]) -> Result<Self, ConfigError> {
        let config = Config::new(STRIPE, Scheme::Stripe, secrets)
            .with_account(Locator::JsonPointer("/account".into()));
        self.with(config)
    }

    fn with(mut self, config: Config) -> Result<Self, ConfigError> {
        self.receivers.push(Arc::new(Receiver::new(config)?));
        Ok(self)
    }

    /// The same on `clock` (tests pin it).
    pub fn with_clock(self, clock: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Self {
        Self {
            clock: Arc::new(clock),
            ..self
        }
    }

    /// Makes the next `n` credits fail after their balance update, as if the database had gone
    /// away, so the rollback of the credit with its claim can be seen.
    pub fn fail_next_credits(&self, n: u32) {
        self.faults.failing_credits.store(n, Ordering::SeqCst);
    }

    /// Makes the next request whose credit commits never answer, as if the process died between
    /// the commit and the response; the returned `Notify` fires once the commit is done.
    pub fn stall_after_next_commit(&self) -> Arc<Notify> {
        let committed = Arc::new(Notify::new());
        let mut stall = self.faults.stall_after_commit.lock().unwrap();
        *stall = Some(Arc::clone(&committed));
        committed
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    fn receiver(&self, source: &str) -> Option<&Receiver> {
        let found = self.receivers.iter().find(|r| r.source() == source);
        found.map(|r| &**r)
    }

    /// Applies `event` with the claim of `delivery`, in one transaction.
    async fn apply(&self, delivery: Delivery, event: Event) -> Outcome<(), CreditError> {
        let faults = Arc::clone(&self.faults);
        match &self.db {
            Db::Sqlite(conn) => {
                sqlite::process_shared(conn, delivery, move |c| {
                    if let Event::Credit { account, amount } = &event {
                        db::credit_sqlite(c, account, *amount)?;
                    }
                    faults.credit_written()
                })
                .await
            }
            Db::Postgres(pool) => {
                postgres::process(pool, &delivery, move |c| {
                    Box::pin(async move {
                        if let Event::Credit { account, amount } = &event {
                            db::credit_postgres(c, account, *amount).await?;
                        }
                        faults.credit_written()
                    })
                })
                .await
            }
        }
    }
}

impl Faults {
    /// After the credit's writes: fails if a failure is due.
    fn credit_written(&self) -> Result<(), CreditError> {
        let due = self
            .failing_credits
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        match due {
            Ok(_) => Err(CreditError::Injected),
            Err(_) => Ok(()),
        }
    }

    /// After a commit: never returns if a stall is due.
    async fn committed(&self) {
        let stall = self.stall_after_commit.lock().unwrap().take();
        if let Some(committed) = stall {
            committed.notify_one();
            std::future::pending::<()>().await;
        }
    }
}

/// `POST /webhooks/{source}` and `GET /balances/{account}`.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/webhooks/{source}", post(receive_event))
        .route("/balances/{account}", get(get_balance))
        .with_state(app)
}

/// Serves the [`router`] on `listener` until the task is dropped or the listener fails.
pub async fn serve(listener: tokio::net::TcpListener, app: App) -> std::io::Result<()> {
    axum::serve(listener, router(app)).await
}

/// Why a credit was not applied. Nothing was stored: the redelivery credits it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CreditError {
    /// The database failed during the credit.
    #[error("the credit could not be written")]
    Db(#[from] DbError),
    /// [`App::fail_next_credits`] asked for it.
    #[error("an injected fault")]
    Injected,
}

impl IntoResponse for CreditError {
    fn into_response(self) -> Response {
        tracing::error!(error = %self, "a credit failed; answered 503");
        let detail = "The credit was not applied; deliver the event again.";
        error(StatusCode::SERVICE_UNAVAILABLE, "credit_failed", detail)
    }
}

async fn receive_event(
    State(app): State<App>,
    Path(source): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(receiver) = app.receiver(&source) else {
        let detail = "No source of that name is configured.";
        return error(StatusCode::NOT_FOUND, "unknown_source", detail);
    };
    let delivery = match receiver.accept_http(&headers, body, "", (app.clock)()) {
        Ok(delivery) => delivery,
        Err(rejection) => return rejection.into_response(),
    };
    let event = match Event::parse(delivery.body()) {
        Ok(event) => event,
        Err(invalid) => {
            let detail = invalid.to_string();
            return error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_event", &detail);
        }
    };
    let outcome = app.apply(delivery, event).await;
    if let Outcome::Processed(()) = outcome {
        app.faults.committed().await;
    }
    outcome.into_response()
}

async fn get_balance(State(app): State<App>, Path(account): Path<String>) -> Response {
    match app.db.balance(&account).await {
        Ok(Some(balance)) => {
            Json(json!({ "account": account, "balance": balance })).into_response()
        }
        Ok(None) => error(StatusCode::NOT_FOUND, "unknown_account", "No credit yet."),
        Err(e) => {
            tracing::error!(error = %e, "reading a balance failed");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "Retry later.",
            )
        }
    }
}

/// `{"code": …, "detail": …}`, as vow-receiver answers its own refusals.
fn error(status: StatusCode, code: &str, detail: &str) -> Response {
    (status, Json(json!({ "code": code, "detail": detail }))).into_response()
}
