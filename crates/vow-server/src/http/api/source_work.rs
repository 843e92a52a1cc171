//! Processing inbound events through the API (issue 5, items 6 and 8).
//!
//! **Operators** decide what vow could not, each destination on its own
//! (`vow_store::inbound::decisions`): `POST …/event/{id}/resolve` with
//! `{"outcome": "completed" | "retry"}` settles the event's `uncertain` destinations (it did
//! take effect, or forward it again), and `POST …/event/{id}/replay` forwards it again, with
//! fresh attempts, to its `dead_lettered` and `rejected` destinations; the others are
//! untouched. Either takes `"destination": "dst_…"` to act on that one only, and answers the
//! event with `changed`, the forwards it changed. 409 when the event is being processed or no
//! destination (or not the one named) is in a state the decision acts on; nothing changes.
//!
//! **Pull mode** is for a source without destinations, whose consumer fetches its own work
//! (seed 004's worker): `POST /api/v1/source/{id}/event/claim` with
//! `{"limit": 1..=100, "leaseSeconds": 1..=3600}` leases the oldest due events and returns
//! them with their content and lease; `POST …/event/{id}/complete` with `{"lease"}` and
//! `POST …/event/{id}/fail` with `{"lease", "outcome": "retryable" | "rejected" |
//! "uncertain", "error"?}` record the outcome. A retryable failure is due again after the
//! retry schedule's delay, and dead-lettered once it is spent; a lease that runs out makes
//! the event `uncertain`. The same ordering by version applies as for forwarded events. A lost
//! lease is 409: the event was settled or claimed by someone else.
//!
//! Every route here honours `Idempotency-Key` (ADR 6): the outcome and its response commit in
//! one store transaction, and the same request again replays it. A keyed claim is replayed
//! (the same events and lease tokens) only while its leases hold: its record lives
//! `leaseSeconds` at most and leaves no tombstone, so the same key after that runs a new claim
//! instead of answering with leases that ended.

use std::sync::Arc;

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_core::retry::next_try;
use vow_store::inbound::processing::{
    ClaimedEvent, Consumer, DestinationResult, LeaseToken, Outcome, Resolution, WorkClaim,
    WorkOutcome, WorkRequest,
};
use vow_store::Store;

use super::keys::source_key;
use super::lookup::{find_destination, find_source};
use super::source_event::{decided_answer, event_answer, event_key, InboundEventOut};
use crate::actions::inbound::Settle;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{MaybeJson, ValidJsonBytes};
use crate::http::idempotency::{self, KeyedHeaders, Once};
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The longest a pull consumer may lease an event, in seconds.
const MAX_LEASE_SECONDS: u32 = 3600;
/// The most events one pull claim returns.
const MAX_CLAIM: usize = 100;
/// The longest error text kept from a pull consumer.
const MAX_ERROR_CHARS: usize = 1000;

/// Routes of processing and pull mode.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(claim_source_events))
        .routes(routes!(complete_source_event))
        .routes(routes!(fail_source_event))
        .routes(routes!(resolve_source_event))
        .routes(routes!(replay_source_event))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResolveIn {
    outcome: String,
    destination: Option<String>,
}

/// `ReplayIn`: the body of a replay, which may be left out.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = SourceEventReplayIn)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReplayIn {
    destination: Option<String>,
}

/// Decide a dead event's fate.
#[utoipa::path(post, path = "/api/v1/source/{source_id}/event/{event_id}/resolve", tag = "Source Event", operation_id = "v1.source.event.resolve", params(KeyedHeaders), request_body = ResolveIn,
    responses((status = 200, description = "Resolved.", body = InboundEventOut)))]
async fn resolve_source_event(
    State(state): State<AppState>,
    Path((source_id, event_id)): Path<(String, String)>,
    once: Once,
    ValidJsonBytes(body, raw): ValidJsonBytes<ResolveIn>,
) -> ApiResult<Response> {
    let (source, event) = (source_key(&source_id)?, event_key(&event_id)?);
    let resolution = match body.outcome.as_str() {
        "completed" => Resolution::Completed,
        "retry" => Resolution::Retry,
        _ => {
            let msg = "must be \"completed\" (it took effect) or \"retry\" (forward it again)";
            return Err(ApiError::invalid(
                &["body", "outcome"],
                msg,
                "value_error.outcome",
            ));
        }
    };
    let destination = find_destination(&state, &source_id, body.destination.as_deref()).await?;
    once.run(&state, None, &raw, move |commit| async move {
        let settle = Settle::new(commit.state(), source, event, resolution, destination);
        Ok(commit.act(settle, decided_answer).await?.1)
    })
    .await
}

