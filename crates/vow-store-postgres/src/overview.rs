//! The console's Overview ([`vow_store::Overviews`]) on PostgreSQL: four statements of indexed
//! reads (see `vow_store::overview` for what each figure is and why it is cheap), in three
//! groups that run at once on connections of their own. Each statement answers for both windows
//! at once, so the round trips stay few; each reads its own snapshot, milliseconds apart.
//!
//! - delivery activity: a day of minute rows, shards summed (`queue::activity`);
//! - inbound events: ranges of `inbound_events`' primary key, and `inbound_events_by_state`
//!   source by source, for the hour, the day and all time;
//! - rejections: the day's rows of `inbound_rejections_by_time`, counted for both windows, and
//!   whether the log kept them all;
//! - backlog: the endpoints with pending rows, one seek each, as a claim finds them
//!   (`queue::claim`), counting each one's due rows on the pending index until the cap; and the
//!   disabled endpoints. The count is held to the pending index ([`INDEX_WALKS_ONLY`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use vow_core::EndpointId;
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

/// Inbound events with ids in `[{from}, $3)`, at most `$5`.
fn stored(from: &str) -> String {
    format!(
        "(SELECT count(*) FROM (SELECT 1 FROM inbound_events
          WHERE id >= {from} AND id < $3 LIMIT $5) c)"
    )
}

/// Inbound events in `state` with ids in `[{from}, $3)`, at most `$5`, source by source.
fn in_state(state: InboundState, from: &str) -> String {
    format!(
        "(SELECT count(*) FROM (
              SELECT 1 FROM sources s CROSS JOIN LATERAL (
                  SELECT 1 FROM inbound_events e
                  WHERE e.source_id = s.id AND e.state = '{}' AND e.id >= {from} AND e.id < $3
                  LIMIT $5) x
              LIMIT $5) c)",
        state.as_str()
    )
}

/// The inbound counts: `$1`, `$2` and `$4` are the first ids of the hour, the day and all
/// time, `$3` the end of them all: stored in the hour and the day, then quarantined and
/// uncertain in the hour, the day and all time.
fn inbound_sql() -> String {
    let held = [InboundState::Quarantined, InboundState::Uncertain]
        .into_iter()
        .flat_map(|state| ["$1", "$2", "$4"].map(|from| in_state(state, from)))
        .collect::<Vec<_>>()
        .join(",\n");
    format!("SELECT {}, {}, {held}", stored("$1"), stored("$2"))
}

/// Whether every rejection logged from `{since}` to `$3` is still in the log: no source with
/// rows in the window overwrote rows of its ring (it took more than its slots, the highest
/// slot + 1) while all its rows are from the window on.
fn complete(since: &str) -> String {
    format!(
        "(SELECT NOT EXISTS (
              SELECT 1 FROM inbound_rejection_ring g
              WHERE g.source_id IN (SELECT source_id FROM inbound_rejections
                                    WHERE received_at >= {since} AND received_at <= $3)
                AND g.recorded > (SELECT max(slot) + 1 FROM inbound_rejections r
                                  WHERE r.source_id = g.source_id)
                AND NOT EXISTS (SELECT 1 FROM inbound_rejections r
                                WHERE r.source_id = g.source_id AND r.received_at < {since})))"
    )
}

/// Rejections logged from `$2` (the day) to `$3`, by reason: in the hour (from `$1`), in the
/// day, and each window's completeness (the same on every row; with no row, both complete).
fn rejections_sql() -> String {
    format!(
        "SELECT reason, count(*) FILTER (WHERE received_at >= $1), count(*),
                {}, {}
         FROM inbound_rejections WHERE received_at >= $2 AND received_at <= $3
         GROUP BY reason ORDER BY reason COLLATE \"C\"",
        complete("$1"),
        complete("$2")
    )
}

