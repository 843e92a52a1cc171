//! Operators' decisions on an inbound event's destinations
//! ([`vow_store::inbound::decisions`]): replay what is dead-lettered or rejected, resolve what
//! is uncertain, each destination on its own. Inside the caller's transaction (a keyed API
//! write completes its idempotency record in it), under the event's row lock (the lock a
//! worker's record takes too); nothing changes on an error.

use crate::idempotency::{keyed, step};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use vow_core::{DestinationId, InboundEventId, SourceId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::decisions::{self, Decided, Decision};
use vow_store::inbound::processing::aggregate;
use vow_store::inbound::processing::Resolution;
use vow_store::inbound::InboundDecisions;
use vow_store::inbound::{InboundEvent, InboundState};
use vow_store::{StoreError, StoreResult};

use super::events::{one_event, EventRow, COLUMNS};
use super::forwards::{self, destination_key};
use crate::error::{corrupt, db_error};
use crate::PgStore;

/// Locks the event `id` of `source`; its state. `NotFound("inbound event")` when absent.
async fn lock_state(
    conn: &mut PgConnection,
    source: SourceId,
    id: InboundEventId,
) -> StoreResult<InboundState> {
    let state: String = sqlx::query_scalar(
        "SELECT state FROM inbound_events WHERE source_id = $1 AND id = $2 FOR UPDATE",
    )
    .bind(source.to_string())
    .bind(id.to_string())
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?
    .ok_or(StoreError::NotFound("inbound event"))?;
    InboundState::parse(&state).ok_or_else(|| corrupt(format!("inbound_events.state {state:?}")))
}

/// Sets an operator's new `state` on the event `id` at `now`: due at `now` when retryable,
/// with its attempts back to 0 when `fresh`.
async fn set_state(
    conn: &mut PgConnection,
    id: &str,
    state: InboundState,
    fresh: bool,
    now: DateTime<Utc>,
) -> StoreResult<InboundEvent> {
    let sql = format!(
        "UPDATE inbound_events SET state = $2, updated_at = $3,
             next_attempt_at = CASE WHEN $2 = 'retryable' THEN $3::timestamptz END,
             attempts = CASE WHEN $4 THEN 0 ELSE attempts END
         WHERE id = $1
         RETURNING {COLUMNS}"
    );
    let query = sqlx::query_as::<_, EventRow>(&sql)
        .bind(id)
        .bind(state.as_str())
        .bind(now)
        .bind(fresh);
    one_event(query, conn)
        .await?
        .ok_or_else(|| corrupt("an inbound event vanished under its lock"))
}

/// [`vow_store::inbound::InboundDecisions::resolve_uncertain`] and
/// [`vow_store::inbound::InboundDecisions::replay_inbound`]: the forwards
/// [`decisions::targets`] names get the decision's outcome (a replay takes them from a bulk
/// replay's count), and the event the aggregate of its forwards (due at `now` when retryable,
/// with fresh attempts when forwarded again).
pub(crate) async fn decide(
    tx: &mut PgConnection,
    source: SourceId,
    id: InboundEventId,
    decision: Decision,
    only: Option<DestinationId>,
    now: DateTime<Utc>,
) -> StoreResult<Decided> {
    let state = lock_state(tx, source, id).await?;
    let targets = decisions::targets(state, decision, &forwards::of(&mut *tx, &id).await?, only)?;
    let keys: Vec<String> = targets
        .iter()
        .map(|d| destination_key(d.as_ref()))
        .collect();
    sqlx::query(
        "UPDATE inbound_forwards SET outcome = $3, updated_at = $4,
             replay_id = CASE WHEN $5 THEN NULL ELSE replay_id END
         WHERE event_id = $1 AND destination = ANY($2)",
    )
    .bind(id.to_string())
    .bind(&keys)
    .bind(decision.outcome().as_str())
    .bind(now)
    .bind(decision == Decision::Replay)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    let all = forwards::of(&mut *tx, &id).await?;
    let state = aggregate(all.iter().map(|f| f.outcome));
    let event = set_state(tx, &id.to_string(), state, decision.resets_attempts(), now).await?;
    let changed = all
        .into_iter()
        .filter(|f| targets.contains(&f.destination))
        .collect();
    Ok(Decided { event, changed })
}

#[async_trait]
impl InboundDecisions for PgStore {
    async fn resolve_uncertain_keyed(
        &self,
        source: SourceId,
        id: InboundEventId,
        resolution: Resolution,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
        completion: Option<Completion<Decided>>,
    ) -> StoreResult<Applied<Decided>> {
        let decision = Decision::Resolve(resolution);
        let write = step(move |tx| Box::pin(decide(tx, source, id, decision, destination, now)));
        keyed(&self.pool, completion, write).await
    }

    async fn replay_inbound_keyed(
        &self,
        source: SourceId,
        id: InboundEventId,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
        completion: Option<Completion<Decided>>,
    ) -> StoreResult<Applied<Decided>> {
        let replay = Decision::Replay;
        let write = step(move |tx| Box::pin(decide(tx, source, id, replay, destination, now)));
        keyed(&self.pool, completion, write).await
    }
}