/// Forward an event again.
#[utoipa::path(post, path = "/api/v1/source/{source_id}/event/{event_id}/replay", tag = "Source Event", operation_id = "v1.source.event.replay", params(KeyedHeaders), request_body = Option<ReplayIn>,
    responses((status = 200, description = "Queued again.", body = InboundEventOut)))]
async fn replay_source_event(
    State(state): State<AppState>,
    Path((source_id, event_id)): Path<(String, String)>,
    once: Once,
    MaybeJson(body, raw): MaybeJson<ReplayIn>,
) -> ApiResult<Response> {
    let (source, event) = (source_key(&source_id)?, event_key(&event_id)?);
    let body = body.unwrap_or_default();
    let destination = find_destination(&state, &source_id, body.destination.as_deref()).await?;
    let wake = state.inbound_wake.clone();
    once.run(&state, None, &raw, move |commit| async move {
        let now = commit.state().now();
        let write = |store: Arc<dyn Store>, keyed| async move {
            (store.replay_inbound_keyed(source, event, destination, now, keyed)).await
        };
        let (replayed, response) = commit.write(write, decided_answer).await?;
        tracing::info!(%source, %event, destinations = replayed.changed.len(),
            "inbound event replayed to its failed destinations");
        wake.notify_one();
        Ok(response)
    })
    .await
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClaimIn {
    #[serde(default = "default_limit")]
    limit: usize,
    #[serde(default = "default_lease")]
    lease_seconds: u32,
}

fn default_limit() -> usize {
    10
}

fn default_lease() -> u32 {
    30
}

/// `ClaimedEventOut`: an event with its content, and the lease to answer with.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct ClaimedEventOut {
    #[serde(flatten)]
    event: InboundEventOut,
    lease: String,
    lease_until: DateTime<Utc>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
struct ClaimedOut {
    data: Vec<ClaimedEventOut>,
}

impl From<&WorkClaim> for ClaimedOut {
    fn from(work: &WorkClaim) -> Self {
        let data = work
            .claimed
            .iter()
            .cloned()
            .map(
                |ClaimedEvent {
                     event,
                     content,
                     lease,
                     lease_until,
                     ..
                 }| ClaimedEventOut {
                    event: InboundEventOut::from(event).with_content(content),
                    lease: lease.0,
                    lease_until,
                },
            )
            .collect();
        Self { data }
    }
}

/// Claim a batch of a source's events to process (pull mode).
#[utoipa::path(post, path = "/api/v1/source/{source_id}/event/claim", tag = "Source Pull", operation_id = "v1.source.event.claim", params(KeyedHeaders), request_body = ClaimIn,
    responses((status = 200, description = "The events claimed, with their lease.", body = ClaimedOut)))]
async fn claim_source_events(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
    once: Once,
    ValidJsonBytes(body, raw): ValidJsonBytes<ClaimIn>,
) -> ApiResult<Response> {
    if !(1..=MAX_CLAIM).contains(&body.limit) {
        let msg = format!("must be between 1 and {MAX_CLAIM}");
        return Err(ApiError::invalid(
            &["body", "limit"],
            msg,
            "value_error.limit",
        ));
    }
    if !(1..=MAX_LEASE_SECONDS).contains(&body.lease_seconds) {
        let msg = format!("must be between 1 and {MAX_LEASE_SECONDS} seconds");
        return Err(ApiError::invalid(
            &["body", "leaseSeconds"],
            msg,
            "value_error.lease",
        ));
    }
    let (limit, lease_seconds) = (body.limit, body.lease_seconds);
    // A replay of the claim must not outlive its leases (see the module docs).
    let once = once.replayed_within(Duration::from_secs(lease_seconds.into()));
    once.run(&state, None, &raw, move |commit| async move {
        let state = commit.state();
        let source = find_source(state, &source_id).await?;
        if !source.fields.destinations.is_empty() {
            return Err(ApiError::Conflict(
                "this source forwards to destinations, so vow's workers process its events; pull mode is for sources without destinations".into(),
            ));
        }
        let request = WorkRequest {
            now: state.now(),
            lease: chrono::Duration::seconds(lease_seconds.into()),
            limit,
            consumer: Consumer::Pull(source.id),
            max_attempts: state.settings.retry_schedule.max_attempts(),
        };
        let render = |work: &WorkClaim| {
            idempotency::json(StatusCode::OK, &ClaimedOut::from(work), None)
        };
        let write = |store: Arc<dyn Store>, keyed| async move {
            store.claim_inbound_work_keyed(&request, keyed).await
        };
        Ok(commit.write(write, render).await?.1)
    })
    .await
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompleteIn {
    lease: String,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FailIn {
    lease: String,
    outcome: String,
    #[serde(default)]
    error: Option<String>,
}

/// Report a claimed event processed.
#[utoipa::path(post, path = "/api/v1/source/{source_id}/event/{event_id}/complete", tag = "Source Pull", operation_id = "v1.source.event.complete", params(KeyedHeaders), request_body = CompleteIn,
    responses((status = 200, description = "Completed.", body = InboundEventOut)))]
