//! Delivery history and operator actions: message attempts (by message, by endpoint, one),
//! expunging content, resend, endpoint stats, recover, and vow's replay with filters.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use vow_core::{AttemptId, EndpointId, MessageId, ReplayId};
use vow_store::page::Page;
use vow_store::queue::{
    Attempt, AttemptFilter, AttemptTrigger, ReplayFilter, StatsFilter, StatusClass,
};
use vow_store::{Delivery, MessageFilter, Order};

use super::list::{ListParams, ListResponse};
use super::lookup::{find_endpoint, find_message, resolve_app};
use super::message::{checked_filter, event_types_of};
use crate::actions::replay::Replay;
use crate::actions::resend::Resend;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{MaybeJson, ValidJsonBytes, ValidQuery};
use crate::http::idempotency::{self, KeyedHeaders, Once};
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Attempt, stats and replay routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_attempts_by_msg))
        .routes(routes!(list_attempts_by_endpoint))
        .routes(routes!(get_attempt))
        .routes(routes!(expunge_attempt_content))
        .routes(routes!(expunge_message_content))
        .routes(routes!(resend_message))
        .routes(routes!(get_endpoint_stats))
        .routes(routes!(recover_endpoint))
        .routes(routes!(replay_endpoint))
}

/// `MessageAttemptOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageAttemptOut {
    id: AttemptId,
    msg_id: MessageId,
    endpoint_id: EndpointId,
    url: String,
    response: String,
    response_status_code: i32,
    response_duration_ms: u64,
    /// 0 success, 2 fail (Svix's `MessageStatus`).
    status: u8,
    status_text: &'static str,
    /// 0 scheduled, 1 manual.
    trigger_type: u8,
    timestamp: DateTime<Utc>,
}

