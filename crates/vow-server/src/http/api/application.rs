//! Applications: `/api/v1/app` and `/api/v1/app/{app_id}` (id or uid).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_core::{AppId, Patch};
use vow_store::idempotency::StoredResponse;
use vow_store::page::Page;
use vow_store::Store;
use vow_store::{AppKey, Application, ApplicationFields, NewApplication, Order};

use super::keys::app_key;
use super::list::{ListParams, ListResponse};
use super::lookup::{find_app, resolve_app};
use super::validate::{check_uid, Metadata, Problems};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{ValidJson, ValidJsonBytes, ValidQuery};
use crate::http::idempotency::{self, KeyedHeaders, Once};
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Application routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_applications, create_application))
        .routes(routes!(
            get_application,
            update_application,
            patch_application,
            delete_application
        ))
}

/// `ApplicationIn`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationIn {
    name: String,
    uid: Option<String>,
    throttle_rate: Option<u16>,
    #[serde(default)]
    metadata: Metadata,
}

/// `ApplicationPatch`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationPatch {
    name: Option<String>,
    #[serde(default)]
    uid: Patch<String>,
    #[serde(default)]
    throttle_rate: Patch<u16>,
    metadata: Option<Metadata>,
}

/// `ApplicationOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationOut {
    id: AppId,
    uid: Option<String>,
    name: String,
    throttle_rate: Option<u16>,
    metadata: Metadata,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<Application> for ApplicationOut {
    fn from(a: Application) -> Self {
        Self {
            id: a.id,
            uid: a.fields.uid,
            name: a.fields.name,
            throttle_rate: a.fields.throttle_rate,
            metadata: a.fields.metadata,
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

impl ApplicationIn {
    /// Validates into stored fields; `loc` prefixes field locations (for `MessageIn.application`).
    pub fn validate(self, loc: &[&str]) -> ApiResult<ApplicationFields> {
        let at = |field: &'static str| [loc, &[field]].concat();
        let mut p = Problems::default();
        p.require(
            !self.name.is_empty(),
            &at("name"),
            "must not be empty",
            "value_error.any_str.min_length",
        );
        p.require(
            self.throttle_rate != Some(0),
            &at("throttleRate"),
            "must be at least 1",
            "value_error.number.not_ge",
        );
        p.no_nul(&at("name"), &self.name);
        p.no_nul_in_map(&at("metadata"), &self.metadata);
        let uid = self.uid.and_then(|u| check_uid(&mut p, &at("uid"), &u));
        p.finish()?;
        Ok(ApplicationFields {
            name: self.name,
            uid,
            throttle_rate: self.throttle_rate,
            metadata: self.metadata,
        })
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct CreateParams {
    /// With a `uid` that is taken: answer 200 with that application instead of 409.
    #[serde(default)]
    get_if_exists: bool,
}

/// List applications.
#[utoipa::path(get, path = "/api/v1/app", tag = "Application",
    operation_id = "v1.application.list", params(ListParams),
    responses((status = 200, body = ListResponse<ApplicationOut>)))]
async fn list_applications(
    State(state): State<AppState>,
    ValidQuery(params): ValidQuery<ListParams>,
) -> ApiResult<Json<ListResponse<ApplicationOut>>> {
    let order = params.order(Order::Ascending);
    let seek = params.seek(order, |it| AppId::parse(it).map(|_| ()))?;
    let rows = state.store.list_applications(&seek).await?;
    let page = Page::build(rows, &seek, order, |a| a.id.to_string());
    Ok(Json(page.map(ApplicationOut::from).into()))
}

/// Create an application.
#[utoipa::path(post, path = "/api/v1/app", tag = "Application",
    operation_id = "v1.application.create", params(CreateParams, KeyedHeaders),
    request_body = ApplicationIn,
    responses(
        (status = 201, description = "Created.", body = ApplicationOut),
        (status = 200, description = "`get_if_exists`: the application with that uid.", body = ApplicationOut),
    ))]
async fn create_application(
    State(state): State<AppState>,
    once: Once,
    ValidQuery(params): ValidQuery<CreateParams>,
    ValidJsonBytes(body, raw): ValidJsonBytes<ApplicationIn>,
) -> ApiResult<Response> {
    let fields = body.validate(&["body"])?;
    let uid = fields.uid.clone();
    let new = NewApplication {
        id: AppId::new(),
        fields,
        now: state.now(),
    };
    once.run(&state, None, &raw, move |commit| async move {
        let state = commit.state().clone();
        let render = |app: &Application| rendered(StatusCode::CREATED, app);
        let write = |store: Arc<dyn Store>, keyed| async move {
            store.create_application_keyed(new, keyed).await
        };
        match commit.write(write, render).await {
            Ok((_, response)) => Ok(response),
            Err(ApiError::Conflict(detail)) if params.get_if_exists => {
                let key = AppKey::Uid(uid.ok_or(ApiError::Conflict(detail))?);
                let app = find_app(&state, &key).await?;
                Ok(idempotency::respond::stored(rendered(StatusCode::OK, &app)))
            }
            Err(e) => Err(e),
        }
    })
    .await
}

/// `ApplicationOut` as a response to store.
fn rendered(status: StatusCode, app: &Application) -> StoredResponse {
    let out = ApplicationOut::from(app.clone());
    idempotency::json(status, &out, Some(app.id.to_string()))
}

/// Get an application.
#[utoipa::path(get, path = "/api/v1/app/{app_id}", tag = "Application",
    operation_id = "v1.application.get",
    responses((status = 200, body = ApplicationOut)))]
