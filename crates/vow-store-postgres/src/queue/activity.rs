//! The delivery activity per minute behind the Overview (`vow_store::overview`): recording a
//! batch adds its tally here, retention deletes old minutes, the Overview reads a day of them.
//!
//! Every process records into the current minute, so a minute is [`SHARDS`] rows: each write
//! picks one at random, and two records wait for each other only when they picked the same one.
//! Recording adds its tally as the last statement of its transaction, so the row lock is held
//! only until the commit, and it takes the rows in minute order, so two records never wait for
//! each other in a circle.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use vow_store::overview::{ActivityMinute, KEPT};
use vow_store::rows::FromColumns;
use vow_store::StoreResult;

use crate::convert::{self, read};
use crate::error::db_error;

/// Rows per minute: enough that concurrent records rarely pick the same one, few enough that a
/// day stays a few thousand rows to read.
const SHARDS: i16 = 4;

/// Adds minutes `$1` with their tallies (`$2` to `$6`) to one of their `$7` rows each.
pub(crate) const ADD: &str = "INSERT INTO delivery_activity AS a
         (minute, shard, succeeded, failed, delivered, dead_lettered, disabled)
     SELECT u.minute, floor(random() * $7)::smallint, u.s, u.f, u.d, u.x, u.y
     FROM UNNEST($1::timestamptz[], $2::bigint[], $3::bigint[], $4::bigint[],
                 $5::bigint[], $6::bigint[]) AS u (minute, s, f, d, x, y)
     ORDER BY u.minute
     ON CONFLICT (minute, shard) DO UPDATE SET
         succeeded = a.succeeded + excluded.succeeded, failed = a.failed + excluded.failed,
         delivered = a.delivered + excluded.delivered,
         dead_lettered = a.dead_lettered + excluded.dead_lettered,
         disabled = a.disabled + excluded.disabled";

/// Adds each minute's activity (oldest first, as `tally` gives them) to one of its rows.
pub(crate) async fn add(conn: &mut PgConnection, minutes: &[ActivityMinute]) -> StoreResult<()> {
    if minutes.is_empty() {
        return Ok(());
    }
    let column = |f: fn(&ActivityMinute) -> u64| -> Vec<i64> {
        minutes
            .iter()
            .map(|m| convert::bigint_param(f(m)))
            .collect()
    };
    let at: Vec<DateTime<Utc>> = minutes.iter().map(|m| m.minute).collect();
    sqlx::query(ADD)
        .bind(&at)
        .bind(column(|m| m.activity.succeeded))
        .bind(column(|m| m.activity.failed))
        .bind(column(|m| m.activity.delivered))
        .bind(column(|m| m.activity.dead_lettered))
        .bind(column(|m| m.activity.disabled))
        .bind(f64::from(SHARDS))
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// The minutes from `from` to `to`, oldest first, their shards summed.
pub(crate) async fn between<'c>(
    ex: impl PgExecutor<'c>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> StoreResult<Vec<ActivityMinute>> {
    sqlx::query(&format!(
        "SELECT {} FROM (
             SELECT minute, sum(succeeded)::bigint AS succeeded, sum(failed)::bigint AS failed,
                    sum(delivered)::bigint AS delivered,
                    sum(dead_lettered)::bigint AS dead_lettered,
                    sum(disabled)::bigint AS disabled
             FROM delivery_activity WHERE minute >= $1 AND minute <= $2 GROUP BY minute) m
         ORDER BY minute",
        ActivityMinute::COLUMNS
    ))
    .bind(from)
    .bind(to)
    .try_map(read::<ActivityMinute>)
    .fetch_all(ex)
    .await
    .map_err(db_error)
}

/// The statement retention runs (a CTE of its purge): deletes at most `$3` rows of minutes
/// older than `$4` ([`KEPT`] before `now`), `RETURNING 1` each.
pub(crate) const PURGE: &str = "DELETE FROM delivery_activity
     WHERE (minute, shard) IN (SELECT minute, shard FROM delivery_activity
                               WHERE minute < $4 ORDER BY minute LIMIT $3)
     RETURNING 1";

/// Where [`PURGE`] stops at `now`.
pub(crate) fn purge_before(now: DateTime<Utc>) -> DateTime<Utc> {
    now - KEPT
}
