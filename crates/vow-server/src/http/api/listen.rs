//! `vow listen`'s side of the API ([`crate::relay`]):
//! - `POST /api/v1/app/{app_id}/listen` creates a relay endpoint (optionally filtered by
//!   `eventTypes` and `channels`) and answers its id, signing secret, stream and result paths;
//! - `GET /api/v1/app/{app_id}/listen/{endpoint_id}` is the stream: server-sent events, `ready`
//!   once the listener is registered, then one `delivery` per attempt;
//! - `POST /api/v1/app/{app_id}/listen/{endpoint_id}/result` reports local answers, in batches.
//!
//! The relay endpoint is an ordinary endpoint: it is deleted with `DELETE
//! /api/v1/app/{app_id}/endpoint/{endpoint_id}`, and its attempts are read like any others.
//! The admin token or the application's portal token may listen (a read-only one may not: a
//! listener answers deliveries); another application's endpoint is 404.
//!
//! An inbound source's listen ([`super::source_listen`]) streams and reports through the same
//! [`stream_to`] and [`report_to`]. Creating either records the target as seen
//! ([`vow_store::RelayListeners`]); a connected stream is renewed by [`crate::relay::expiry`].

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use tokio_stream::{Stream, StreamExt};
use vow_core::EndpointId;
use vow_store::relay::RelayTarget;
use vow_store::Endpoint;

use super::endpoint::EndpointIn;
use super::keys::endpoint_key;
use super::lookup::{find_endpoint_in, resolve_app};
use super::validate::Problems;
use crate::actions::{self, endpoint::CreateEndpoint};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{MaybeJson, ValidJson};
use crate::http::principal::Principal;
use crate::relay::is_relay;
use crate::relay::wire::{Answer, RelayResult, DELIVERY_EVENT, READY_EVENT};
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// How often an idle stream sends a comment, so a connection that died is noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The most results one report may carry.
const MAX_RESULTS: usize = 4096;

/// Listen routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_listen))
        .routes(routes!(stream))
        .routes(routes!(report))
}

/// `ListenIn`: which messages the relay endpoint gets (all, by default).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListenIn {
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    #[serde(default)]
    description: String,
}

/// `ListenOut`: the relay endpoint (or a source's relay destination), its signing secret, and
/// where to stream and report.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListenOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint_id: Option<EndpointId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    destination_id: Option<vow_core::DestinationId>,
    secret: String,
    stream: String,
    results: String,
}

impl ListenOut {
    /// The answer for a new listen session on `target`, whose signing secret is `secret`.
    pub(super) fn of(target: RelayTarget, secret: String) -> Self {
        let (endpoint_id, destination_id, stream) = match target {
            RelayTarget::Endpoint { app, id } => {
                (Some(id), None, format!("/api/v1/app/{app}/listen/{id}"))
            }
            RelayTarget::Destination { source, id } => (
                None,
                Some(id),
                format!("/api/v1/source/{source}/listen/{id}"),
            ),
        };
        Self {
            endpoint_id,
            destination_id,
            secret,
            results: format!("{stream}/result"),
            stream,
        }
    }
}

/// What a report did: results matched to a waiting attempt, and results that came too late
/// (their attempt timed out) or named no attempt of this endpoint.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportOut {
    accepted: usize,
    unmatched: usize,
}

/// Create a relay endpoint that a local listener receives deliveries through.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/listen", tag = "Listen", operation_id = "v1.listen.create", request_body = Option<ListenIn>,
    responses((status = 201, description = "A relay endpoint to listen on.", body = ListenOut)))]
async fn create_listen(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    MaybeJson(body, _): MaybeJson<ListenIn>,
) -> ApiResult<(StatusCode, Json<ListenOut>)> {
    let body = body.unwrap_or_default();
    let fields = EndpointIn::relay(body.description, body.event_types, body.channels)?;
    let app = resolve_app(&state, &app_id).await?;
    let secret = crate::secret::generate();
    let create = CreateEndpoint::new(&state, app, fields, Some(secret.clone()));
    let endpoint = actions::apply(&state, create).await?;
    let target = RelayTarget::Endpoint {
        app,
        id: endpoint.id,
    };
    if let Err(e) = state.store.relays_seen(&[target], state.now()).await {
        // Not half-made: a relay endpoint the sweep does not know of would never expire.
        let _ = state.store.delete_endpoint(app, endpoint.id).await;
        return Err(e.into());
    }
    Ok((StatusCode::CREATED, Json(ListenOut::of(target, secret))))
}

