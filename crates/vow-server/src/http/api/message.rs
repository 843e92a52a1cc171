//! Messages: `/api/v1/app/{app_id}/msg[/{msg_id}]`.
//!
//! Creating a message writes it and its delivery rows in one store transaction. The payload is
//! kept as the exact JSON text the client sent (never re-serialised), so what is signed and
//! delivered is byte-for-byte what was posted. With an `Idempotency-Key`, the create goes through
//! [`crate::http::idempotency`], which stores the same 202 response with the message, in its
//! transaction.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use vow_core::{Channel, EventTypeName, MessageId};
use vow_store::idempotency::{StoredResponse, Write};
use vow_store::page::Page;
use vow_store::{
    AppKey, CreatedMessage, Message, MessageFilter, NewApplication, NewMessage, Order,
};

use super::application::{self, ApplicationIn};
use super::{app_key, message_key, ListParams, ListResponse, Problems};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{ValidJsonBytes, ValidQuery};
use crate::http::idempotency::{self, Once};
use crate::http::AppState;

/// Message routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/app/{app_id}/msg",
            get(list_messages).post(create_message),
        )
        .route("/api/v1/app/{app_id}/msg/{msg_id}", get(get_message))
}

/// `MessageIn`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageIn {
    event_type: String,
    payload: Box<RawValue>,
    event_id: Option<String>,
    channels: Option<Vec<String>>,
    payload_retention_period: Option<i64>,
    application: Option<ApplicationIn>,
}

/// `MessageOut`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageOut {
    id: MessageId,
    event_type: String,
    event_id: Option<String>,
    channels: Option<Vec<String>>,
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

#[derive(Debug, Deserialize)]
struct ContentParams {
    with_content: Option<bool>,
}

async fn create_message(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    once: Once,
    ValidQuery(params): ValidQuery<ContentParams>,
    ValidJsonBytes(body, raw): ValidJsonBytes<MessageIn>,
) -> ApiResult<Response> {
    let new = new_message(&state, &app_id, body).await?;
    let with_content = params.with_content.unwrap_or(true);
    once.run(&state, Some(new.app_id), &raw, move |commit| async move {
        let response = accepted(new.clone().into_stored(), with_content);
        let write = Write::CreateMessage { new, only: None };
        let (_, response) = commit
            .write_answering::<CreatedMessage>(write, response)
            .await?;
        metrics::counter!(crate::metrics::MESSAGES).increment(1);
        Ok(response)
    })
    .await
}

/// Validates `body` and resolves the application in the path into the message to create.
async fn new_message(state: &AppState, app_id: &str, body: MessageIn) -> ApiResult<NewMessage> {
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
    // application (it checks in the same transaction). A uid is resolved, and may create the
    // application from `MessageIn.application`.
    let app_id = match key {
        AppKey::Id(id) => id,
        AppKey::Uid(_) => match state.store.get_application(&key).await? {
            Some(app) => app.id,
            None => create_app_for(state, key, new_app).await?.id,
        },
    };
    let now = state.now();
    Ok(NewMessage {
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
    })
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

/// Creates the application named by the path from `MessageIn.application`, or 404 without one.
async fn create_app_for(
    state: &AppState,
    key: AppKey,
    fields: Option<vow_store::ApplicationFields>,
) -> ApiResult<vow_store::Application> {
    let (AppKey::Uid(uid), Some(mut fields)) = (key.clone(), fields) else {
        return Err(ApiError::not_found("Application"));
    };
    fields.uid = Some(uid);
    let new = NewApplication {
        id: vow_core::AppId::new(),
        fields,
        now: state.now(),
    };
    match state.store.create_application(new).await {
        Ok(app) => Ok(app),
        // Another request created it first: use theirs.
        Err(vow_store::StoreError::Conflict(_)) => application::find(state, &key).await,
        Err(e) => Err(e.into()),
    }
}

/// The filters of a message listing (`event_types`, `channel`, `before`, `after`) and
/// `with_content`.
#[derive(Debug, Deserialize)]
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
        // Repeated keys (`event_types=a&event_types=b`) and the SDKs' `event_types=a,b` alike.
        let event_types: Vec<String> = self
            .event_types
            .iter()
            .flat_map(|t| t.split(','))
            .map(str::to_string)
            .collect();
        let mut p = Problems::default();
        for (i, t) in event_types.iter().enumerate() {
            p.check(
                &["query", "event_types", &i.to_string()],
                EventTypeName::parse(t.as_str()),
            );
        }
        if let Some(c) = &self.channel {
            p.check(&["query", "channel"], Channel::parse(c.as_str()));
        }
        p.finish()?;
        Ok(MessageFilter {
            event_types,
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

async fn list_messages(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    ValidQuery(list): ValidQuery<ListParams>,
    ValidQuery(params): ValidQuery<ListMessagesParams>,
) -> ApiResult<Json<ListResponse<MessageOut>>> {
    let app = application::resolve(&state, &app_id).await?;
    let filter = params.filter()?;
    let order = list.order(Order::Descending);
    let seek = list.seek(order, |it| MessageId::parse(it).map(|_| ()))?;
    let rows = state.store.list_messages(app, &filter, &seek).await?;
    let page = Page::build(rows, &seek, order, |m| m.id.to_string());
    let with_content = params.with_content();
    let page = page.try_map(|m| MessageOut::new(m, with_content))?;
    Ok(Json(page.into()))
}

async fn get_message(
    State(state): State<AppState>,
    Path((app_id, msg_id)): Path<(String, String)>,
    ValidQuery(params): ValidQuery<ContentParams>,
) -> ApiResult<Json<MessageOut>> {
    let app = application::resolve(&state, &app_id).await?;
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
