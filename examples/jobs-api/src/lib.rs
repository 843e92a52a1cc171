//! Seed 000's `POST /jobs`, built on `vow-idempotency`: the smallest service that shows how any
//! axum service on SQLite or PostgreSQL gets `Idempotency-Key` right.
//!
//! - `POST /jobs` with a JSON object creates a job: `202 {"id":"job_1"}` (ids are sequential).
//!   - Same `Idempotency-Key`, same body: the same job, replayed with `Idempotent-Replayed: true`.
//!   - Same key, other body: 422 `idempotency-key-reused`, naming the JSON pointers that differ.
//!   - No key: a new job every time.
//!   - The first request with the key still running: 409 with `Retry-After`, or, with
//!     `Prefer: wait=N` (N ≤ 30), its outcome once it is there.
//!   - A bad key: 400 `idempotency-key-invalid`; a body that is not a JSON object: 400. Nothing is
//!     stored for either.
//!   - The database failing while the job is written: 503, the job and its key's record rolled
//!     back and released, so a retry with the key creates it.
//! - `GET /jobs/{id}`: the job, or 404.
//!
//! The job row and the key's record commit in ONE transaction
//! (`vow_idempotency::http::{sqlite, postgres}::run`), so a crash leaves either both or neither.
//! There is no authentication: every caller is the principal `anonymous`. A real service puts
//! the authenticated caller there, so that keys of different callers never meet.
//!
//! # Layout
//! - [`db`]: the schema, and the job writes and reads on each backend.
//! - this file: the [`App`] state, the [`router`] and its two handlers, and [`serve`].

pub mod db;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use vow_idempotency::http::{self, postgres, sqlite, Done, Failure, Outcome};
use vow_idempotency::{IdempotencyKey, Scope, StoredResponse};

use crate::db::{Db, DbError};

/// The route template keys are scoped to.
pub const JOBS_ROUTE: &str = "/jobs";

/// The one principal of this example (it has no authentication).
pub const PRINCIPAL: &str = "anonymous";

/// The service's state: the database, its clock, and a fault switch.
#[derive(Clone)]
pub struct App {
    db: Db,
    clock: Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>,
    faults: Arc<AtomicU32>,
}

impl App {
    /// The service on `db`, on the system clock.
    pub fn new(db: Db) -> Self {
        Self {
            db,
            clock: Arc::new(Utc::now),
            faults: Arc::new(AtomicU32::new(0)),
        }
    }

    /// The same on `clock` (tests move time forward with it).
    pub fn with_clock(self, clock: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Self {
        Self {
            clock: Arc::new(clock),
            ..self
        }
    }

    /// Makes the next `n` job writes fail after the job row is written, as if the database had
    /// gone away, so the rollback and the release of the key's record can be seen.
    pub fn fail_next_writes(&self, n: u32) {
        self.faults.store(n, Ordering::SeqCst);
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

/// `POST /jobs` and `GET /jobs/{id}`.
pub fn router(app: App) -> Router {
    Router::new()
        .route(JOBS_ROUTE, post(create_job))
        .route("/jobs/{id}", get(get_job))
        .with_state(app)
}

/// Serves the [`router`] on `listener` until the task is dropped or the listener fails.
pub async fn serve(listener: tokio::net::TcpListener, app: App) -> std::io::Result<()> {
    axum::serve(listener, router(app)).await
}

/// Why a job was not created. Nothing was stored: a retry with the same key runs again.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The database failed while the job was written.
    #[error("the job could not be written")]
    Db(#[from] DbError),
    /// [`App::fail_next_writes`] asked for it.
    #[error("an injected fault")]
    Injected,
}

impl IntoResponse for CreateError {
    fn into_response(self) -> Response {
        let detail = "The job was not created; retry with the same Idempotency-Key.";
        problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable",
            detail,
        )
    }
}

async fn create_job(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let key = match http::key(&headers) {
        Ok(key) => key,
        Err(invalid) => return invalid.into_response(),
    };
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request @ Value::Object(_)) => request,
        _ => {
            let detail = "The body must be a JSON object.";
            return problem(StatusCode::BAD_REQUEST, "Bad Request", detail);
        }
    };
    let now = (app.clock)();
    let once = key.map(|key| {
        http::Request::new(scope(key), &body, now).with_wait(http::prefer_wait(&headers))
    });
    let faults = Arc::clone(&app.faults);
    let outcome = match &app.db {
        Db::Sqlite(conn) => {
            sqlite::run(conn, once, move |c| {
                let id = db::insert_sqlite(c, &request, now);
                created(
                    id.map_err(|e| Failure::Retry(CreateError::from(e)))?,
                    &faults,
                )
            })
            .await
        }
        Db::Postgres(pool) => {
            postgres::run(pool, once, move |c| {
                Box::pin(async move {
                    let id = db::insert_postgres(c, &request, now).await;
                    created(
                        id.map_err(|e| Failure::Retry(CreateError::from(e)))?,
                        &faults,
                    )
                })
            })
            .await
        }
    };
    if let Outcome::StoreFailed { error, .. } = &outcome {
        tracing::error!(error = %error, "idempotency records failed; answered 503");
    }
    outcome.into_response()
}

/// The key's scope on this route.
fn scope(key: IdempotencyKey) -> Scope {
    Scope {
        principal: PRINCIPAL.into(),
        application: None,
        method: "POST".into(),
        route: JOBS_ROUTE.into(),
        key,
    }
}

/// The job `id` was written: `202 {"id": …}` with its `Location`, unless a fault is due.
fn created(id: String, faults: &AtomicU32) -> Result<Done<String>, Failure<CreateError>> {
    let due = faults.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    if due.is_ok() {
        return Err(Failure::Retry(CreateError::Injected));
    }
    let mut response = StoredResponse::json(202, &json!({ "id": id }));
    response
        .headers
        .push(("location".into(), format!("{JOBS_ROUTE}/{id}")));
    response.resource = Some(id.clone());
    Ok(Done {
        value: id,
        response,
    })
}

async fn get_job(State(app): State<App>, Path(id): Path<String>) -> Response {
    match app.db.job(&id).await {
        Ok(Some(job)) => Json(job).into_response(),
        Ok(None) => problem(StatusCode::NOT_FOUND, "Not Found", "There is no such job."),
        Err(error) => {
            tracing::error!(error = %error, "reading a job failed");
            problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable",
                "Retry later.",
            )
        }
    }
}

/// A plain `application/problem+json` answer.
fn problem(status: StatusCode, title: &str, detail: &str) -> Response {
    let body = json!({
        "type": "about:blank",
        "title": title,
        "status": status.as_u16(),
        "detail": detail,
    });
    let mut out = (status, body.to_string()).into_response();
    out.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static(vow_idempotency::problem::CONTENT_TYPE),
    );
    out
}