/// The relay endpoint `{endpoint_id}` of `{app_id}`: 404 when absent, 409 when it is an
/// ordinary endpoint.
async fn relay_endpoint(state: &AppState, app_id: &str, endpoint_id: &str) -> ApiResult<Endpoint> {
    let app = resolve_app(state, app_id).await?;
    let endpoint = find_endpoint_in(state, app, &endpoint_key(endpoint_id)?).await?;
    if !is_relay(&endpoint.fields.url) {
        return Err(ApiError::Conflict(format!(
            "endpoint {} is not a relay endpoint (only one `POST /api/v1/app/{{app_id}}/listen` made can be listened on)",
            endpoint.id
        )));
    }
    Ok(endpoint)
}

/// Stream a relay endpoint's deliveries (server-sent events).
#[utoipa::path(get, path = "/api/v1/app/{app_id}/listen/{endpoint_id}", tag = "Listen", operation_id = "v1.listen.stream",
    responses((status = 200, description = "The deliveries, as server-sent events.", content_type = "text/event-stream", body = crate::http::openapi::ServerSentEvent)))]
async fn stream(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    Extension(principal): Extension<Principal>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    if let Principal::Portal {
        read_only: true, ..
    } = principal
    {
        return Err(ApiError::Forbidden(
            "this app portal token is read-only: it cannot listen (a listener answers deliveries)"
                .into(),
        ));
    }
    let endpoint = relay_endpoint(&state, &app_id, &endpoint_id).await?;
    let target = RelayTarget::Endpoint {
        app: endpoint.app_id,
        id: endpoint.id,
    };
    stream_to(&state, target).await
}

/// The stream of `target`'s listener: `ready`, then one `delivery` per attempt handed to it.
/// Connecting renews the target's last-seen time at once (a listener back from a long absence
/// is not expired meanwhile); while it stays, [`crate::relay::expiry`] renews it.
pub(super) async fn stream_to(
    state: &AppState,
    target: RelayTarget,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    state.store.relays_seen(&[target], state.now()).await?;
    let connection = state.relay.connect(target);
    // Deliveries that waited for this listener are due within a second; look now.
    state.wake.notify_one();
    state.inbound_wake.notify_one();
    let ready = Event::default().event(READY_EVENT).data(target.id());
    let deliveries = connection.map(|relayed| {
        let data = serde_json::to_string(&relayed).unwrap_or_default();
        Ok::<_, Infallible>(Event::default().event(DELIVERY_EVENT).data(data))
    });
    let events = tokio_stream::once(Ok(ready)).chain(deliveries);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// Report what the local URL answered to relayed deliveries.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/listen/{endpoint_id}/result", tag = "Listen", operation_id = "v1.listen.report", request_body = Vec<RelayResult>,
    responses((status = 200, description = "How many results were recorded.", body = ReportOut)))]
async fn report(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    ValidJson(results): ValidJson<Vec<RelayResult>>,
) -> ApiResult<Json<ReportOut>> {
    check_results(&results)?;
    let endpoint = relay_endpoint(&state, &app_id, &endpoint_id).await?;
    let target = RelayTarget::Endpoint {
        app: endpoint.app_id,
        id: endpoint.id,
    };
    Ok(report_to(&state, target, results))
}

/// A report's results are well-formed: not too many, statuses that are statuses.
pub(super) fn check_results(results: &[RelayResult]) -> ApiResult<()> {
    let mut p = Problems::default();
    p.require(
        results.len() <= MAX_RESULTS,
        &["body"],
        &format!("must have at most {MAX_RESULTS} results"),
        "value_error.list.max_items",
    );
    for (i, result) in results.iter().enumerate() {
        if let Answer::Response { status, .. } = result.answer {
            p.require(
                (100..=599).contains(&status),
                &["body", &i.to_string(), "status"],
                "must be an HTTP status code (100 to 599)",
                "value_error.number.range",
            );
        }
    }
    p.finish()
}

/// Hands `results` to the attempts of `target` waiting for them.
pub(super) fn report_to(
    state: &AppState,
    target: RelayTarget,
    results: Vec<RelayResult>,
) -> Json<ReportOut> {
    let total = results.len();
    let accepted = results
        .into_iter()
        .filter_map(|r| state.relay.answer(target, r).then_some(()))
        .count();
    Json(ReportOut {
        accepted,
        unmatched: total - accepted,
    })
}
