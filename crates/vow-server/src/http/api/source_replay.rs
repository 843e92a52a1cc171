//! Replaying an inbound source's dead letters in bulk (`vow replay --source`):
//! `POST /api/v1/source/{source_id}/replay` with `{"since"?, "until"?, "destination"?,
//! "dryRun"?}` requeues the source's dead-lettered and rejected forwards of events received
//! in `[since, until)` (only those to `destination` when named) and answers
//! `{"id", "count", "skipped", "dryRun"}` (no `id` for a dry run, which changes nothing);
//! `skipped` counts the forwards left alone because their event was being processed.
//! `GET /api/v1/source/{source_id}/replay/{replay_id}` says where that replay's forwards stand.
//! The replay honours `Idempotency-Key` like the other operator writes.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_core::ReplayId;
use vow_store::inbound::source_replay::{SourceReplayFilter, SourceReplayStats, SourceReplayed};
use vow_store::queue::ReplayFilter;

use super::keys::id_error;
use super::lookup::{destination_of, find_source};
use crate::actions::replay::Replay;
use crate::actions::source_replay::SourceReplay;
use crate::error::ApiResult;
use crate::http::extract::MaybeJson;
use crate::http::idempotency::{self, KeyedHeaders, Once};
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The bulk replay routes of a source.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(replay_source))
        .routes(routes!(get_source_replay))
}

/// `SourceReplayIn`: the body, which may be left out (everything of the source).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SourceReplayIn {
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    destination: Option<String>,
    #[serde(default)]
    dry_run: bool,
}

/// `SourceReplayOut`, as the endpoint replay's `ReplayOut` with what was skipped.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct SourceReplayOut {
    /// The replay's id, to follow it with `GET …/replay/{id}`; none for a dry run.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<ReplayId>,
    /// Forwards requeued (or, for a dry run, that would be).
    count: u64,
    /// Forwards left alone: their event was being processed.
    skipped: u64,
    dry_run: bool,
}

/// `SourceReplayStatsOut`: where a replay's forwards stand.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct SourceReplayStatsOut {
    completed: u64,
    pending: u64,
    processing: u64,
    rejected: u64,
    dead_lettered: u64,
    uncertain: u64,
}

impl From<SourceReplayStats> for SourceReplayStatsOut {
    fn from(s: SourceReplayStats) -> Self {
        Self {
            completed: s.completed,
            pending: s.pending,
            processing: s.processing,
            rejected: s.rejected,
            dead_lettered: s.dead_lettered,
            uncertain: s.uncertain,
        }
    }
}

/// Forward a source's events again since a time.
#[utoipa::path(post, path = "/api/v1/source/{source_id}/replay", tag = "Source Event", operation_id = "v1.source.replay.create", params(KeyedHeaders), request_body = Option<SourceReplayIn>,
    responses((status = 200, description = "The replay, started.", body = SourceReplayOut)))]
async fn replay_source(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
    once: Once,
    MaybeJson(body, raw): MaybeJson<SourceReplayIn>,
) -> ApiResult<Response> {
    let body = body.unwrap_or_default();
    let times = ReplayFilter {
        since: body.since,
        until: body.until,
        ..Default::default()
    };
    let times = Replay::filter("body", times)?;
    let source = find_source(&state, &source_id).await?;
    let filter = SourceReplayFilter {
        since: times.since,
        until: times.until,
        destination: destination_of(&source, body.destination.as_deref())?,
    };
    let dry_run = body.dry_run;
    once.run(&state, None, &raw, move |commit| async move {
        let id = ReplayId::new();
        let replay = SourceReplay::new(commit.state(), source.id, id, filter);
        let render = move |done: &SourceReplayed| {
            let out = SourceReplayOut {
                id: (!dry_run).then_some(id),
                count: done.requeued,
                skipped: done.skipped,
                dry_run,
            };
            idempotency::json(StatusCode::OK, &out, None)
        };
        if dry_run {
            let counted = replay.count(commit.state()).await?;
            return Ok(idempotency::respond::stored(render(&counted)));
        }
        Ok(commit.act(replay, render).await?.1)
    })
    .await
}

/// Get the progress of a replay.
#[utoipa::path(get, path = "/api/v1/source/{source_id}/replay/{replay_id}", tag = "Source Event", operation_id = "v1.source.replay.get",
    responses((status = 200, description = "How far the replay got.", body = SourceReplayStatsOut)))]
async fn get_source_replay(
    State(state): State<AppState>,
    Path((source_id, replay_id)): Path<(String, String)>,
) -> ApiResult<Json<SourceReplayStatsOut>> {
    let id = ReplayId::parse(&replay_id).map_err(|e| id_error(&["path", "replay_id"], e))?;
    let source = find_source(&state, &source_id).await?.id;
    let stats = state.inbound.source_replay_stats(source, id).await?;
    Ok(Json(stats.into()))
}
