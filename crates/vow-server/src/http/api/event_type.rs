//! Event types: `/api/v1/event-type` and `/api/v1/event-type/{event_type_name}`.
//!
//! Global, as in Svix. Names are hierarchical by `.` ([`vow_core::EventTypeName`]). DELETE
//! archives unless `expunge=true`; creating over an archived name brings it back.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_core::{EventTypeName, Patch};
use vow_store::page::Page;
use vow_store::Store;
use vow_store::{EventType, Order};

use super::list::{ListParams, ListResponse};
use super::validate::Problems;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{ValidJson, ValidJsonBytes, ValidQuery};
use crate::http::idempotency::{self, KeyedHeaders, Once};
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Event type routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_event_types, create_event_type))
        .routes(routes!(
            get_event_type,
            update_event_type,
            patch_event_type,
            delete_event_type
        ))
}

/// `EventTypeIn`: `EventTypeUpdate` with the `name`. Its fields are spelt out rather than
/// flattened, so a field it does not have is noticed and refused (`http::extract`).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventTypeIn {
    name: EventTypeName,
    description: String,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    deprecated: bool,
    feature_flag: Option<String>,
    #[schema(value_type = Option<Object>)]
    schemas: Option<serde_json::Map<String, serde_json::Value>>,
}

impl EventTypeIn {
    /// Its name, and the rest as an `EventTypeUpdate`.
    fn split(self) -> (EventTypeName, EventTypeUpdate) {
        let update = EventTypeUpdate {
            description: self.description,
            archived: self.archived,
            deprecated: self.deprecated,
            feature_flag: self.feature_flag,
            schemas: self.schemas,
        };
        (self.name, update)
    }
}

/// `EventTypeUpdate`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventTypeUpdate {
    description: String,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    deprecated: bool,
    feature_flag: Option<String>,
    #[schema(value_type = Option<Object>)]
    schemas: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `EventTypePatch`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventTypePatch {
    description: Option<String>,
    archived: Option<bool>,
    deprecated: Option<bool>,
    #[serde(default)]
    feature_flag: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    schemas: Patch<serde_json::Map<String, serde_json::Value>>,
}

/// `EventTypeOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventTypeOut {
    name: String,
    description: String,
    archived: bool,
    deprecated: bool,
    feature_flag: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schemas: Option<serde_json::Value>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<EventType> for EventTypeOut {
    fn from(e: EventType) -> Self {
        Self {
            name: e.name,
            description: e.description,
            archived: e.archived,
            deprecated: e.deprecated,
            feature_flag: e.feature_flag,
            schemas: e.schemas,
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }
}

impl EventTypeUpdate {
    fn into_event_type(
        self,
        name: String,
        created_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> ApiResult<EventType> {
        let mut p = Problems::default();
        let feature_flag = self
            .feature_flag
            .and_then(|f| p.check(&["body", "featureFlag"], vow_core::Uid::parse(f)))
            .map(|f| f.into_string());
        p.no_nul(&["body", "description"], &self.description);
        if let Some(schemas) = &self.schemas {
            let text = serde_json::Value::Object(schemas.clone()).to_string();
            p.require(
                !text.contains("\\u0000"),
                &["body", "schemas"],
                "must not contain NUL characters",
                "value_error.str.nul",
            );
        }
        p.finish()?;
        Ok(EventType {
            name,
            description: self.description,
            archived: self.archived,
            deprecated: self.deprecated,
            feature_flag,
            schemas: self.schemas.map(serde_json::Value::Object),
            created_at,
            updated_at: now,
        })
    }
}

fn name_from_path(raw: &str) -> ApiResult<String> {
    EventTypeName::parse(raw)
        .map(EventTypeName::into_string)
        .map_err(|e| ApiError::invalid(&["path", "event_type_name"], e.message, e.kind))
}

async fn find(state: &AppState, name: &str) -> ApiResult<EventType> {
    state
        .store
        .get_event_type(name)
        .await?
        .ok_or_else(|| ApiError::not_found("Event type"))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ListEventTypesParams {
    #[serde(default)]
    include_archived: bool,
    #[serde(default)]
    with_content: bool,
}

/// List event types.
#[utoipa::path(get, path = "/api/v1/event-type", tag = "Event Type", operation_id = "v1.event-type.list", params(ListParams, ListEventTypesParams),
    responses((status = 200, description = "A page of event types.", body = ListResponse<EventTypeOut>)))]
async fn list_event_types(
    State(state): State<AppState>,
    ValidQuery(list): ValidQuery<ListParams>,
    ValidQuery(params): ValidQuery<ListEventTypesParams>,
) -> ApiResult<Json<ListResponse<EventTypeOut>>> {
    let order = list.order(Order::Ascending);
    let seek = list.seek(order, |_| Ok(()))?;
    let rows = state
        .store
        .list_event_types(&seek, params.include_archived)
        .await?;
    let page = Page::build(rows, &seek, order, |e| e.name.clone());
    let with_content = params.with_content;
    Ok(Json(
        page.map(|mut e| {
            if !with_content {
                e.schemas = None;
            }
            EventTypeOut::from(e)
        })
        .into(),
    ))
}

/// Creates an event type, or revives an archived one of the same name.
/// Create an event type.
#[utoipa::path(post, path = "/api/v1/event-type", tag = "Event Type", operation_id = "v1.event-type.create", params(KeyedHeaders), request_body = EventTypeIn,
    responses((status = 201, description = "Created.", body = EventTypeOut)))]
