//! The replay guard's digests (`inbound_digests`, `vow_store::inbound::replay_guard`): inside
//! the claim's transaction, after the claim row was inserted. The upsert on the primary key
//! serialises concurrent claims of one digest: the second waits for the first to commit and
//! then sees its row.

use sqlx::PgConnection;
use vow_store::inbound::{InboundEvent, NewInboundEvent, ReplayGuard};
use vow_store::StoreResult;

use super::events::{one_event, EventRow, COLUMNS};
use crate::error::{corrupt, db_error};

/// Records that `event` (just inserted for `new`) was accepted with the guard's digest, unless
/// that digest was accepted within the window: then the event that holds it, and nothing is
/// recorded (the caller rolls the transaction back).
pub(crate) async fn remember(
    conn: &mut PgConnection,
    new: &NewInboundEvent,
    guard: &ReplayGuard,
    event: &InboundEvent,
) -> StoreResult<Option<InboundEvent>> {
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
    if moved.is_some() {
        return Ok(None);
    }
    let sql = format!(
        "SELECT {COLUMNS} FROM inbound_events WHERE id =
             (SELECT event_id FROM inbound_digests WHERE source_id = $1 AND digest = $2)"
    );
    let query = sqlx::query_as::<_, EventRow>(&sql)
        .bind(&source)
        .bind(&guard.digest);
    let earlier = one_event(query, conn).await?;
    earlier
        .map(Some)
        .ok_or_else(|| corrupt("a replay guard's digest names no inbound event"))
}
