//! PLACEHOLDER (being written): processing inbound events on PostgreSQL.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use vow_core::{InboundEventId, SourceId};
use vow_store::inbound::processing::{
    LeaseToken, Resolution, WorkClaim, WorkOutcome, WorkRecorded, WorkRequest,
};
use vow_store::inbound::InboundEvent;
use vow_store::{StoreError, StoreResult};

fn todo() -> StoreError {
    StoreError::Backend("inbound processing is not implemented on PostgreSQL yet".into())
}

pub(crate) async fn claim(_pool: &PgPool, _request: &WorkRequest) -> StoreResult<WorkClaim> {
    Err(todo())
}

pub(crate) async fn record(_pool: &PgPool, _outcome: WorkOutcome) -> StoreResult<WorkRecorded> {
    Err(todo())
}

pub(crate) async fn renew(
    _pool: &PgPool,
    _leases: &[(InboundEventId, LeaseToken)],
    _until: DateTime<Utc>,
) -> StoreResult<usize> {
    Err(todo())
}

pub(crate) async fn next_due(_pool: &PgPool) -> StoreResult<Option<DateTime<Utc>>> {
    Err(todo())
}

pub(crate) async fn resolve_uncertain(
    _pool: &PgPool,
    _source: SourceId,
    _id: InboundEventId,
    _resolution: Resolution,
    _now: DateTime<Utc>,
) -> StoreResult<InboundEvent> {
    Err(todo())
}

pub(crate) async fn replay(
    _pool: &PgPool,
    _source: SourceId,
    _id: InboundEventId,
    _now: DateTime<Utc>,
) -> StoreResult<InboundEvent> {
    Err(todo())
}
