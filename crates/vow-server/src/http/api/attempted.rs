//! Svix's views of deliveries and its send-example: the endpoints a message was sent to
//! (`/msg/{msg_id}/endpoint`), the messages an endpoint was sent (`/endpoint/{endpoint_id}/msg`),
//! each with the delivery's `MessageStatus`, and `/endpoint/{endpoint_id}/send-example`.
//!
//! Statuses: `delivered` is 0 (success), `dead_lettered` 2 (fail), a `pending` delivery a worker
//! holds a lease on 3 (sending), any other `pending` one 1, and `held` (its endpoint is
//! disabled) also 1 (pending): it is kept and goes out once replayed, like Svix's pending
//! messages to a disabled endpoint. `nextAttempt` is the time a `pending` delivery is (or was,
//! while sending) due; `null` for the others, which nothing schedules.

use axum::extract::{Path, State};
use axum::response::Response;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_core::{EndpointId, EventTypeName, MessageId};
use vow_store::page::Page;
use vow_store::queue::{DeliveryState, MessageStatus};
use vow_store::{DeliveryStatus, Order};

use super::attempt::ExpandedStatuses;
use super::endpoint::EndpointOut;
use super::list::{ListParams, ListResponse};
use super::lookup::{find_endpoint, find_message, resolve_app};
use super::message::{accepted, ListMessagesParams, MessageOut};
use super::validate::Problems;
use crate::actions::endpoint::Example;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{ValidJsonBytes, ValidQuery};
use crate::http::idempotency::{KeyedHeaders, Once};
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Attempted destinations, attempted messages and send-example.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_attempted_destinations))
        .routes(routes!(list_attempted_messages))
        .routes(routes!(send_example))
}

/// `status`, `statusText` and `nextAttempt` of a delivery.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = MessageStatus)]
#[serde(rename_all = "camelCase")]
struct StatusOut {
    status: u8,
    status_text: &'static str,
    next_attempt: Option<DateTime<Utc>>,
}

impl From<&DeliveryState> for StatusOut {
    fn from(d: &DeliveryState) -> Self {
        let status = match d.status {
            MessageStatus::Success => 0,
            MessageStatus::Pending => 1,
            MessageStatus::Fail => 2,
            MessageStatus::Sending => 3,
        };
        let pending = d.delivery.status == DeliveryStatus::Pending;
        Self {
            status,
            status_text: d.status.as_str(),
            next_attempt: pending.then_some(d.delivery.next_attempt_at),
        }
    }
}

/// `MessageEndpointOut`: the endpoint as it is now, and the message's delivery to it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct MessageEndpointOut {
    #[serde(flatten)]
    endpoint: EndpointOut,
    /// Svix's deprecated endpoint version, always 1.
    version: u8,
    #[serde(flatten)]
    status: StatusOut,
}

/// `EndpointMessageOut`: the message (as `MessageOut`), and its delivery to the endpoint.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct EndpointMessageOut {
    #[serde(flatten)]
    message: MessageOut,
    #[serde(flatten)]
    status: StatusOut,
}

/// List the endpoints a message was sent to.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/msg/{msg_id}/endpoint", tag = "Message Attempt", operation_id = "v1.message-attempt.list-attempted-destinations", params(ListParams),
    responses((status = 200, description = "A page of endpoints with their delivery status.", body = ListResponse<MessageEndpointOut>)))]
async fn list_attempted_destinations(
    State(state): State<AppState>,
    Path((app_id, msg_id)): Path<(String, String)>,
    ValidQuery(list): ValidQuery<ListParams>,
) -> ApiResult<Json<ListResponse<MessageEndpointOut>>> {
    let app = resolve_app(&state, &app_id).await?;
    let msg = find_message(&state, app, &msg_id).await?;
    let order = list.order(Order::Ascending);
    let seek = list.seek(order, |it| EndpointId::parse(it).map(|_| ()))?;
    let rows = state
        .queue
        .list_attempted_destinations(app, msg, state.now(), &seek)
        .await?;
    let page = Page::build(rows, &seek, order, |r| r.endpoint.id.to_string());
    Ok(Json(
        page.map(|r| MessageEndpointOut {
            status: StatusOut::from(&r.delivery),
            endpoint: r.endpoint.into(),
            version: 1,
        })
        .into(),
    ))
}

