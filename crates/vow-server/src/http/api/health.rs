//! Health, without a token:
//! - `GET|HEAD /api/v1/health` (as Svix has it): 204 when the store answers, 503 when not;
//! - `GET|HEAD /health/live`: 200 while the process answers at all (a liveness probe);
//! - `GET|HEAD /health/ready`: 200 when this process can do its work: the store answers within
//!   [`STORE_WAIT`], its schema has every migration this binary knows, the workers it was
//!   started with run, and it is not shutting down; else 503. Both name each check.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Map, Value};

use crate::error::ApiResult;
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// How long readiness waits for the store before calling it unreachable.
pub const STORE_WAIT: Duration = Duration::from_secs(2);

/// Health routes (unauthenticated).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_health))
        .routes(routes!(ping))
        .routes(routes!(live))
        .routes(routes!(ready))
}

/// Whether the server and its store answer.
#[utoipa::path(get, path = "/api/v1/health", tag = "Health", operation_id = "v1.health.get",
    responses((status = 204, description = "The store answers.")))]
async fn get_health(State(state): State<AppState>) -> ApiResult<StatusCode> {
    state.store.ping().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Whether the server and its store answer (as `GET /api/v1/health`).
#[utoipa::path(get, path = "/api/v1/health/ping", tag = "Health", operation_id = "v1.health.ping",
    responses((status = 204, description = "The store answers.")))]
async fn ping(state: State<AppState>) -> ApiResult<StatusCode> {
    get_health(state).await
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/health/live", tag = "Health", operation_id = "v1.health.live",
    responses((status = 200, description = "`{\"status\": \"live\"}`.", body = Object)))]
async fn live() -> Json<Value> {
    Json(json!({ "status": "live" }))
}

/// Readiness: the store answers with a current schema, the workers run, no shutdown is under way.
#[utoipa::path(get, path = "/health/ready", tag = "Health", operation_id = "v1.health.ready",
    responses(
        (status = 200, description = "Ready; each check named.", body = Object),
        (status = 503, description = "Not ready; each check named.", body = Object),
    ))]
async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let mut checks = Map::new();
    let mut ready = true;
    let mut check = |name: &str, ok: bool, good: &str, bad: &str| {
        ready &= ok;
        checks.insert(name.into(), (if ok { good } else { bad }).into());
    };
    let store = tokio::time::timeout(STORE_WAIT, async {
        state.store.ping().await?;
        state.store.schema_current().await
    })
    .await;
    match store {
        Ok(Ok(current)) => {
            check("store", true, "ok", "unreachable");
            check("schema", current, "current", "behind: run vow migrate");
        }
        Ok(Err(_)) | Err(_) => {
            check("store", false, "ok", "unreachable");
            check("schema", false, "current", "unknown");
        }
    }
    for (kind, running) in state.readiness.workers() {
        check(kind.name(), running, "running", "stopped");
    }
    check(
        "shutdown",
        !state.readiness.is_stopping(),
        "no",
        "in progress",
    );
    let (status, word) = match ready {
        true => (StatusCode::OK, "ready"),
        false => (StatusCode::SERVICE_UNAVAILABLE, "unready"),
    };
    (status, Json(json!({ "status": word, "checks": checks })))
}
