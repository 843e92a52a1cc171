//! The console's Overview ([`vow_store::Overviews`]) on PostgreSQL: indexed reads in one
//! read-only snapshot (see `vow_store::overview` for what each figure is and why it is cheap).
//!
//! - delivery activity: a day of minute rows, shards summed (`queue::activity`);
//! - backlog: the endpoints with pending rows, one seek each, as a claim finds them
//!   (`queue::claim`), counting each one's due rows on the pending index until the cap;
//! - inbound: a range of `inbound_events`' primary key, `inbound_events_by_state` source by
//!   source, and `inbound_rejections_by_time`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use vow_store::inbound::InboundState;
use vow_store::overview::{
    inbound_ids, Backlog, Count, Current, Held, InboundWindow, Overview, Overviews, Rejections,
    Windows,
};
use vow_store::StoreResult;

use crate::error::db_error;
use crate::queue::activity;
use crate::queue::claim::ENDPOINTS_WITH_WORK;
use crate::PgStore;

/// The pending deliveries due at `$1` (in flight included): the earliest due time, and how
/// many, at most `$2`.
fn backlog_sql() -> String {
    format!(
        "WITH RECURSIVE {ENDPOINTS_WITH_WORK},
         heads AS (
             SELECT w.ep, h.head FROM endpoints_with_work w CROSS JOIN LATERAL (
                 SELECT next_attempt_at AS head FROM deliveries
                 WHERE status = 'pending' AND endpoint_id = w.ep
                 ORDER BY next_attempt_at LIMIT 1) h
             WHERE w.ep IS NOT NULL AND h.head <= $1)
         SELECT (SELECT min(head) FROM heads),
                (SELECT count(*) FROM (
                     SELECT 1 FROM heads CROSS JOIN LATERAL (
                         SELECT 1 FROM deliveries d
                         WHERE d.status = 'pending' AND d.endpoint_id = heads.ep
                           AND d.next_attempt_at <= $1 LIMIT $2) x
                     LIMIT $2) c)"
    )
}

/// Disabled endpoints, at most `$1`.
const DISABLED: &str = "SELECT count(*) FROM (SELECT 1 FROM endpoints WHERE disabled LIMIT $1) c";

/// Inbound events with ids in `[$1, $2)`, at most `$3`.
const STORED: &str = "SELECT count(*) FROM (SELECT 1 FROM inbound_events
     WHERE id >= $1 AND id < $2 LIMIT $3) c";

/// Inbound events in state `$1` with ids in `[$2, $3)`, at most `$4`, source by source.
const IN_STATE: &str = "SELECT count(*) FROM (
     SELECT 1 FROM sources s CROSS JOIN LATERAL (
         SELECT 1 FROM inbound_events e
         WHERE e.source_id = s.id AND e.state = $1 AND e.id >= $2 AND e.id < $3 LIMIT $4) x
     LIMIT $4) c";

/// Rejections logged in `[$1, $2]`, by reason.
const REJECTIONS: &str = "SELECT reason, count(*) FROM inbound_rejections
     WHERE received_at >= $1 AND received_at <= $2
     GROUP BY reason ORDER BY reason COLLATE \"C\"";

/// Whether every rejection of `[$1, $2]` is still in the log: no source with rows in the
/// window lost rows (it took more than it keeps) while all its rows are from the window on.
const REJECTIONS_COMPLETE: &str = "SELECT NOT EXISTS (
     SELECT 1 FROM inbound_rejection_ring g
     WHERE g.source_id IN (SELECT source_id FROM inbound_rejections
                           WHERE received_at >= $1 AND received_at <= $2)
       AND g.recorded > (SELECT count(*) FROM inbound_rejections r
                         WHERE r.source_id = g.source_id)
       AND NOT EXISTS (SELECT 1 FROM inbound_rejections r
                       WHERE r.source_id = g.source_id AND r.received_at < $1))";

/// A capped count's answer.
fn count(found: i64) -> Count {
    Count::of(u64::try_from(found).unwrap_or(0))
}

/// The deliveries due at `now` (see the module docs).
async fn backlog(conn: &mut PgConnection, now: DateTime<Utc>) -> StoreResult<Backlog> {
    let (oldest_due, due): (Option<DateTime<Utc>>, i64) = sqlx::query_as(&backlog_sql())
        .bind(now)
        .bind(Count::LIMIT)
        .fetch_one(conn)
        .await
        .map_err(db_error)?;
    Ok(Backlog {
        due: count(due),
        oldest_due,
    })
}

/// The events with ids in `[from, to)` in each state that waits for an operator.
async fn held(conn: &mut PgConnection, from: &str, to: &str) -> StoreResult<Held> {
    let mut counts = Vec::new();
    for state in [InboundState::Quarantined, InboundState::Uncertain] {
        let found: i64 = sqlx::query_scalar(IN_STATE)
            .bind(state.as_str())
            .bind(from)
            .bind(to)
            .bind(Count::LIMIT)
            .fetch_one(&mut *conn)
            .await
            .map_err(db_error)?;
        counts.push(count(found));
    }
    Ok(Held {
        quarantined: counts[0],
        uncertain: counts[1],
    })
}

/// Inbound traffic from `since` to `now`.
async fn inbound(
    conn: &mut PgConnection,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> StoreResult<InboundWindow> {
    let (from, to) = inbound_ids(since, now);
    let stored: i64 = sqlx::query_scalar(STORED)
        .bind(&from)
        .bind(&to)
        .bind(Count::LIMIT)
        .fetch_one(&mut *conn)
        .await
        .map_err(db_error)?;
    let by_reason: Vec<(String, i64)> = sqlx::query_as(REJECTIONS)
        .bind(since)
        .bind(now)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
    let complete: bool = sqlx::query_scalar(REJECTIONS_COMPLETE)
        .bind(since)
        .bind(now)
        .fetch_one(&mut *conn)
        .await
        .map_err(db_error)?;
    Ok(InboundWindow {
        accepted: count(stored),
        held: held(conn, &from, &to).await?,
        rejections: Rejections {
            by_reason: by_reason
                .into_iter()
                .map(|(reason, n)| (reason, u64::try_from(n).unwrap_or(0)))
                .collect(),
            complete,
        },
    })
}

#[async_trait]
impl Overviews for PgStore {
    async fn overview(&self, now: DateTime<Utc>) -> StoreResult<Overview> {
        let windows = Windows::at(now);
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        let minutes = activity::between(&mut *tx, windows.day_since, now).await?;
        let hour = inbound(&mut tx, windows.hour_since, now).await?;
        let day = inbound(&mut tx, windows.day_since, now).await?;
        let (from, to) = inbound_ids(DateTime::UNIX_EPOCH, now);
        let disabled: i64 = sqlx::query_scalar(DISABLED)
            .bind(Count::LIMIT)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
        let current = Current {
            backlog: backlog(&mut tx, now).await?,
            endpoints_disabled: count(disabled),
            held: held(&mut tx, &from, &to).await?,
        };
        tx.commit().await.map_err(db_error)?;
        Ok(windows.assemble(&minutes, hour, day, current))
    }
}
