//! `GET /api/v1/idempotency-key/{key}?route=…[&app_id=…]`: where the caller's key stands on a
//! route (`in_progress`, `completed` or `expired`), the created resource's reference, and when
//! the outcome stops being replayed. Scoped like the records: the caller, the route, and for an
//! application's routes the application (by id or uid). A free or unknown key is 404.

use axum::extract::{Path, State};
use axum::Extension;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_idempotency::IdempotencyKey;
use vow_store::idempotency::{KeyStatus, Scope};

use super::route::{self, APPLICATION};
use crate::error::{ApiError, ApiResult};
use crate::http::api::lookup::resolve_app;
use crate::http::extract::ValidQuery;
use crate::http::principal::Principal;
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The key-status route.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_idempotency_key))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct StatusQuery {
    route: String,
    app_id: Option<String>,
}

/// `IdempotencyKeyOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct IdempotencyKeyOut {
    route: &'static str,
    state: &'static str,
    resource: Option<String>,
    expires_at: DateTime<Utc>,
    tombstone_until: DateTime<Utc>,
    fingerprint_version: u16,
}

/// Get where an Idempotency-Key stands on a route.
#[utoipa::path(get, path = "/api/v1/idempotency-key/{key}", tag = "Idempotency", operation_id = "v1.idempotency-key.get", params(StatusQuery),
    responses((status = 200, description = "Where the key stands on the route.", body = IdempotencyKeyOut)))]
async fn get_idempotency_key(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(raw_key): Path<String>,
    ValidQuery(q): ValidQuery<StatusQuery>,
) -> ApiResult<Json<IdempotencyKeyOut>> {
    let principal = principal.idempotency_scope();
    let (route, status) = key_status(&state, principal, &raw_key, &q.route, q.app_id).await?;
    let status = status.ok_or_else(|| ApiError::not_found("Idempotency key"))?;
    Ok(Json(IdempotencyKeyOut {
        route: route.name,
        state: status.state.as_str(),
        resource: status.resource,
        expires_at: status.expires_at,
        tombstone_until: status.tombstone_until,
        fingerprint_version: status.fingerprint_version,
    }))
}

/// Where `raw_key`, sent by `principal` (`admin` or `portal`) on the route named `route_name`
/// (of application `app_id`, for an application's route), stands now: the route, and the key's
/// status (`None`: free or never used). 422 naming a bad key, route or missing application;
/// 404 for an unknown application. The API route and the console's inspector both ask this.
pub async fn key_status(
    state: &AppState,
    principal: &str,
    raw_key: &str,
    route_name: &str,
    app_id: Option<String>,
) -> ApiResult<(&'static route::Route, Option<KeyStatus>)> {
    let key = IdempotencyKey::parse(raw_key)
        .map_err(|e| ApiError::invalid(&["path", "key"], e.to_string(), "value_error.key"))?;
    let route = route::named(route_name).ok_or_else(|| {
        let names: Vec<&str> = super::ROUTES.iter().map(|r| r.name).collect();
        ApiError::invalid(
            &["query", "route"],
            format!("must be one of {}", names.join(", ")),
            "value_error.route",
        )
    })?;
    let application = match (route.has_param(APPLICATION), app_id) {
        (true, Some(app)) => Some(resolve_app(state, &app).await?.to_string()),
        (true, None) => {
            return Err(ApiError::invalid(
                &["query", "app_id"],
                format!(
                    "{} is an application's route: name the application",
                    route.name
                ),
                "value_error.missing",
            ))
        }
        (false, _) => None,
    };
    let scope = Scope {
        principal: principal.into(),
        application,
        method: "POST".into(),
        route: route.template.into(),
        key,
    };
    let status = state.store.idempotency_status(&scope, state.now()).await?;
    Ok((route, status))
}
