//! `inbound_forwards`: what became of an inbound event at each destination, one row per
//! (event, destination); a pull consumer's row has destination [`PULL`].

use chrono::{DateTime, Utc};
use rusqlite::types::Type;
use rusqlite::{params, Connection, Row};
use vow_core::{DestinationId, InboundEventId};
use vow_store::inbound::processing::{Forward, Outcome};

use crate::convert::{micros, time};
use crate::error::Result;

/// The destination column's value for a pull consumer.
pub(crate) const PULL: &str = "pull";

pub(crate) fn destination_key(destination: Option<DestinationId>) -> String {
    destination.map_or_else(|| PULL.to_owned(), |d| d.to_string())
}

pub(crate) fn unknown(column: usize, value: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, Type::Text, value.into())
}

fn forward_from_row(row: &Row<'_>) -> rusqlite::Result<Forward> {
    let destination: String = row.get(0)?;
    let outcome: String = row.get(1)?;
    Ok(Forward {
        destination: match destination.as_str() {
            PULL => None,
            other => Some(other.parse().map_err(|_| unknown(0, destination.clone()))?),
        },
        outcome: Outcome::parse(&outcome).ok_or_else(|| unknown(1, outcome))?,
        attempts: row.get(2)?,
        status: row.get(3)?,
        error: row.get(4)?,
        updated_at: time(row, 5)?,
    })
}

/// Every recorded outcome of `event`, by destination.
pub(crate) fn forwards(conn: &Connection, event: InboundEventId) -> Result<Vec<Forward>> {
    let mut stmt = conn.prepare_cached(
        "SELECT destination, outcome, attempts, status, error, updated_at FROM inbound_forwards
         WHERE event_id = ?1 ORDER BY destination",
    )?;
    let rows = stmt.query_map([event.to_string()], forward_from_row)?;
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
        destination_key(destination),
        outcome.as_str(),
        status,
        error,
        micros(now),
    ])?;
    Ok(())
}
