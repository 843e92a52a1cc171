//! Messages: `/api/v1/app/{app_id}/msg[/{msg_id}]`.
//!
//! Creating a message writes it and its delivery rows in one store transaction. The payload is
//! kept as the exact JSON text the client sent (never re-serialised), so what is signed and
//! delivered is byte-for-byte what was posted. With an `Idempotency-Key`, the create goes through
//! [`crate::http::idempotency`], which stores the same 202 response with the message, in its
//! transaction.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tracing::Instrument;
use vow_core::{Channel, EventTypeName, MessageId};
use vow_store::idempotency::StoredResponse;
use vow_store::page::Page;
use vow_store::Store;
use vow_store::{AppKey, Message, MessageCreate, MessageFilter, NewApplication, NewMessage, Order};

use super::application::ApplicationIn;
use super::keys::{app_key, message_key};
use super::list::{ListParams, ListResponse};
use super::lookup::resolve_app;
use super::validate::Problems;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{ValidJsonBytes, ValidQuery};
use crate::http::idempotency::{self, KeyedHeaders, Once};
use crate::state::AppState;
use crate::telemetry::trace_context::{self, traced};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Message routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_messages, create_message))
        .routes(routes!(get_message))
}

/// `MessageIn`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageIn {
    event_type: String,
    #[schema(value_type = Object)]
    payload: Box<RawValue>,
    event_id: Option<String>,
    channels: Option<Vec<String>>,
    payload_retention_period: Option<i64>,
    application: Option<ApplicationIn>,
}

/// `MessageOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageOut {
    id: MessageId,
    event_type: String,
    event_id: Option<String>,
    channels: Option<Vec<String>>,
    #[schema(value_type = Object)]
    payload: Box<RawValue>,
    timestamp: DateTime<Utc>,
}

impl MessageOut {
    /// The message as Svix shows it; without content, the payload is `{}`.
    pub fn new(m: Message, with_content: bool) -> ApiResult<Self> {
        let text = match m.payload {
            Some(p) if with_content => p,
            _ => "{}".to_string(),
        };
        let payload = RawValue::from_string(text).map_err(|e| ApiError::Internal(Box::new(e)))?;
        Ok(Self {
            id: m.id,
            event_type: m.event_type,
            event_id: m.event_id,
            channels: m.channels,
            payload,
            timestamp: m.created_at,
        })
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ContentParams {
    with_content: Option<bool>,
}

/// Send a message to the endpoints that subscribe to its event type.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/msg", tag = "Message", operation_id = "v1.message.create", params(ContentParams, KeyedHeaders), request_body = MessageIn,
    responses((status = 202, description = "Accepted: stored, deliveries queued.", body = MessageOut)))]
async fn create_message(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    once: Once,
    headers: HeaderMap,
    ValidQuery(params): ValidQuery<ContentParams>,
    ValidJsonBytes(body, raw): ValidJsonBytes<MessageIn>,
) -> ApiResult<Response> {
    let with_content = params.with_content.unwrap_or(true);
    let (new, app) = new_message(&state, &app_id, body).await?;
    let retry = app.is_some().then(|| (once.clone(), new.clone()));
    let input = Input {
        raw: &raw,
        headers: &headers,
        with_content,
    };
    match create(&state, once, new, app, &input).await {
        // Another request created the application between the lookup and this write, which
        // wrote nothing: the message goes to theirs, as if the uid had resolved at once.
        Err(e) if is_application_race(&e) => {
            let (once, mut new) = retry.ok_or(e)?;
            new.app_id = resolve_app(&state, &app_id).await?;
            create(&state, once, new, None, &input).await
        }
        outcome => outcome,
    }
}

/// What a create request brings besides the message: its raw body (for its key), its headers
/// (for its trace context) and whether the answer shows the payload.
struct Input<'a> {
    raw: &'a [u8],
    headers: &'a HeaderMap,
    with_content: bool,
}