/// For the rest of the transaction, plans without bitmap or sequential scans. With it, and the
/// count's rows taken in due order, the backlog's count walks the pending index, which holds
/// every column it reads, whatever plan PostgreSQL picks. A plan made for the call's own
/// arguments counted on `(endpoint_id, status, created_at)` instead (by a bitmap scan, or
/// without one by an index scan), whose `pending` entries include those of every row delivered
/// since the last vacuum, so the count read each of their heap pages. Measured under overload
/// (10 endpoints, 10,000 msg/s offered, a due backlog of about 7,000), `auto_explain` of the
/// reads over 8 ms: 5 of 144 took that plan, 59.5 ms on average against 12.3 ms on the index.
const INDEX_WALKS_ONLY: &str =
    "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)";

/// The pending deliveries due at `$1` (in flight included) but those of the endpoints in `$3`:
/// the earliest due time, and how many, at most `$2`; and the disabled endpoints, at most `$2`.
fn current_sql() -> String {
    format!(
        "WITH RECURSIVE {ENDPOINTS_WITH_WORK},
         heads AS (
             SELECT w.ep, h.head FROM endpoints_with_work w CROSS JOIN LATERAL (
                 SELECT next_attempt_at AS head FROM deliveries
                 WHERE status = 'pending' AND endpoint_id = w.ep
                 ORDER BY next_attempt_at LIMIT 1) h
             WHERE w.ep IS NOT NULL AND w.ep <> ALL($3) AND h.head <= $1)
         SELECT (SELECT min(head) FROM heads),
                (SELECT count(*) FROM (
                     SELECT 1 FROM heads CROSS JOIN LATERAL (
                         SELECT 1 FROM deliveries d
                         WHERE d.status = 'pending' AND d.endpoint_id = heads.ep
                           AND d.next_attempt_at <= $1
                         ORDER BY d.next_attempt_at LIMIT $2) x
                     LIMIT $2) c),
                (SELECT count(*) FROM (SELECT 1 FROM endpoints WHERE disabled LIMIT $2) c)"
    )
}

/// A capped count's answer.
fn count(found: i64) -> Count {
    Count::of(u64::try_from(found).unwrap_or(0))
}

/// A count that is never capped.
fn exact(found: i64) -> u64 {
    u64::try_from(found).unwrap_or(0)
}

/// What the inbound statements read, by window.
struct Inbound {
    hour: InboundWindow,
    day: InboundWindow,
    held: Held,
}

