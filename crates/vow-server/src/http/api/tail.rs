//! `vow tail`'s stream ([`crate::tail`]): server-sent events, `ready` first, then one `attempt`
//! per delivery attempt as it lands in the store.
//! - `GET /api/v1/attempt/stream`: every application's attempts (the admin token only);
//! - `GET /api/v1/app/{app_id}/attempt/stream`: one application's (the admin token or the
//!   application's portal token; another application is 404).
//!
//! Query: `endpoint` (id or uid, on the application's route), `status` (`success` or `fail`),
//! `after` (an attempt id: start after it instead of now). A reconnecting client sends the last
//! id it got as `Last-Event-ID` (and its first stream's start as `after`); the stream then
//! starts a little before that id, and the client skips the attempts it has.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::Router;
use chrono::Utc;
use serde::Deserialize;
use tokio_stream::{Stream, StreamExt};
use vow_core::AttemptId;
use vow_store::queue::{TailFilter, TailScope};

use super::lookup::{find_endpoint, resolve_app};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::ValidQuery;
use crate::state::AppState;
use crate::tail::feed::Feed;
use crate::tail::wire::{Outcome, Ready, TailEvent, ATTEMPT_EVENT, READY_EVENT};

/// How often an idle stream sends a comment, so a connection that died is noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Tail routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/attempt/stream", get(stream_all))
        .route("/api/v1/app/{app_id}/attempt/stream", get(stream_app))
}

/// A stream's query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TailQuery {
    endpoint: Option<String>,
    status: Option<Outcome>,
    after: Option<AttemptId>,
}

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
    open(&state, &headers, filter, query.after)
}

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
    open(&state, &headers, filter, query.after)
}

/// The stream of `filter`'s attempts after `after` (now, by default), resumed after the
/// request's `Last-Event-ID` if it has one.
fn open(
    state: &AppState,
    headers: &HeaderMap,
    filter: TailFilter,
    after: Option<AttemptId>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let resumed = match headers.get("last-event-id") {
        Some(raw) => Some(
            raw.to_str()
                .ok()
                .and_then(|raw| AttemptId::parse(raw).ok())
                .ok_or_else(|| {
                    ApiError::invalid(
                        &["header", "Last-Event-ID"],
                        "expected the id of an attempt (`atmpt_…`) this stream sent",
                        "value_error.id",
                    )
                })?,
        ),
        None => None,
    };
    let start = after.unwrap_or_else(|| AttemptId::first_at(Utc::now()));
    let ready = Ready {
        after: start.to_string(),
    };
    let ready = Event::default()
        .event(READY_EVENT)
        .data(serde_json::to_string(&ready).unwrap_or_default());
    let feed = Feed::new(state.queue.clone(), filter, start, resumed);
    let attempts = feed.stream().map(|attempt| {
        let id = attempt.id.to_string();
        let data = serde_json::to_string(&TailEvent::from(attempt)).unwrap_or_default();
        Ok::<_, Infallible>(Event::default().event(ATTEMPT_EVENT).id(id).data(data))
    });
    let events = tokio_stream::once(Ok(ready)).chain(attempts);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}
