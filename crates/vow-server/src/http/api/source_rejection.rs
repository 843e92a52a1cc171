//! A source's exact rejection counts: `GET /api/v1/source/{source_id}/rejection/counts`.
//!
//! The rejection log (`GET …/rejection`, in [`super::source_event`]) keeps only a source's newest
//! `inbound_rejections_kept` rows, because anyone who knows a source id can send it refusals.
//! The counts by reason are exact whatever the log holds: one row per reason, updated in place,
//! with when the reason was first and last seen.

use axum::extract::{Path, State};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Serialize;
use vow_store::inbound::RejectionCount;

use super::lookup::find_source;
use crate::error::ApiResult;
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The counts route.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_rejection_counts))
}

/// `RejectionCountsOut`: every reason the source was refused for, by reason, and their total.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectionCountsOut {
    total: u64,
    kept: u32,
    data: Vec<RejectionCountOut>,
}

/// `RejectionCountOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectionCountOut {
    reason: String,
    count: u64,
    first_at: DateTime<Utc>,
    last_at: DateTime<Utc>,
}

impl From<RejectionCount> for RejectionCountOut {
    fn from(c: RejectionCount) -> Self {
        Self {
            reason: c.reason,
            count: c.count,
            first_at: c.first_at,
            last_at: c.last_at,
        }
    }
}

/// Count the deliveries a source refused, by reason.
#[utoipa::path(get, path = "/api/v1/source/{source_id}/rejection/counts", tag = "Source Event", operation_id = "v1.source.rejection.counts",
    responses((status = 200, description = "Refusals by reason.", body = RejectionCountsOut)))]
async fn get_rejection_counts(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
) -> ApiResult<Json<RejectionCountsOut>> {
    let source = find_source(&state, &source_id).await?;
    let counts = state.inbound.rejection_counts(source.id).await?;
    Ok(Json(RejectionCountsOut {
        total: counts.iter().map(|c| c.count).sum(),
        kept: state.settings.rejections_kept,
        data: counts.into_iter().map(RejectionCountOut::from).collect(),
    }))
}
