//! `GET|HEAD /api/v1/health`: 204 when the store answers, 503 when it does not. No auth.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use crate::error::ApiResult;
use crate::state::AppState;

/// Health routes (unauthenticated).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/health", get(get_health))
        .route("/api/v1/health/ping", get(get_health))
}

async fn get_health(State(state): State<AppState>) -> ApiResult<StatusCode> {
    state.store.ping().await?;
    Ok(StatusCode::NO_CONTENT)
}