async fn complete_source_event(
    State(state): State<AppState>,
    Path((source_id, event_id)): Path<(String, String)>,
    once: Once,
    ValidJsonBytes(body, raw): ValidJsonBytes<CompleteIn>,
) -> ApiResult<Response> {
    let answer = Answer {
        lease: body.lease,
        outcome: Outcome::Completed,
        error: None,
    };
    finish(&state, once, (&source_id, &event_id), &raw, answer).await
}

/// Report a claimed event failed.
#[utoipa::path(post, path = "/api/v1/source/{source_id}/event/{event_id}/fail", tag = "Source Pull", operation_id = "v1.source.event.fail", params(KeyedHeaders), request_body = FailIn,
    responses((status = 200, description = "Recorded; retried or dead.", body = InboundEventOut)))]
async fn fail_source_event(
    State(state): State<AppState>,
    Path((source_id, event_id)): Path<(String, String)>,
    once: Once,
    ValidJsonBytes(body, raw): ValidJsonBytes<FailIn>,
) -> ApiResult<Response> {
    let outcome = match Outcome::parse(&body.outcome) {
        Some(o @ (Outcome::Retryable | Outcome::Rejected | Outcome::Uncertain)) => o,
        _ => {
            let msg = "must be \"retryable\", \"rejected\" or \"uncertain\"";
            return Err(ApiError::invalid(
                &["body", "outcome"],
                msg,
                "value_error.outcome",
            ));
        }
    };
    let answer = Answer {
        lease: body.lease,
        outcome,
        error: body
            .error
            .map(|e| e.chars().take(MAX_ERROR_CHARS).collect()),
    };
    finish(&state, once, (&source_id, &event_id), &raw, answer).await
}

/// A pull consumer's answer for one event it leased.
struct Answer {
    lease: String,
    outcome: Outcome,
    error: Option<String>,
}

/// Records a pull consumer's outcome for one event under its lease, at most once per
/// `Idempotency-Key` (a lease no longer held is 409, stored like the success).
async fn finish(
    state: &AppState,
    once: Once,
    (source_id, event_id): (&str, &str),
    raw: &[u8],
    answer: Answer,
) -> ApiResult<Response> {
    let (source, id) = (source_key(source_id)?, event_key(event_id)?);
    once.run(state, None, raw, move |commit| async move {
        let state = commit.state();
        let stored = state.inbound.get_inbound_event(source, id).await?;
        let event = stored
            .ok_or_else(|| ApiError::not_found("Inbound event"))?
            .event;
        let now = state.now();
        let retryable = answer.outcome == Outcome::Retryable;
        let next = next_try(
            &state.settings.retry_schedule,
            event.attempts,
            retryable,
            now,
            &mut rand::thread_rng(),
        );
        let recorded = WorkOutcome {
            event: id,
            lease: LeaseToken(answer.lease),
            results: vec![DestinationResult {
                destination: None,
                outcome: answer.outcome,
                status: None,
                error: answer.error,
            }],
            next,
            now,
        };
        let write = |store: Arc<dyn Store>, keyed| async move {
            store.record_inbound_work_keyed(recorded, keyed).await
        };
        Ok(commit.write(write, event_answer).await?.1)
    })
    .await
}