impl From<Attempt> for MessageAttemptOut {
    fn from(a: Attempt) -> Self {
        let row = a.attempt;
        Self {
            id: a.id,
            msg_id: a.msg_id,
            endpoint_id: a.endpoint_id,
            url: row.url,
            response: row.response,
            response_status_code: row.response_status.map_or(0, i32::from),
            response_duration_ms: row.duration_ms,
            status: if row.success { 0 } else { 2 },
            status_text: if row.success { "success" } else { "fail" },
            trigger_type: match row.trigger {
                AttemptTrigger::Scheduled => 0,
                AttemptTrigger::Manual => 1,
            },
            timestamp: row.started_at,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct AttemptQuery {
    /// 0 (success) or 2 (fail).
    status: Option<u8>,
    endpoint_id: Option<String>,
    before: Option<DateTime<Utc>>,
    after: Option<DateTime<Utc>>,
    /// Only attempts whose answer is in this class: 0 (no answer), 100, 200, 300, 400 or 500.
    status_code_class: Option<u16>,
    /// Only attempts of messages of these event types.
    #[serde(default)]
    event_types: Vec<String>,
    /// Only attempts of messages sent on this channel.
    channel: Option<String>,
    /// Whether each attempt's `response` body is included (the default); without it the
    /// `response` is empty.
    with_content: Option<bool>,
}

impl AttemptQuery {
    fn filter(&self) -> ApiResult<AttemptFilter> {
        let success = match self.status {
            None => None,
            Some(0) => Some(true),
            Some(2) => Some(false),
            Some(_) => {
                return Err(ApiError::invalid(
                    &["query", "status"],
                    "attempts are 0 (success) or 2 (fail)",
                    "value_error.const",
                ))
            }
        };
        let status_class = match self.status_code_class {
            None => None,
            Some(0) => Some(StatusClass::NoResponse),
            Some(c @ (100 | 200 | 300 | 400 | 500)) => Some(StatusClass::Answered(c)),
            Some(_) => {
                return Err(ApiError::invalid(
                    &["query", "status_code_class"],
                    "must be 0 (no answer), 100, 200, 300, 400 or 500",
                    "value_error.const",
                ))
            }
        };
        let endpoint_id = (self.endpoint_id.as_deref())
            .map(EndpointId::parse)
            .transpose()
            .map_err(|e| {
                ApiError::invalid(&["query", "endpoint_id"], e.to_string(), "value_error.id")
            })?;
        let of_messages = checked_filter(MessageFilter {
            event_types: event_types_of(&self.event_types),
            channel: self.channel.clone(),
            ..MessageFilter::default()
        })?;
        Ok(AttemptFilter {
            endpoint_id,
            success,
            status_class,
            before: self.before,
            after: self.after,
            event_types: of_messages.event_types,
            channel: of_messages.channel,
            ..Default::default()
        })
    }
}

/// `expanded_statuses`, which Svix's SDKs send with every attempt read: vow never cancels an
/// attempt (Svix's status 4), so `true` and `false` give the same answer.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExpandedStatuses {
    #[allow(dead_code)] // checked to be a boolean; no answer depends on it
    expanded_statuses: Option<bool>,
}

async fn list_attempts(
    state: &AppState,
    app: vow_core::AppId,
    list: ListParams,
    query: &AttemptQuery,
    scope: impl FnOnce(&mut AttemptFilter),
) -> ApiResult<Json<ListResponse<MessageAttemptOut>>> {
    let mut filter = query.filter()?;
    scope(&mut filter);
    let with_content = query.with_content.unwrap_or(true);
    let order = list.order(Order::Descending);
    let seek = list.seek(order, |it| AttemptId::parse(it).map(|_| ()))?;
    let rows = state.queue.list_attempts(app, &filter, &seek).await?;
    let page = Page::build(rows, &seek, order, |a| a.id.to_string());
    let out = |a: Attempt| {
        let mut out = MessageAttemptOut::from(a);
        if !with_content {
            out.response.clear();
        }
        out
    };
    Ok(Json(page.map(out).into()))
}

/// List the delivery attempts of a message.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/attempt/msg/{msg_id}", tag = "Message Attempt", operation_id = "v1.message-attempt.list-by-msg", params(ListParams, AttemptQuery, ExpandedStatuses),
    responses((status = 200, description = "A page of attempts.", body = ListResponse<MessageAttemptOut>)))]
async fn list_attempts_by_msg(
    State(state): State<AppState>,
    Path((app_id, msg_id)): Path<(String, String)>,
    ValidQuery(list): ValidQuery<ListParams>,
    ValidQuery(query): ValidQuery<AttemptQuery>,
    ValidQuery(_statuses): ValidQuery<ExpandedStatuses>,
) -> ApiResult<Json<ListResponse<MessageAttemptOut>>> {
    let app = resolve_app(&state, &app_id).await?;
    let msg = find_message(&state, app, &msg_id).await?;
    list_attempts(&state, app, list, &query, |f| f.msg_id = Some(msg)).await
}

/// List the delivery attempts to an endpoint.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/attempt/endpoint/{endpoint_id}", tag = "Message Attempt", operation_id = "v1.message-attempt.list-by-endpoint", params(ListParams, AttemptQuery, ExpandedStatuses),
    responses((status = 200, description = "A page of attempts.", body = ListResponse<MessageAttemptOut>)))]
async fn list_attempts_by_endpoint(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    ValidQuery(list): ValidQuery<ListParams>,
    ValidQuery(query): ValidQuery<AttemptQuery>,
    ValidQuery(_statuses): ValidQuery<ExpandedStatuses>,
) -> ApiResult<Json<ListResponse<MessageAttemptOut>>> {
    let app = resolve_app(&state, &app_id).await?;
    let endpoint = find_endpoint(&state, app, &endpoint_id).await?;
    list_attempts(&state, app, list, &query, |f| {
        f.endpoint_id = Some(endpoint)
    })
    .await
}

fn attempt_id(raw: &str) -> ApiResult<AttemptId> {
    AttemptId::parse(raw)
        .map_err(|e| ApiError::invalid(&["path", "attempt_id"], e.to_string(), "value_error.id"))
}

