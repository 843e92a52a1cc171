//! `inbound_forwards`: what became of an inbound event at each destination, one row per
//! (event, destination); a pull consumer's row has destination [`PULL`].

use chrono::{DateTime, Utc};
use rusqlite::types::Type;
use rusqlite::{params, Connection};
use vow_core::{DestinationId, InboundEventId};
use vow_store::inbound::processing::{Forward, Outcome};
use vow_store::rows::FromColumns;

use crate::convert::{micros, read};
use crate::error::Result;

pub(crate) use vow_store::rows::{destination_key, PULL};

pub(crate) fn unknown(column: usize, value: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, Type::Text, value.into())
}

/// Every recorded outcome of `event`, by destination.
pub(crate) fn forwards(conn: &Connection, event: InboundEventId) -> Result<Vec<Forward>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {} FROM inbound_forwards WHERE event_id = ?1 ORDER BY destination",
        Forward::COLUMNS
    ))?;
    let rows = stmt.query_map([event.to_string()], read)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Records one more attempt at `destination` with this outcome.
pub(crate) fn put_forward(
    conn: &Connection,
    event: InboundEventId,
    destination: Option<DestinationId>,
    outcome: Outcome,
    status: Option<u16>,
    error: Option<&str>,
    now: DateTime<Utc>,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO inbound_forwards (event_id, destination, outcome, attempts, status, error,
             updated_at) VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6)
         ON CONFLICT (event_id, destination) DO UPDATE SET outcome = excluded.outcome,
             attempts = attempts + 1, status = excluded.status, error = excluded.error,
             updated_at = excluded.updated_at",
    )?
    .execute(params![
        event.to_string(),
        destination_key(destination.as_ref()),
        outcome.as_str(),
        status,
        error,
        micros(now),
    ])?;
    Ok(())
}