async fn create_event_type(
    State(state): State<AppState>,
    once: Once,
    ValidJsonBytes(body, raw): ValidJsonBytes<EventTypeIn>,
) -> ApiResult<Response> {
    let now = state.now();
    let (name, body) = body.split();
    let name = name.into_string();
    let event_type = body.into_event_type(name.clone(), now, now)?;
    once.run(&state, None, &raw, move |commit| async move {
        let existing = commit.state().store.get_event_type(&name).await?;
        let write = |store: Arc<dyn Store>, keyed| async move {
            match existing {
                Some(existing) if existing.archived => {
                    let revived = EventType {
                        created_at: existing.created_at,
                        ..event_type
                    };
                    store.update_event_type_keyed(revived, keyed).await
                }
                _ => store.create_event_type_keyed(event_type, keyed).await,
            }
        };
        let render = |saved: &EventType| {
            let out = EventTypeOut::from(saved.clone());
            idempotency::json(StatusCode::CREATED, &out, Some(saved.name.clone()))
        };
        Ok(commit.write(write, render).await?.1)
    })
    .await
}

/// Get an event type.
#[utoipa::path(get, path = "/api/v1/event-type/{event_type_name}", tag = "Event Type", operation_id = "v1.event-type.get",
    responses((status = 200, description = "The event type.", body = EventTypeOut)))]
async fn get_event_type(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<EventTypeOut>> {
    Ok(Json(find(&state, &name_from_path(&name)?).await?.into()))
}

/// PUT: update, or create when absent.
#[utoipa::path(put, path = "/api/v1/event-type/{event_type_name}", tag = "Event Type", operation_id = "v1.event-type.update", request_body = EventTypeUpdate,
    responses((status = 200, description = "Updated.", body = EventTypeOut), (status = 201, description = "Created.", body = EventTypeOut)))]
async fn update_event_type(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ValidJson(body): ValidJson<EventTypeUpdate>,
) -> ApiResult<impl IntoResponse> {
    let name = name_from_path(&name)?;
    let now = state.now();
    match state.store.get_event_type(&name).await? {
        Some(existing) => {
            let updated = body.into_event_type(name, existing.created_at, now)?;
            let saved = state.store.update_event_type(updated).await?;
            Ok((StatusCode::OK, Json(EventTypeOut::from(saved))))
        }
        None => {
            let created = body.into_event_type(name, now, now)?;
            let saved = state.store.create_event_type(created).await?;
            Ok((StatusCode::CREATED, Json(EventTypeOut::from(saved))))
        }
    }
}

/// Partially update an event type.
#[utoipa::path(patch, path = "/api/v1/event-type/{event_type_name}", tag = "Event Type", operation_id = "patch_event_type", request_body = EventTypePatch,
    responses((status = 200, description = "Updated.", body = EventTypeOut)))]
async fn patch_event_type(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ValidJson(patch): ValidJson<EventTypePatch>,
) -> ApiResult<Json<EventTypeOut>> {
    let current = find(&state, &name_from_path(&name)?).await?;
    let merged = EventTypeUpdate {
        description: patch.description.unwrap_or(current.description),
        archived: patch.archived.unwrap_or(current.archived),
        deprecated: patch.deprecated.unwrap_or(current.deprecated),
        feature_flag: patch.feature_flag.apply_to(current.feature_flag),
        schemas: patch
            .schemas
            .apply_to(current.schemas.and_then(|s| match s {
                serde_json::Value::Object(m) => Some(m),
                _ => None,
            })),
    };
    let updated = merged.into_event_type(current.name, current.created_at, state.now())?;
    Ok(Json(state.store.update_event_type(updated).await?.into()))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct DeleteParams {
    #[serde(default)]
    expunge: bool,
}

/// Archive (or expunge) an event type.
#[utoipa::path(delete, path = "/api/v1/event-type/{event_type_name}", tag = "Event Type", operation_id = "v1.event-type.delete", params(DeleteParams),
    responses((status = 204, description = "Archived, or with `expunge` deleted.")))]
async fn delete_event_type(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ValidQuery(params): ValidQuery<DeleteParams>,
) -> ApiResult<StatusCode> {
    let current = find(&state, &name_from_path(&name)?).await?;
    if params.expunge {
        state.store.expunge_event_type(&current.name).await?;
    } else {
        let archived = EventType {
            archived: true,
            updated_at: state.now(),
            ..current
        };
        state.store.update_event_type(archived).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}
