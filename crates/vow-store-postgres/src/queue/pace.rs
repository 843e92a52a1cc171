//! Pacing throttled endpoints across every node: each send reserves its slot in
//! `endpoint_pace` with one statement, which takes the row lock, moves the endpoint's next free
//! slot on by the gap and answers how long to wait, all by the database's clock
//! (`clock_timestamp()`, read after the lock is taken), so the nodes' own clocks never enter
//! into it.
//!
//! A node that dies after reserving leaves its slots unused: the endpoint is paced a little
//! below its rate for as long as they last, never above it.

use std::time::Duration;

use sqlx::PgPool;
use vow_core::EndpointId;
use vow_store::rules::pace::gap;
use vow_store::StoreResult;

use crate::error::db_error;

/// Reserves `endpoint`'s next slot (`$1`) at a gap of `$2` microseconds; answers the wait in
/// microseconds (negative when the slot is now). No row, and no wait, for an endpoint that no
/// longer exists.
const RESERVE: &str = "INSERT INTO endpoint_pace AS p (endpoint_id, next_slot)
     SELECT $1, clock_timestamp() + $2::bigint * interval '1 microsecond'
     WHERE EXISTS (SELECT 1 FROM endpoints WHERE id = $1)
     ON CONFLICT (endpoint_id) DO UPDATE
     SET next_slot = GREATEST(p.next_slot, clock_timestamp()) + $2::bigint * interval '1 microsecond'
     RETURNING (EXTRACT(EPOCH FROM p.next_slot - clock_timestamp()) * 1000000)::bigint - $2::bigint";

pub(crate) async fn reserve(
    pool: &PgPool,
    endpoint: EndpointId,
    rate: u16,
) -> StoreResult<Duration> {
    let gap_micros = i64::try_from(gap(rate).as_micros()).unwrap_or(i64::MAX);
    let wait: Option<i64> = sqlx::query_scalar(RESERVE)
        .bind(endpoint.to_string())
        .bind(gap_micros)
        .fetch_optional(pool)
        .await
        .map_err(db_error)?;
    let micros = u64::try_from(wait.unwrap_or(0)).unwrap_or(0);
    Ok(Duration::from_micros(micros))
}
