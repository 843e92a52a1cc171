//! Bulk replays of a source's dead letters (`vow_store::inbound::source_replay`): one
//! transaction that locks the events it takes (`FOR UPDATE`, the lock a claim and a worker's
//! record take too, so an event claimed meanwhile is re-read as `processing` and skipped),
//! requeues their forwards and makes them due, three set-based statements whatever the count.
//! Their progress is read by `inbound_forwards.replay_id`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use vow_core::{ReplayId, SourceId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::source_replay::{
    replayable_states, replayed_outcomes, requeued, SourceReplayFilter, SourceReplayStats,
    SourceReplayed, SourceReplays,
};
use vow_store::StoreResult;

use super::forwards::{destination_key, outcome};
use crate::error::db_error;
use crate::idempotency::{keyed, step};
use crate::PgStore;

/// A condition over the forward `f` that `filter` picks, outcome and destination: with
/// parameters $2 (outcomes) and $3 (destination key).
const FORWARD: &str = "f.outcome = ANY($2) AND ($3::text IS NULL OR f.destination = $3)";

/// A condition over the source's event `e` in the time range: $1 (source), $4 (since),
/// $5 (until).
const EVENT: &str = "e.source_id = $1 AND ($4::timestamptz IS NULL OR e.received_at >= $4)
     AND ($5::timestamptz IS NULL OR e.received_at < $5)";

/// The parameters $1 to $5 of [`FORWARD`] and [`EVENT`].
type Params = (
    String,
    Vec<&'static str>,
    Option<String>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

fn params(source: SourceId, filter: &SourceReplayFilter) -> Params {
    (
        source.to_string(),
        replayed_outcomes().iter().map(|o| o.as_str()).collect(),
        filter.destination.map(|d| destination_key(Some(&d))),
        filter.since,
        filter.until,
    )
}

fn states() -> Vec<&'static str> {
    replayable_states().iter().map(|s| s.as_str()).collect()
}

/// How many forwards `filter` picks of events a replay takes (`taken`) or skips.
async fn count(
    conn: &mut PgConnection,
    source: SourceId,
    filter: &SourceReplayFilter,
    taken: bool,
) -> StoreResult<u64> {
    let (a, b, c, d, e) = params(source, filter);
    let not = if taken { "" } else { "NOT" };
    let n: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM inbound_forwards f JOIN inbound_events e ON e.id = f.event_id
         WHERE {FORWARD} AND {EVENT} AND {not} (e.state = ANY($6))"
    ))
    .bind(a)
    .bind(b)
    .bind(c)
    .bind(d)
    .bind(e)
    .bind(states())
    .fetch_one(conn)
    .await
    .map_err(db_error)?;
    Ok(n as u64)
}

/// Requeues what `filter` picks as replay `id` at `now`, in the caller's transaction.
async fn replay(
    tx: &mut PgConnection,
    source: SourceId,
    id: ReplayId,
    filter: SourceReplayFilter,
    now: DateTime<Utc>,
) -> StoreResult<SourceReplayed> {
    let (a, b, c, d, e) = params(source, &filter);
    let events: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT e.id FROM inbound_events e WHERE {EVENT} AND e.state = ANY($6)
             AND EXISTS (SELECT 1 FROM inbound_forwards f WHERE f.event_id = e.id AND {FORWARD})
         ORDER BY e.id FOR UPDATE"
    ))
    .bind(&a)
    .bind(&b)
    .bind(&c)
    .bind(d)
    .bind(e)
    .bind(states())
    .fetch_all(&mut *tx)
    .await
    .map_err(db_error)?;
    let (outcome, state) = requeued();
    let forwards = sqlx::query(&format!(
        "UPDATE inbound_forwards f SET outcome = $4, replay_id = $5, updated_at = $6
         WHERE f.event_id = ANY($1) AND {FORWARD}"
    ))
    .bind(&events)
    .bind(&b)
    .bind(&c)
    .bind(outcome.as_str())
    .bind(id.to_string())
    .bind(now)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    sqlx::query(
        "UPDATE inbound_events SET state = $2, attempts = 0, next_attempt_at = $3,
             lease_token = NULL, lease_until = NULL, claimed_by = NULL, updated_at = $3
         WHERE id = ANY($1)",
    )
    .bind(&events)
    .bind(state.as_str())
    .bind(now)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    Ok(SourceReplayed {
        requeued: forwards.rows_affected(),
        skipped: count(tx, source, &filter, false).await?,
    })
}

#[async_trait]
impl SourceReplays for PgStore {
    async fn replay_source_keyed(
        &self,
        source: SourceId,
        id: ReplayId,
        filter: &SourceReplayFilter,
        now: DateTime<Utc>,
        completion: Option<Completion<SourceReplayed>>,
    ) -> StoreResult<Applied<SourceReplayed>> {
        let filter = *filter;
        let write = step(move |tx| Box::pin(replay(tx, source, id, filter, now)));
        keyed(&self.pool, completion, write).await
    }

    async fn count_source_replay(
        &self,
        source: SourceId,
        filter: &SourceReplayFilter,
    ) -> StoreResult<SourceReplayed> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        Ok(SourceReplayed {
            requeued: count(&mut conn, source, filter, true).await?,
            skipped: count(&mut conn, source, filter, false).await?,
        })
    }

    async fn source_replay_stats(
        &self,
        source: SourceId,
        id: ReplayId,
    ) -> StoreResult<SourceReplayStats> {
        let rows: Vec<(String, bool, i64)> = sqlx::query_as(
            "SELECT f.outcome, e.state = 'processing', count(*)
             FROM inbound_forwards f JOIN inbound_events e ON e.id = f.event_id
             WHERE f.replay_id = $2 AND e.source_id = $1
             GROUP BY 1, 2",
        )
        .bind(source.to_string())
        .bind(id.to_string())
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let mut stats = SourceReplayStats::default();
        for (name, processing, n) in rows {
            stats.add(outcome(&name)?, processing, n as u64);
        }
        Ok(stats)
    }
}
