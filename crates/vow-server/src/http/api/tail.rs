//! `vow tail`'s streams ([`crate::tail`]): server-sent events, `ready` first, then one event
//! per row as it lands in the store.
//! - `GET /api/v1/attempt/stream`: every application's attempts (the admin token only);
//! - `GET /api/v1/app/{app_id}/attempt/stream`: one application's (the admin token or the
//!   application's portal token; another application is 404);
//! - `GET /api/v1/source/{source_id}/event/stream`: an inbound source's activity (`activity`
//!   events: arrivals, forward outcomes, refusals; the admin token only, as every source route).
//!
//! Query: `endpoint` (id or uid, on the application's route), `status` (`success` or `fail`;
//! a source's: `fail` only, its refusals, quarantined arrivals and forwards not completed),
//! `after` (an attempt id, or a source's activity key: start after it instead of now). A
//! reconnecting client sends the last id it got as `Last-Event-ID` (and its first stream's start
//! as `after`); the stream then starts a little before that id, and the client skips the rows
//! it has.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use chrono::Utc;
use serde::Deserialize;
use tokio_stream::{Stream, StreamExt};
use vow_core::AttemptId;
use vow_store::inbound::activity::{ActivityFilter, ActivityKey};
use vow_store::queue::{TailFilter, TailScope};

use super::lookup::{find_endpoint, find_source, resolve_app};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::ValidQuery;
use crate::state::AppState;
use crate::tail::activity::{ActivityLine, SourceActivity, ACTIVITY_EVENT};
use crate::tail::attempts::Attempts;
use crate::tail::feed::{Cursor, Feed, Tailed};
use crate::tail::wire::{Failures, Outcome, Ready, TailEvent, ATTEMPT_EVENT, READY_EVENT};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// How often an idle stream sends a comment, so a connection that died is noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Tail routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(stream_all))
        .routes(routes!(stream_app))
        .routes(routes!(stream_source))
}

/// A stream's query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct TailQuery {
    endpoint: Option<String>,
    status: Option<Outcome>,
    after: Option<AttemptId>,
}

/// Stream every delivery attempt as it happens (server-sent events).
#[utoipa::path(get, path = "/api/v1/attempt/stream", tag = "Message Attempt", operation_id = "v1.message-attempt.stream", params(TailQuery),
    responses((status = 200, description = "Attempts as they happen, as server-sent events.", content_type = "text/event-stream", body = crate::http::openapi::ServerSentEvent)))]
async fn stream_all(
    State(state): State<AppState>,
    headers: HeaderMap,
    ValidQuery(query): ValidQuery<TailQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    if query.endpoint.is_some() {
        return Err(ApiError::invalid(
            &["query", "endpoint"],
            "an endpoint belongs to an application: stream /api/v1/app/{app_id}/attempt/stream",
            "value_error",
        ));
    }
    let filter = TailFilter {
        success: query.status.map(Outcome::success),
        ..TailFilter::default()
    };
    open_attempts(&state, &headers, filter, query.after)
}

/// Stream an application's delivery attempts as they happen.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/attempt/stream", tag = "Message Attempt", operation_id = "v1.message-attempt.stream-app", params(TailQuery),
    responses((status = 200, description = "Attempts as they happen, as server-sent events.", content_type = "text/event-stream", body = crate::http::openapi::ServerSentEvent)))]
async fn stream_app(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
    ValidQuery(query): ValidQuery<TailQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let app = resolve_app(&state, &app_id).await?;
    let scope = match &query.endpoint {
        Some(raw) => TailScope::Endpoint(app, find_endpoint(&state, app, raw).await?),
        None => TailScope::App(app),
    };
    let filter = TailFilter {
        scope,
        success: query.status.map(Outcome::success),
    };
    open_attempts(&state, &headers, filter, query.after)
}

/// A source stream's query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct SourceTailQuery {
    status: Option<Failures>,
    after: Option<String>,
}

/// Stream a source's events as they happen.
#[utoipa::path(get, path = "/api/v1/source/{source_id}/event/stream", tag = "Source Event", operation_id = "v1.source.event.stream", params(SourceTailQuery),
    responses((status = 200, description = "Events and forwards as they happen, as server-sent events.", content_type = "text/event-stream", body = crate::http::openapi::ServerSentEvent)))]
async fn stream_source(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
    headers: HeaderMap,
    ValidQuery(query): ValidQuery<SourceTailQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let source = find_source(&state, &source_id).await?;
    let after =
        match &query.after {
            Some(raw) => Some(raw.parse::<ActivityKey>().map_err(|e| {
                ApiError::invalid(&["query", "after"], e.to_string(), "value_error")
            })?),
            None => None,
        };
    let activity = SourceActivity {
        inbound: state.inbound.clone(),
        filter: ActivityFilter {
            source: source.id,
            failures_only: matches!(query.status, Some(Failures::Fail)),
        },
    };
    let resumed = last_event_id(&headers, "a position (`<microseconds>.<id>.<part>`)")?;
    open(activity, after, resumed, |row| {
        let line = ActivityLine::from(row);
        let data = serde_json::to_string(&line).unwrap_or_default();
        Event::default()
            .event(ACTIVITY_EVENT)
            .id(line.key)
            .data(data)
    })
}

/// The stream of `filter`'s attempts after `after` (now, by default), resumed after the
/// request's `Last-Event-ID` if it has one.
fn open_attempts(
    state: &AppState,
    headers: &HeaderMap,
    filter: TailFilter,
    after: Option<AttemptId>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let resumed = last_event_id(headers, "the id of an attempt (`atmpt_…`)")?;
    let attempts = Attempts {
        queue: state.queue.clone(),
        filter,
    };
    open(attempts, after, resumed, |attempt| {
        let id = attempt.id.to_string();
        let data = serde_json::to_string(&TailEvent::from(attempt)).unwrap_or_default();
        Event::default().event(ATTEMPT_EVENT).id(id).data(data)
    })
}

/// The request's `Last-Event-ID`, if it has one: `what` a stream sent (422 when it is not).
fn last_event_id<K: Cursor>(headers: &HeaderMap, what: &str) -> ApiResult<Option<K>> {
    let Some(raw) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let parsed = raw.to_str().ok().and_then(|raw| raw.parse().ok());
    parsed.map(Some).ok_or_else(|| {
        ApiError::invalid(
            &["header", "Last-Event-ID"],
            format!("expected {what} this stream sent"),
            "value_error.id",
        )
    })
}

/// The stream of `tailed`'s rows after `after` (now, by default), resumed after `resumed`,
/// each row the event `event` makes of it.
fn open<T: Tailed>(
    tailed: T,
    after: Option<T::Key>,
    resumed: Option<T::Key>,
    event: impl Fn(T::Row) -> Event + Send + 'static,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let start = after.unwrap_or_else(|| T::Key::first_at(Utc::now()));
    let ready = Ready {
        after: start.to_string(),
    };
    let ready = Event::default()
        .event(READY_EVENT)
        .data(serde_json::to_string(&ready).unwrap_or_default());
    let rows = Feed::new(tailed, start, resumed)
        .stream()
        .map(move |row| Ok::<_, Infallible>(event(row)));
    let events = tokio_stream::once(Ok(ready)).chain(rows);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}