async fn get_application(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
) -> ApiResult<Json<ApplicationOut>> {
    Ok(Json(find_app(&state, &app_key(&app_id)?).await?.into()))
}

/// Update an application, or create it when absent (with the path's uid), as Svix does.
#[utoipa::path(put, path = "/api/v1/app/{app_id}", tag = "Application",
    operation_id = "v1.application.update", request_body = ApplicationIn,
    responses(
        (status = 200, description = "Updated.", body = ApplicationOut),
        (status = 201, description = "Created.", body = ApplicationOut),
    ))]
async fn update_application(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    ValidJson(body): ValidJson<ApplicationIn>,
) -> ApiResult<impl IntoResponse> {
    let key = app_key(&app_id)?;
    let fields = body.validate(&["body"])?;
    if let Some(app) = state.store.get_application(&key).await? {
        let app = state.store.update_application(app.id, fields).await?;
        return Ok((StatusCode::OK, Json(ApplicationOut::from(app))));
    }
    let app = create_named(&state, key, fields).await?;
    Ok((StatusCode::CREATED, Json(ApplicationOut::from(app))))
}

/// Creates the application a path names from `fields`, as Svix does where a path may name an
/// application to create (`PUT /api/v1/app/{app_id}`, app-portal-access): with the path's uid;
/// an `app_` id cannot be chosen, so it is 404. 409 when the uid is taken.
pub async fn create_named(
    state: &AppState,
    key: AppKey,
    mut fields: ApplicationFields,
) -> ApiResult<Application> {
    let AppKey::Uid(uid) = key else {
        return Err(ApiError::not_found("Application"));
    };
    fields.uid = Some(uid);
    let new = NewApplication {
        id: AppId::new(),
        fields,
        now: state.now(),
    };
    Ok(state.store.create_application(new).await?)
}

/// Partially update an application.
#[utoipa::path(patch, path = "/api/v1/app/{app_id}", tag = "Application",
    operation_id = "patch_application", request_body = ApplicationPatch,
    responses((status = 200, body = ApplicationOut)))]
async fn patch_application(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    ValidJson(patch): ValidJson<ApplicationPatch>,
) -> ApiResult<Json<ApplicationOut>> {
    let app = find_app(&state, &app_key(&app_id)?).await?;
    let current = app.fields;
    let merged = ApplicationIn {
        name: patch.name.unwrap_or(current.name),
        uid: patch.uid.apply_to(current.uid),
        throttle_rate: patch.throttle_rate.apply_to(current.throttle_rate),
        metadata: patch.metadata.unwrap_or(current.metadata),
    };
    let fields = merged.validate(&["body"])?;
    let app = state.store.update_application(app.id, fields).await?;
    Ok(Json(app.into()))
}

/// Delete an application.
#[utoipa::path(delete, path = "/api/v1/app/{app_id}", tag = "Application",
    operation_id = "v1.application.delete",
    responses((status = 204, description = "Deleted.")))]
async fn delete_application(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = resolve_app(&state, &app_id).await?;
    state.store.delete_application(id).await?;
    Ok(StatusCode::NO_CONTENT)
}