/// Get a delivery attempt.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}", tag = "Message Attempt", operation_id = "v1.message-attempt.get", params(ExpandedStatuses),
    responses((status = 200, description = "The attempt.", body = MessageAttemptOut)))]
async fn get_attempt(
    State(state): State<AppState>,
    Path((app_id, msg_id, attempt)): Path<(String, String, String)>,
    ValidQuery(_statuses): ValidQuery<ExpandedStatuses>,
) -> ApiResult<Json<MessageAttemptOut>> {
    let app = resolve_app(&state, &app_id).await?;
    let msg = find_message(&state, app, &msg_id).await?;
    let found = state
        .queue
        .get_attempt(app, msg, attempt_id(&attempt)?)
        .await?;
    Ok(Json(
        found.ok_or_else(|| ApiError::not_found("Attempt"))?.into(),
    ))
}

/// Delete an attempt's response body.
#[utoipa::path(delete, path = "/api/v1/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}/content", tag = "Message Attempt", operation_id = "v1.message-attempt.expunge-content",
    responses((status = 204, description = "Expunged.")))]
async fn expunge_attempt_content(
    State(state): State<AppState>,
    Path((app_id, msg_id, attempt)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let app = resolve_app(&state, &app_id).await?;
    let msg = find_message(&state, app, &msg_id).await?;
    state
        .queue
        .expunge_attempt_content(app, msg, attempt_id(&attempt)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Delete a message's payload.
#[utoipa::path(delete, path = "/api/v1/app/{app_id}/msg/{msg_id}/content", tag = "Message", operation_id = "v1.message.expunge-content",
    responses((status = 204, description = "Expunged.")))]
async fn expunge_message_content(
    State(state): State<AppState>,
    Path((app_id, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let app = resolve_app(&state, &app_id).await?;
    let msg = find_message(&state, app, &msg_id).await?;
    state.queue.expunge_message_content(app, msg).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Resend a message to an endpoint.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/resend", tag = "Message Attempt", operation_id = "v1.message-attempt.resend", params(KeyedHeaders),
    responses((status = 202, description = "Queued.", body = Object)))]
async fn resend_message(
    State(state): State<AppState>,
    Path((app_id, msg_id, endpoint_id)): Path<(String, String, String)>,
    once: Once,
) -> ApiResult<Response> {
    let app = resolve_app(&state, &app_id).await?;
    once.run(&state, Some(app), &[], move |commit| async move {
        let state = commit.state();
        let resend = Resend {
            app,
            msg: find_message(state, app, &msg_id).await?,
            endpoint: find_endpoint(state, app, &endpoint_id).await?,
            now: state.now(),
        };
        // Svix answers `EmptyResponse`, `{}`, which its SDKs parse.
        let render = |_: &Delivery| idempotency::json(StatusCode::ACCEPTED, &json!({}), None);
        Ok(commit.act(resend, render).await?.1)
    })
    .await
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct StatsQuery {
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    /// vow's: only the deliveries this replay requeued (its `id` in the replay's answer).
    replay_id: Option<ReplayId>,
}

/// `EndpointStats`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = EndpointStats)]
pub struct EndpointStatsOut {
    success: u64,
    pending: u64,
    sending: u64,
    fail: u64,
    canceled: u64,
}

/// Get the delivery statistics of an endpoint.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/stats", tag = "Endpoint", operation_id = "v1.endpoint.get-stats", params(StatsQuery),
    responses((status = 200, description = "Attempt counts by outcome.", body = EndpointStatsOut)))]
async fn get_endpoint_stats(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    ValidQuery(q): ValidQuery<StatsQuery>,
) -> ApiResult<Json<EndpointStatsOut>> {
    let app = resolve_app(&state, &app_id).await?;
    let endpoint = find_endpoint(&state, app, &endpoint_id).await?;
    let filter = StatsFilter {
        since: q.since,
        until: q.until,
        replay: q.replay_id,
    };
    let s = (state.queue)
        .endpoint_stats(app, endpoint, &filter, state.now())
        .await?;
    Ok(Json(EndpointStatsOut {
        success: s.success,
        pending: s.pending,
        sending: s.sending,
        fail: s.fail,
        canceled: 0,
    }))
}

/// `RecoverIn`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct RecoverIn {
    since: DateTime<Utc>,
    until: Option<DateTime<Utc>>,
}

