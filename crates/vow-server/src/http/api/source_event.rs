//! What a source received and refused, and the operators' decisions on quarantined events:
//! `/api/v1/source/{source_id}/event[/{event_id}[/release|/discard]]` and
//! `/api/v1/source/{source_id}/rejection`.
//!
//! A quarantined event (a reused event id with another payload) waits for an operator:
//! `release` makes it `received` (it will be processed like any other), `discard` makes it
//! `discarded`. Either happens once (409 afterwards); with an `Idempotency-Key`, the same
//! request again replays the first answer. Processing and pull mode are in
//! [`super::source_work`].

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_core::{DestinationId, InboundEventId, RejectionId, SourceId};
use vow_store::idempotency::StoredResponse;
use vow_store::inbound::decisions::Decided;
use vow_store::inbound::processing::Forward;
use vow_store::inbound::{
    InboundContent, InboundEvent, InboundFilter, InboundState, Rejection, StoredInbound,
};
use vow_store::page::Page;
use vow_store::Order;

use super::keys::{id_error, source_key};
use super::list::{ListParams, ListResponse};
use super::lookup::find_source;
use crate::actions::inbound::Resolve;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::ValidQuery;
use crate::http::idempotency::{self, KeyedHeaders, Once};
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes of a source's events and rejections.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_source_events))
        .routes(routes!(get_source_event))
        .routes(routes!(release_source_event))
        .routes(routes!(discard_source_event))
        .routes(routes!(list_source_rejections))
}

/// `InboundEventOut`; `headers` and the payload only for one event, until retention removes
/// them. The payload is `payload` when it is UTF-8 text, else `payloadBase64`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboundEventOut {
    id: InboundEventId,
    source_id: SourceId,
    account: String,
    event_id: Option<String>,
    state: &'static str,
    conflicts_with: Option<InboundEventId>,
    sha256: String,
    size: u64,
    duplicates: u64,
    version: Option<String>,
    entity: Option<String>,
    received_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    attempts: u32,
    next_attempt_at: Option<DateTime<Utc>>,
    last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    forwards: Option<Vec<ForwardOut>>,
    /// After an operator's replay or resolution: the forwards it changed, as they now stand.
    #[serde(skip_serializing_if = "Option::is_none")]
    changed: Option<Vec<ForwardOut>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    headers: Option<Vec<(String, String)>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_base64: Option<String>,
}

impl From<InboundEvent> for InboundEventOut {
    fn from(e: InboundEvent) -> Self {
        Self {
            id: e.id,
            source_id: e.source_id,
            account: e.account,
            event_id: e.event_id,
            state: e.state.as_str(),
            conflicts_with: e.conflicts_with,
            sha256: e.sha256,
            size: e.size,
            duplicates: e.duplicates,
            version: e.version,
            entity: e.entity,
            received_at: e.received_at,
            updated_at: e.updated_at,
            attempts: e.attempts,
            next_attempt_at: e.next_attempt_at,
            last_error: e.last_error,
            forwards: None,
            changed: None,
            headers: None,
            payload: None,
            payload_base64: None,
        }
    }
}

/// `ForwardOut`: what became of an event at one destination (`destinationId` null: its pull
/// consumer).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForwardOut {
    destination_id: Option<DestinationId>,
    outcome: &'static str,
    attempts: u32,
    status: Option<u16>,
    error: Option<String>,
    updated_at: DateTime<Utc>,
}

impl From<Forward> for ForwardOut {
    fn from(f: Forward) -> Self {
        Self {
            destination_id: f.destination,
            outcome: f.outcome.as_str(),
            attempts: f.attempts,
            status: f.status,
            error: f.error,
            updated_at: f.updated_at,
        }
    }
}

impl From<Decided> for InboundEventOut {
    fn from(decided: Decided) -> Self {
        let mut out = InboundEventOut::from(decided.event);
        out.changed = Some(decided.changed.into_iter().map(ForwardOut::from).collect());
        out
    }
}

impl From<StoredInbound> for InboundEventOut {
    fn from(stored: StoredInbound) -> Self {
        let mut out = InboundEventOut::from(stored.event);
        out.forwards = Some(stored.forwards.into_iter().map(ForwardOut::from).collect());
        out.with_content(stored.content)
    }
}

impl InboundEventOut {
    /// Adds the headers and the payload (`payload` when UTF-8 text, else `payloadBase64`).
    pub fn with_content(mut self, content: Option<InboundContent>) -> Self {
        let out = &mut self;
        if let Some(InboundContent { headers, payload }) = content {
            out.headers = Some(headers);
            match String::from_utf8(payload) {
                Ok(text) => out.payload = Some(text),
                Err(e) => {
                    let bytes = e.into_bytes();
                    out.payload_base64 =
                        Some(base64::engine::general_purpose::STANDARD.encode(bytes))
                }
            }
        }
        self
    }
}

/// `RejectionOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectionOut {
    id: RejectionId,
    reason: String,
    status: u16,
    body_size: u64,
    received_at: DateTime<Utc>,
}

