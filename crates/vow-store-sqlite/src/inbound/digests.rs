//! The replay guard's digests (`inbound_digests`, `vow_store::inbound::replay_guard`): inside
//! the claim's writer job, after the claim row was inserted. The claim (`events`) reads the
//! event that holds a digest through [`HOLDER`]; this module reads no event.

use rusqlite::{params, Connection, OptionalExtension};
use vow_store::inbound::{InboundEvent, NewInboundEvent, ReplayGuard};

use crate::convert::micros;
use crate::error::Result;

/// The id of the event that holds digest `?2` of source `?1`, as a subquery.
pub(crate) const HOLDER: &str =
    "SELECT event_id FROM inbound_digests WHERE source_id = ?1 AND digest = ?2";

/// Records that `event` (just inserted for `new`) was accepted with the guard's digest, unless
/// that digest was accepted within the window: then `false`, and nothing is recorded (the
/// caller reads the event [`HOLDER`] names and removes `event`).
pub(crate) fn remember(
    conn: &Connection,
    new: &NewInboundEvent,
    guard: &ReplayGuard,
    event: &InboundEvent,
) -> Result<bool> {
    let source = new.source_id.to_string();
    let moved = conn
        .prepare_cached(
            "INSERT INTO inbound_digests (source_id, digest, event_id, seen_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (source_id, digest) DO UPDATE
                 SET event_id = excluded.event_id, seen_at = excluded.seen_at
                 WHERE seen_at <= ?5
             RETURNING 1",
        )?
        .query_row(
            params![
                source,
                guard.digest,
                event.id.to_string(),
                micros(new.now),
                micros(guard.cutoff(new.now)),
            ],
            |_| Ok(()),
        )
        .optional()?;
    Ok(moved.is_some())
}