/// `RecoverOut`: the work is done by the time vow answers (it only re-queues rows).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct RecoverOut {
    id: String,
    status: &'static str,
    task: &'static str,
    updated_at: DateTime<Utc>,
}

/// Resend the failed messages of an endpoint since a time.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/recover", tag = "Endpoint", operation_id = "v1.endpoint.recover", params(KeyedHeaders), request_body = RecoverIn,
    responses((status = 202, description = "Queued.", body = RecoverOut)))]
async fn recover_endpoint(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    once: Once,
    ValidJsonBytes(body, raw): ValidJsonBytes<RecoverIn>,
) -> ApiResult<Response> {
    let filter = ReplayFilter {
        since: Some(body.since),
        until: body.until,
        ..Default::default()
    };
    let filter = Replay::filter("body", filter)?;
    let app = resolve_app(&state, &app_id).await?;
    once.run(&state, Some(app), &raw, move |commit| async move {
        let now = commit.state().now();
        let endpoint = find_endpoint(commit.state(), app, &endpoint_id).await?;
        let replay = Replay {
            app,
            endpoint,
            id: ReplayId::new(),
            filter,
            now,
        };
        let render = move |_: &u64| {
            let out = RecoverOut {
                id: format!("qtask_{}", ulid::Ulid::new()),
                status: "finished",
                task: "endpoint.recover",
                updated_at: now,
            };
            idempotency::json(StatusCode::ACCEPTED, &out, Some(out.id.clone()))
        };
        Ok(commit.act(replay, render).await?.1)
    })
    .await
}

/// vow's replay: dead-lettered and held deliveries of an endpoint, filtered.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct ReplayIn {
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    #[serde(default)]
    event_types: Vec<String>,
    last_status_code: Option<u16>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct ReplayOut {
    /// The replay's id, to follow it with `GET …/stats?replay_id=`; none for a dry run.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<ReplayId>,
    count: u64,
    dry_run: bool,
}

/// Send an endpoint the messages it never got since a time.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/replay", tag = "Endpoint", operation_id = "v1.endpoint.replay-missing", params(KeyedHeaders), request_body = Option<ReplayIn>,
    responses((status = 200, description = "Queued.", body = ReplayOut)))]
async fn replay_endpoint(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    once: Once,
    MaybeJson(body, raw): MaybeJson<ReplayIn>,
) -> ApiResult<Response> {
    let body = body.unwrap_or_default();
    let filter = ReplayFilter {
        since: body.since,
        until: body.until,
        event_types: body.event_types,
        last_status: body.last_status_code,
    };
    let filter = Replay::filter("body", filter)?;
    let dry_run = body.dry_run;
    let app = resolve_app(&state, &app_id).await?;
    once.run(&state, Some(app), &raw, move |commit| async move {
        let state = commit.state();
        let id = ReplayId::new();
        let replay = Replay {
            app,
            endpoint: find_endpoint(state, app, &endpoint_id).await?,
            id,
            filter,
            now: state.now(),
        };
        let render = move |count: &u64| {
            let out = ReplayOut {
                id: (!dry_run).then_some(id),
                count: *count,
                dry_run,
            };
            idempotency::json(StatusCode::OK, &out, None)
        };
        if dry_run {
            let count = replay.count(state).await?;
            return Ok(idempotency::respond::stored(render(&count)));
        }
        Ok(commit.act(replay, render).await?.1)
    })
    .await
}
