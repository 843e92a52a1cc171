//! `vow listen --source`'s side of the API ([`crate::relay`]): an inbound source's forwarded
//! events relayed to a developer's machine.
//!
//! - `POST /api/v1/source/{source_id}/listen` adds a relay destination to the source (URL
//!   [`RELAY_URL`](crate::relay::RELAY_URL), its own Standard Webhooks secret) and answers its
//!   id, secret, stream and result paths as an application's listen does;
//! - `GET /api/v1/source/{source_id}/listen/{destination_id}` is the stream, and
//!   `POST …/result` reports local answers, both shared with [`super::listen`];
//! - `DELETE /api/v1/source/{source_id}/listen/{destination_id}` removes the destination.
//!
//! The forwarder hands a relay destination's forward to its listener; the local answer is the
//! forward's result, classified as any destination's. Another source's destination, or one
//! that is not a relay destination, is 404 / 409.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use vow_store::relay::RelayTarget;

use super::keys::destination_key;
use super::listen::{check_results, report_to, stream_to, ListenOut, ReportOut};
use super::lookup::find_source;
use super::source::MAX_DESTINATIONS;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::ValidJson;
use crate::relay::wire::RelayResult;
use crate::relay::{is_relay, targets};
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Source listen routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_listen))
        .routes(routes!(stream, delete_listen))
        .routes(routes!(report))
}

/// Create a relay destination that a local listener receives a source's events through.
#[utoipa::path(post, path = "/api/v1/source/{source_id}/listen", tag = "Listen", operation_id = "v1.source.listen.create",
    responses((status = 201, description = "A relay destination to listen on.", body = ListenOut)))]
async fn create_listen(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
) -> ApiResult<(StatusCode, Json<ListenOut>)> {
    let source = find_source(&state, &source_id).await?;
    let added = targets::add_destination(
        state.store.as_ref(),
        state.inbound.as_ref(),
        &source,
        MAX_DESTINATIONS,
        state.now(),
    )
    .await?;
    let Some(destination) = added else {
        return Err(ApiError::Conflict(format!(
            "source {} has {MAX_DESTINATIONS} destinations, the most a source may have: remove one to listen",
            source.id
        )));
    };
    let target = RelayTarget::Destination {
        source: source.id,
        id: destination.id,
    };
    Ok((
        StatusCode::CREATED,
        Json(ListenOut::of(target, destination.secret)),
    ))
}

/// The relay destination `{destination_id}` of `{source_id}`: 404 when absent, 409 when it is
/// an ordinary destination.
async fn relay_destination(
    state: &AppState,
    source_id: &str,
    destination_id: &str,
) -> ApiResult<RelayTarget> {
    let source = find_source(state, source_id).await?;
    let id = destination_key(destination_id)?;
    let destination = source
        .fields
        .destinations
        .iter()
        .find(|d| d.id == id)
        .ok_or_else(|| ApiError::not_found("Destination"))?;
    if !is_relay(&destination.url) {
        return Err(ApiError::Conflict(format!(
            "destination {id} is not a relay destination (only one `POST /api/v1/source/{{source_id}}/listen` made can be listened on)"
        )));
    }
    Ok(RelayTarget::Destination {
        source: source.id,
        id,
    })
}

/// Stream a relay destination's forwards (server-sent events).
#[utoipa::path(get, path = "/api/v1/source/{source_id}/listen/{destination_id}", tag = "Listen", operation_id = "v1.source.listen.stream",
    responses((status = 200, description = "The events, as server-sent events.", content_type = "text/event-stream", body = crate::http::openapi::ServerSentEvent)))]
async fn stream(
    State(state): State<AppState>,
    Path((source_id, destination_id)): Path<(String, String)>,
) -> ApiResult<impl axum::response::IntoResponse> {
    let target = relay_destination(&state, &source_id, &destination_id).await?;
    stream_to(&state, target).await
}

/// Report what the local URL answered to relayed forwards.
#[utoipa::path(post, path = "/api/v1/source/{source_id}/listen/{destination_id}/result", tag = "Listen", operation_id = "v1.source.listen.report", request_body = Vec<RelayResult>,
    responses((status = 200, description = "How many results were recorded.", body = ReportOut)))]
async fn report(
    State(state): State<AppState>,
    Path((source_id, destination_id)): Path<(String, String)>,
    ValidJson(results): ValidJson<Vec<RelayResult>>,
) -> ApiResult<Json<ReportOut>> {
    check_results(&results)?;
    let target = relay_destination(&state, &source_id, &destination_id).await?;
    Ok(report_to(&state, target, results))
}

/// Delete a relay destination.
#[utoipa::path(delete, path = "/api/v1/source/{source_id}/listen/{destination_id}", tag = "Listen", operation_id = "v1.source.listen.delete",
    responses((status = 204, description = "Deleted.")))]
async fn delete_listen(
    State(state): State<AppState>,
    Path((source_id, destination_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let target = relay_destination(&state, &source_id, &destination_id).await?;
    let removed = targets::remove(
        state.store.as_ref(),
        state.inbound.as_ref(),
        target,
        state.now(),
    )
    .await?;
    if !removed {
        return Err(ApiError::not_found("Destination"));
    }
    Ok(StatusCode::NO_CONTENT)
}