impl From<Rejection> for RejectionOut {
    fn from(r: Rejection) -> Self {
        Self {
            id: r.id,
            reason: r.reason,
            status: r.status,
            body_size: r.body_size,
            received_at: r.now,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct EventQuery {
    state: Option<String>,
}

/// `event` as the 200 that a pull consumer's outcome or an operator's decision answers, to
/// store and send.
pub fn event_answer(event: &InboundEvent) -> StoredResponse {
    let out = InboundEventOut::from(event.clone());
    idempotency::json(StatusCode::OK, &out, Some(event.id.to_string()))
}

/// The 200 an operator's decision answers (and a keyed one stores): the event, with the
/// forwards it changed.
pub fn decided_answer(decided: &Decided) -> StoredResponse {
    let resource = Some(decided.event.id.to_string());
    let out = InboundEventOut::from(decided.clone());
    idempotency::json(StatusCode::OK, &out, resource)
}

/// `{event_id}`: an inbound event id, else 422.
pub fn event_key(raw: &str) -> ApiResult<InboundEventId> {
    InboundEventId::parse(raw).map_err(|e| id_error(&["path", "event_id"], e))
}

/// `?state=`: one of the states, else 422 naming them.
fn parse_state(name: &str) -> ApiResult<InboundState> {
    InboundState::parse(name).ok_or_else(|| {
        let names: Vec<&str> = InboundState::ALL.iter().map(|s| s.as_str()).collect();
        let msg = format!("must be one of {}", names.join(", "));
        ApiError::invalid(&["query", "state"], msg, "value_error.state")
    })
}

/// List the inbound events of a source.
#[utoipa::path(get, path = "/api/v1/source/{source_id}/event", tag = "Source Event", operation_id = "v1.source.event.list", params(ListParams, EventQuery),
    responses((status = 200, description = "A page of inbound events.", body = ListResponse<InboundEventOut>)))]
async fn list_source_events(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
    ValidQuery(params): ValidQuery<ListParams>,
    ValidQuery(query): ValidQuery<EventQuery>,
) -> ApiResult<Json<ListResponse<InboundEventOut>>> {
    let source = find_source(&state, &source_id).await?;
    let filter = InboundFilter {
        state: query.state.as_deref().map(parse_state).transpose()?,
    };
    let order = params.order(Order::Descending);
    let seek = params.seek(order, |it| InboundEventId::parse(it).map(|_| ()))?;
    let rows = state
        .inbound
        .list_inbound_events(source.id, &filter, &seek)
        .await?;
    let page = Page::build(rows, &seek, order, |e| e.id.to_string());
    Ok(Json(page.map(InboundEventOut::from).into()))
}

/// Get an inbound event.
#[utoipa::path(get, path = "/api/v1/source/{source_id}/event/{event_id}", tag = "Source Event", operation_id = "v1.source.event.get",
    responses((status = 200, description = "The event with its forwards.", body = InboundEventOut)))]
async fn get_source_event(
    State(state): State<AppState>,
    Path((source_id, event_id)): Path<(String, String)>,
) -> ApiResult<Json<InboundEventOut>> {
    let (source, event) = (source_key(&source_id)?, event_key(&event_id)?);
    let stored = state.inbound.get_inbound_event(source, event).await?;
    let stored = stored.ok_or_else(|| ApiError::not_found("Inbound event"))?;
    Ok(Json(stored.into()))
}

/// Decides a quarantined event's fate, at most once per `Idempotency-Key`.
async fn resolve(
    state: &AppState,
    once: Once,
    (source_id, event_id): (String, String),
    to: InboundState,
) -> ApiResult<Response> {
    let (source, event) = (source_key(&source_id)?, event_key(&event_id)?);
    once.run(state, None, &[], move |commit| async move {
        let decision = Resolve::new(commit.state(), source, event, to);
        Ok(commit.act(decision, event_answer).await?.1)
    })
    .await
}

/// Release a quarantined event to its destinations.
#[utoipa::path(post, path = "/api/v1/source/{source_id}/event/{event_id}/release", tag = "Source Event", operation_id = "v1.source.event.release", params(KeyedHeaders),
    responses((status = 200, description = "Released.", body = InboundEventOut)))]
async fn release_source_event(
    State(state): State<AppState>,
    Path(ids): Path<(String, String)>,
    once: Once,
) -> ApiResult<Response> {
    resolve(&state, once, ids, InboundState::Received).await
}

/// Discard a quarantined event.
#[utoipa::path(post, path = "/api/v1/source/{source_id}/event/{event_id}/discard", tag = "Source Event", operation_id = "v1.source.event.discard", params(KeyedHeaders),
    responses((status = 200, description = "Discarded.", body = InboundEventOut)))]
async fn discard_source_event(
    State(state): State<AppState>,
    Path(ids): Path<(String, String)>,
    once: Once,
) -> ApiResult<Response> {
    resolve(&state, once, ids, InboundState::Discarded).await
}

/// List the deliveries a source refused.
#[utoipa::path(get, path = "/api/v1/source/{source_id}/rejection", tag = "Source Event", operation_id = "v1.source.rejection.list", params(ListParams),
    responses((status = 200, description = "A page of rejected deliveries.", body = ListResponse<RejectionOut>)))]
async fn list_source_rejections(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
    ValidQuery(params): ValidQuery<ListParams>,
) -> ApiResult<Json<ListResponse<RejectionOut>>> {
    let source = find_source(&state, &source_id).await?;
    let order = params.order(Order::Descending);
    let seek = params.seek(order, |it| RejectionId::parse(it).map(|_| ()))?;
    let rows = state.inbound.list_rejections(source.id, &seek).await?;
    let page = Page::build(rows, &seek, order, |r| r.id.to_string());
    Ok(Json(page.map(RejectionOut::from).into()))
}
