//! The replay guard's digests (`inbound_digests`, `vow_store::inbound::replay_guard`): inside
//! the claim's transaction, after the claim row was inserted. The upsert on the primary key
//! serialises concurrent claims of one digest: the second waits for the first to commit and
//! then sees its row. The claim (`events`) reads the event that holds a digest through
//! [`HOLDER`]; this module reads no event.

use sqlx::PgConnection;
use vow_store::inbound::{InboundEvent, NewInboundEvent, ReplayGuard};
use vow_store::StoreResult;

use crate::error::db_error;

/// The id of the event that holds digest `$2` of source `$1`, as a subquery.
pub(crate) const HOLDER: &str =
    "SELECT event_id FROM inbound_digests WHERE source_id = $1 AND digest = $2";

/// Records that `event` (just inserted for `new`) was accepted with the guard's digest, unless
/// that digest was accepted within the window: then `false`, and nothing is recorded (the
/// caller reads the event [`HOLDER`] names and rolls the transaction back).
pub(crate) async fn remember(
    conn: &mut PgConnection,
    new: &NewInboundEvent,
    guard: &ReplayGuard,
    event: &InboundEvent,
) -> StoreResult<bool> {
    let source = new.source_id.to_string();
    let moved: Option<i32> = sqlx::query_scalar(
        "INSERT INTO inbound_digests (source_id, digest, event_id, seen_at)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (source_id, digest) DO UPDATE
             SET event_id = excluded.event_id, seen_at = excluded.seen_at
             WHERE inbound_digests.seen_at <= $5
         RETURNING 1",
    )
    .bind(&source)
    .bind(&guard.digest)
    .bind(event.id.to_string())
    .bind(new.now)
    .bind(guard.cutoff(new.now))
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?;
    Ok(moved.is_some())
}
