//! Delivery history and operator actions: message attempts (by message, by endpoint, one),
//! expunging content, resend, endpoint stats, recover, and vow's replay with filters.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use vow_core::{AttemptId, EndpointId, MessageId, ReplayId};
use vow_store::page::Page;
use vow_store::queue::{Attempt, AttemptFilter, AttemptTrigger, ReplayFilter, StatsFilter};
use vow_store::{Delivery, Order};

use super::list::{ListParams, ListResponse};
use super::lookup::{find_endpoint, find_message, resolve_app};
use crate::actions::replay::Replay;
use crate::actions::resend::Resend;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{MaybeJson, ValidJsonBytes, ValidQuery};
use crate::http::idempotency::{self, Once};
use crate::state::AppState;

/// Attempt, stats and replay routes.
pub fn routes() -> Router<AppState> {
    let app = "/api/v1/app/{app_id}";
    Router::new()
        .route(
            &format!("{app}/attempt/msg/{{msg_id}}"),
            get(list_attempts_by_msg),
        )
        .route(
            &format!("{app}/attempt/endpoint/{{endpoint_id}}"),
            get(list_attempts_by_endpoint),
        )
        .route(
            &format!("{app}/msg/{{msg_id}}/attempt/{{attempt_id}}"),
            get(get_attempt),
        )
        .route(
            &format!("{app}/msg/{{msg_id}}/attempt/{{attempt_id}}/content"),
            delete(expunge_attempt_content),
        )
        .route(
            &format!("{app}/msg/{{msg_id}}/content"),
            delete(expunge_message_content),
        )
        .route(
            &format!("{app}/msg/{{msg_id}}/endpoint/{{endpoint_id}}/resend"),
            post(resend_message),
        )
        .route(
            &format!("{app}/endpoint/{{endpoint_id}}/stats"),
            get(get_endpoint_stats),
        )
        .route(
            &format!("{app}/endpoint/{{endpoint_id}}/recover"),
            post(recover_endpoint),
        )
        .route(
            &format!("{app}/endpoint/{{endpoint_id}}/replay"),
            post(replay_endpoint),
        )
}

/// `MessageAttemptOut`.
#[derive(Debug, Serialize)]
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

#[derive(Debug, Deserialize)]
struct AttemptQuery {
    status: Option<u8>,
    endpoint_id: Option<String>,
    before: Option<DateTime<Utc>>,
    after: Option<DateTime<Utc>>,
}

impl AttemptQuery {
    fn filter(self) -> ApiResult<AttemptFilter> {
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
        let endpoint_id = self
            .endpoint_id
            .map(|e| EndpointId::parse(&e))
            .transpose()
            .map_err(|e| {
                ApiError::invalid(&["query", "endpoint_id"], e.to_string(), "value_error.id")
            })?;
        Ok(AttemptFilter {
            endpoint_id,
            success,
            before: self.before,
            after: self.after,
            ..Default::default()
        })
    }
}

async fn list_attempts(
    state: &AppState,
    app: vow_core::AppId,
    list: ListParams,
    filter: AttemptFilter,
) -> ApiResult<Json<ListResponse<MessageAttemptOut>>> {
    let order = list.order(Order::Descending);
    let seek = list.seek(order, |it| AttemptId::parse(it).map(|_| ()))?;
    let rows = state.queue.list_attempts(app, &filter, &seek).await?;
    let page = Page::build(rows, &seek, order, |a| a.id.to_string());
    Ok(Json(page.map(MessageAttemptOut::from).into()))
}

async fn list_attempts_by_msg(
    State(state): State<AppState>,
    Path((app_id, msg_id)): Path<(String, String)>,
    ValidQuery(list): ValidQuery<ListParams>,
    ValidQuery(query): ValidQuery<AttemptQuery>,
) -> ApiResult<Json<ListResponse<MessageAttemptOut>>> {
    let app = resolve_app(&state, &app_id).await?;
    let mut filter = query.filter()?;
    filter.msg_id = Some(find_message(&state, app, &msg_id).await?);
    list_attempts(&state, app, list, filter).await
}

async fn list_attempts_by_endpoint(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    ValidQuery(list): ValidQuery<ListParams>,
    ValidQuery(query): ValidQuery<AttemptQuery>,
) -> ApiResult<Json<ListResponse<MessageAttemptOut>>> {
    let app = resolve_app(&state, &app_id).await?;
    let mut filter = query.filter()?;
    filter.endpoint_id = Some(find_endpoint(&state, app, &endpoint_id).await?);
    list_attempts(&state, app, list, filter).await
}

fn attempt_id(raw: &str) -> ApiResult<AttemptId> {
    AttemptId::parse(raw)
        .map_err(|e| ApiError::invalid(&["path", "attempt_id"], e.to_string(), "value_error.id"))
}

async fn get_attempt(
    State(state): State<AppState>,
    Path((app_id, msg_id, attempt)): Path<(String, String, String)>,
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

async fn expunge_message_content(
    State(state): State<AppState>,
    Path((app_id, msg_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let app = resolve_app(&state, &app_id).await?;
    let msg = find_message(&state, app, &msg_id).await?;
    state.queue.expunge_message_content(app, msg).await?;
    Ok(StatusCode::NO_CONTENT)
}

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

#[derive(Debug, Deserialize)]
struct StatsQuery {
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    /// vow's: only the deliveries this replay requeued (its `id` in the replay's answer).
    replay_id: Option<ReplayId>,
}

/// `EndpointStats`.
#[derive(Debug, Serialize)]
pub struct EndpointStatsOut {
    success: u64,
    pending: u64,
    sending: u64,
    fail: u64,
    canceled: u64,
}

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
#[derive(Debug, Deserialize)]
struct RecoverIn {
    since: DateTime<Utc>,
    until: Option<DateTime<Utc>>,
}

/// `RecoverOut`: the work is done by the time vow answers (it only re-queues rows).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RecoverOut {
    id: String,
    status: &'static str,
    task: &'static str,
    updated_at: DateTime<Utc>,
}

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
#[derive(Debug, Default, Deserialize)]
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

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplayOut {
    /// The replay's id, to follow it with `GET …/stats?replay_id=`; none for a dry run.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<ReplayId>,
    count: u64,
    dry_run: bool,
}

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