/// Writes `new` (creating `app` first, in the same transaction) at most once per key, within a
/// `store.create_message` span whose trace context the message keeps for its attempts.
async fn create(
    state: &AppState,
    once: Once,
    mut new: NewMessage,
    app: Option<NewApplication>,
    input: &Input<'_>,
) -> ApiResult<Response> {
    let creates_app = app.is_some();
    let with_content = input.with_content;
    let span = traced(
        || tracing::info_span!("store.create_message", msg_id = %new.id, app_id = %new.app_id),
    );
    new.traceparent = trace_context::for_message(&span, input.headers);
    once.run(
        state,
        Some(new.app_id),
        input.raw,
        move |commit| async move {
            let response = accepted(new.clone().into_stored(), with_content);
            let create = MessageCreate {
                new,
                only: None,
                app,
            };
            let write = |store: Arc<dyn Store>, keyed| async move {
                store.create_message_keyed(create, keyed).await
            };
            let (_, response) = match commit.write_answering(write, response).await {
                // A new application has no messages, so its uid is the only rule a conflict can be:
                // not this request's outcome (nothing was written), so never stored for its key.
                Err(ApiError::Conflict(_)) if creates_app => {
                    return Err(ApiError::Internal(Box::new(ApplicationRace)))
                }
                outcome => outcome?,
            };
            metrics::counter!(crate::metrics::MESSAGES).increment(1);
            Ok(response)
        },
    )
    .instrument(span)
    .await
}

/// The application a message create was to create was created by another request first.
#[derive(Debug, thiserror::Error)]
#[error("the application was created by another request meanwhile")]
struct ApplicationRace;

fn is_application_race(e: &ApiError) -> bool {
    matches!(e, ApiError::Internal(cause) if cause.is::<ApplicationRace>())
}

/// Validates `body` and resolves the application in the path into the message to create, with
/// the application to create in the same write when a uid names none yet and `body` describes it.
async fn new_message(
    state: &AppState,
    app_id: &str,
    body: MessageIn,
) -> ApiResult<(NewMessage, Option<NewApplication>)> {
    let key = app_key(app_id)?;
    let mut p = Problems::default();
    let event_type = p.check(
        &["body", "eventType"],
        EventTypeName::parse(body.event_type),
    );
    let event_id = body
        .event_id
        .and_then(|id| p.check(&["body", "eventId"], vow_core::Uid::parse(id)));
    let channels = body.channels.map(|chans| {
        p.require(
            !chans.is_empty() && chans.len() <= 5,
            &["body", "channels"],
            "must have 1 to 5 items",
            "value_error.list.max_items",
        );
        chans
            .into_iter()
            .enumerate()
            .filter_map(|(i, c)| p.check(&["body", "channels", &i.to_string()], Channel::parse(c)))
            .map(Channel::into_string)
            .collect::<Vec<_>>()
    });
    p.require(
        body.payload.get().trim_start().starts_with('{'),
        &["body", "payload"],
        "must be a JSON object",
        "type_error.dict",
    );
    p.require(
        body.payload_retention_period
            .is_none_or(|days| (5..=90).contains(&days)),
        &["body", "payloadRetentionPeriod"],
        "must be between 5 and 90 (days)",
        "value_error.number.range",
    );
    let retention = body
        .payload_retention_period
        .unwrap_or(state.settings.payload_retention_days);
    let new_app = body
        .application
        .map(|a| a.validate(&["body", "application"]))
        .transpose()?;
    p.finish()?;

    // An `app_` id needs no lookup: the create itself answers 404 when there is no such
    // application (it checks in the same transaction). A uid is resolved; one that names no
    // application yet is created from `MessageIn.application` by the message's own write, so a
    // refused or failed create leaves none behind.
    let now = state.now();
    let (app_id, new_app) = match key {
        AppKey::Id(id) => (id, None),
        AppKey::Uid(ref uid) => match state.store.get_application(&key).await? {
            Some(app) => (app.id, None),
            None => {
                let Some(mut fields) = new_app else {
                    return Err(ApiError::not_found("Application"));
                };
                fields.uid = Some(uid.clone());
                let id = vow_core::AppId::new();
                (id, Some(NewApplication { id, fields, now }))
            }
        },
    };
    let new = NewMessage {
        id: MessageId::new(),
        app_id,
        event_id: event_id.map(vow_core::Uid::into_string),
        event_type: event_type
            .map(EventTypeName::into_string)
            .unwrap_or_default(),
        channels,
        payload: body.payload.get().to_string(),
        payload_expires_at: now + Duration::days(retention),
        now,
        traceparent: None,
    };
    Ok((new, new_app))
}