/// `status` of an attempted-messages listing: Svix's `MessageStatus`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct StatusQuery {
    status: Option<u8>,
}

impl StatusQuery {
    fn status(&self) -> ApiResult<Option<MessageStatus>> {
        Ok(Some(match self.status {
            None => return Ok(None),
            Some(0) => MessageStatus::Success,
            Some(1) => MessageStatus::Pending,
            Some(2) => MessageStatus::Fail,
            Some(3) => MessageStatus::Sending,
            Some(_) => {
                return Err(ApiError::invalid(
                    &["query", "status"],
                    "must be 0 (success), 1 (pending), 2 (fail) or 3 (sending)",
                    "value_error.const",
                ))
            }
        }))
    }
}

/// List the messages sent to an endpoint.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/msg", tag = "Message Attempt", operation_id = "v1.message-attempt.list-attempted-messages", params(ListParams, ListMessagesParams, StatusQuery, ExpandedStatuses),
    responses((status = 200, description = "A page of messages with their delivery status.", body = ListResponse<EndpointMessageOut>)))]
async fn list_attempted_messages(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    ValidQuery(list): ValidQuery<ListParams>,
    ValidQuery(params): ValidQuery<ListMessagesParams>,
    ValidQuery(status): ValidQuery<StatusQuery>,
    ValidQuery(_statuses): ValidQuery<ExpandedStatuses>,
) -> ApiResult<Json<ListResponse<EndpointMessageOut>>> {
    let app = resolve_app(&state, &app_id).await?;
    let endpoint = find_endpoint(&state, app, &endpoint_id).await?;
    let filter = params.filter()?;
    let status = status.status()?;
    let order = list.order(Order::Descending);
    let seek = list.seek(order, |it| MessageId::parse(it).map(|_| ()))?;
    let rows = state
        .queue
        .list_attempted_messages(app, endpoint, &filter, status, state.now(), &seek)
        .await?;
    let page = Page::build(rows, &seek, order, |r| r.message.id.to_string());
    let with_content = params.with_content();
    let page = page.try_map(|r| {
        Ok::<_, ApiError>(EndpointMessageOut {
            status: StatusOut::from(&r.delivery),
            message: MessageOut::new(r.message, with_content)?,
        })
    })?;
    Ok(Json(page.into()))
}

/// `EventExampleIn`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct EventExampleIn {
    event_type: String,
    #[serde(default)]
    example_index: usize,
}

/// Sends an event type's example to one endpoint only: a real message, signed, retried and
/// listed like any other, with a single delivery (written with it in one store transaction).
/// Send an example message of an event type to an endpoint.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/send-example", tag = "Endpoint", operation_id = "v1.endpoint.send-example", params(KeyedHeaders), request_body = EventExampleIn,
    responses((status = 202, description = "Sent: the example message.", body = MessageOut)))]
async fn send_example(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    once: Once,
    ValidJsonBytes(body, raw): ValidJsonBytes<EventExampleIn>,
) -> ApiResult<Response> {
    let mut p = Problems::default();
    let name = p.check(
        &["body", "eventType"],
        EventTypeName::parse(body.event_type),
    );
    p.finish()?;
    let Some(name) = name else {
        return Err(ApiError::Internal("a checked name is missing".into()));
    };
    let app = resolve_app(&state, &app_id).await?;
    once.run(&state, Some(app), &raw, move |commit| async move {
        let state = commit.state();
        let endpoint = find_endpoint(state, app, &endpoint_id).await?;
        let at = ["body", "exampleIndex"];
        let example = Example::new(state, app, endpoint, &name, body.example_index, &at).await?;
        let response = accepted(example.message().clone().into_stored(), true);
        let (_, response) = commit.act_answering(example, response).await?;
        Ok(response)
    })
    .await
}