async fn inbound(conn: &mut PgConnection, windows: &Windows) -> StoreResult<Inbound> {
    let (hour_from, to) = inbound_ids(windows.hour_since, windows.now);
    let (day_from, _) = inbound_ids(windows.day_since, windows.now);
    let (ever, _) = inbound_ids(DateTime::UNIX_EPOCH, windows.now);
    let row: (i64, i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(&inbound_sql())
        .bind(&hour_from)
        .bind(&day_from)
        .bind(&to)
        .bind(&ever)
        .bind(Count::LIMIT)
        .fetch_one(&mut *conn)
        .await
        .map_err(db_error)?;
    let (stored_hour, stored_day, q_hour, q_day, q_ever, u_hour, u_day, u_ever) = row;
    let held = |quarantined, uncertain| Held {
        quarantined: count(quarantined),
        uncertain: count(uncertain),
    };
    let rows: Vec<(String, i64, i64, bool, bool)> = sqlx::query_as(&rejections_sql())
        .bind(windows.hour_since)
        .bind(windows.day_since)
        .bind(windows.now)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
    let (hour_complete, day_complete) = rows.first().map_or((true, true), |r| (r.3, r.4));
    let hour_reasons = rows
        .iter()
        .filter(|r| r.1 > 0)
        .map(|r| (r.0.clone(), exact(r.1)))
        .collect();
    let day_reasons = rows.into_iter().map(|r| (r.0, exact(r.2))).collect();
    Ok(Inbound {
        hour: InboundWindow {
            accepted: count(stored_hour),
            held: held(q_hour, u_hour),
            rejections: Rejections {
                by_reason: hour_reasons,
                complete: hour_complete,
            },
        },
        day: InboundWindow {
            accepted: count(stored_day),
            held: held(q_day, u_day),
            rejections: Rejections {
                by_reason: day_reasons,
                complete: day_complete,
            },
        },
        held: held(q_ever, u_ever),
    })
}

#[async_trait]
impl Overviews for PgStore {
    async fn overview(&self, now: DateTime<Utc>) -> StoreResult<Overview> {
        let windows = Windows::at(now);
        // Three independent reads, at once, each on a connection of its own.
        let current = self.current(now, &[]);
        let inbound = async {
            let mut conn = self.pool.acquire().await.map_err(db_error)?;
            inbound(&mut conn, &windows).await
        };
        let (minutes, inbound, (oldest_due, due, disabled)) = tokio::try_join!(
            activity::between(&self.pool, windows.day_since, now),
            inbound,
            current,
        )?;
        let current = Current {
            backlog: Backlog {
                due: count(due),
                oldest_due,
            },
            endpoints_disabled: count(disabled),
            held: inbound.held,
        };
        Ok(windows.assemble(&minutes, inbound.hour, inbound.day, current))
    }

    async fn backlog(&self, now: DateTime<Utc>, except: &[EndpointId]) -> StoreResult<Backlog> {
        let (oldest_due, due, _disabled) = self.current(now, except).await?;
        Ok(Backlog {
            due: count(due),
            oldest_due,
        })
    }

    async fn delivering_nodes(&self) -> StoreResult<u64> {
        let nodes: i64 = sqlx::query_scalar(crate::listen::DELIVERING_NODES)
            .bind(i64::from(crate::listen::DELIVERING))
            .fetch_one(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(exact(nodes))
    }
}

impl PgStore {
    /// The current figures but for the endpoints in `except`: the oldest due time, the due
    /// count and the disabled endpoints (both capped).
    async fn current(
        &self,
        now: DateTime<Utc>,
        except: &[EndpointId],
    ) -> StoreResult<(Option<DateTime<Utc>>, i64, i64)> {
        let except: Vec<String> = except.iter().map(ToString::to_string).collect();
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        sqlx::query(INDEX_WALKS_ONLY)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        let current = sqlx::query_as(&current_sql())
            .bind(now)
            .bind(Count::LIMIT)
            .bind(except)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Statistics of a backlog (8,000 pending rows of one endpoint, 32,000 delivered): the due
    /// count must walk the pending index, not the status index and the heap.
    #[tokio::test]
    async fn the_due_count_walks_the_pending_index_whatever_the_statistics_say() {
        let (store, _url) = crate::testing::fresh_store().await;
        let mut conn = store.conn().await.unwrap();
        let fill = format!(
            "{}{} ANALYZE messages, deliveries, endpoints;",
            crate::testing::ONE_APP_AND_ENDPOINT,
            crate::testing::deliveries_to_ep_1(
                1,
                40_000,
                "CASE WHEN i > 32000 THEN 'pending' ELSE 'delivered' END"
            )
        );
        sqlx::raw_sql(&fill).execute(&mut *conn).await.unwrap();
        sqlx::query("BEGIN").execute(&mut *conn).await.unwrap();
        sqlx::query(INDEX_WALKS_ONLY)
            .execute(&mut *conn)
            .await
            .unwrap();
        let plan: Vec<String> = sqlx::query_scalar(&format!(
            "EXPLAIN {}",
            current_sql()
                .replace("$1", "now()")
                .replace("$2", "10000")
                .replace("$3", "'{}'::text[]")
        ))
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        let plan = plan.join("\n");
        assert!(
            plan.contains(
                "Index Only Scan using deliveries_pending_endpoint_id_next_attempt_at_idx \
                 on deliveries d "
            ),
            "{plan}"
        );
        assert!(!plan.contains("status_created_at"), "{plan}");
        assert!(!plan.contains("Bitmap"), "{plan}");
        assert!(!plan.contains("Seq Scan on deliveries"), "{plan}");
    }
}