/// Renders the 202 answer to a created message (before the write: the message is the request's
/// values as stored): `MessageOut` as JSON. It is also what an `Idempotency-Key` record stores
/// and replays.
pub fn accepted(message: Message, with_content: bool) -> StoredResponse {
    let resource = Some(message.id.to_string());
    match MessageOut::new(message, with_content) {
        Ok(out) => idempotency::json(StatusCode::ACCEPTED, &out, resource),
        // Cannot happen: the payload was read as a JSON object.
        Err(e) => {
            tracing::error!(error = %e, "could not render a created message");
            idempotency::json(StatusCode::INTERNAL_SERVER_ERROR, &(), resource)
        }
    }
}

/// `filter` if its event types and channel are valid names, else 422 naming every bad one.
pub fn checked_filter(filter: MessageFilter) -> ApiResult<MessageFilter> {
    let mut p = Problems::default();
    for (i, t) in filter.event_types.iter().enumerate() {
        p.check(
            &["query", "event_types", &i.to_string()],
            EventTypeName::parse(t.as_str()),
        );
    }
    if let Some(c) = &filter.channel {
        p.check(&["query", "channel"], Channel::parse(c.as_str()));
    }
    p.finish()?;
    Ok(filter)
}

/// The event types of an `event_types` query parameter: repeated keys
/// (`event_types=a&event_types=b`) and the SDKs' `event_types=a,b` alike.
pub fn event_types_of(given: &[String]) -> Vec<String> {
    given
        .iter()
        .flat_map(|t| t.split(','))
        .map(str::to_string)
        .collect()
}

/// The filters of a message listing (`event_types`, `channel`, `before`, `after`) and
/// `with_content`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListMessagesParams {
    #[serde(default)]
    event_types: Vec<String>,
    channel: Option<String>,
    before: Option<DateTime<Utc>>,
    after: Option<DateTime<Utc>>,
    with_content: Option<bool>,
}

impl ListMessagesParams {
    /// The validated filter: 422 naming every bad event type or channel.
    pub fn filter(&self) -> ApiResult<MessageFilter> {
        checked_filter(MessageFilter {
            event_types: event_types_of(&self.event_types),
            channel: self.channel.clone(),
            before: self.before,
            after: self.after,
        })
    }

    /// Whether payloads are wanted (the default).
    pub fn with_content(&self) -> bool {
        self.with_content.unwrap_or(true)
    }
}

/// List the messages of an application.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/msg", tag = "Message", operation_id = "v1.message.list", params(ListParams, ListMessagesParams),
    responses((status = 200, description = "A page of messages.", body = ListResponse<MessageOut>)))]
async fn list_messages(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    ValidQuery(list): ValidQuery<ListParams>,
    ValidQuery(params): ValidQuery<ListMessagesParams>,
) -> ApiResult<Json<ListResponse<MessageOut>>> {
    let app = resolve_app(&state, &app_id).await?;
    let filter = params.filter()?;
    let order = list.order(Order::Descending);
    let seek = list.seek(order, |it| MessageId::parse(it).map(|_| ()))?;
    let rows = state.store.list_messages(app, &filter, &seek).await?;
    let page = Page::build(rows, &seek, order, |m| m.id.to_string());
    let with_content = params.with_content();
    let page = page.try_map(|m| MessageOut::new(m, with_content))?;
    Ok(Json(page.into()))
}

/// Get a message (by id or eventId).
#[utoipa::path(get, path = "/api/v1/app/{app_id}/msg/{msg_id}", tag = "Message", operation_id = "v1.message.get", params(ContentParams),
    responses((status = 200, description = "The message.", body = MessageOut)))]
async fn get_message(
    State(state): State<AppState>,
    Path((app_id, msg_id)): Path<(String, String)>,
    ValidQuery(params): ValidQuery<ContentParams>,
) -> ApiResult<Json<MessageOut>> {
    let app = resolve_app(&state, &app_id).await?;
    let key = message_key(&msg_id)?;
    let message = state
        .store
        .get_message(app, &key)
        .await?
        .ok_or_else(|| ApiError::not_found("Message"))?;
    Ok(Json(MessageOut::new(
        message,
        params.with_content.unwrap_or(true),
    )?))
}
