//! The delivery activity per minute behind the Overview (`vow_store::overview`): recording a
//! batch adds its tally here, retention deletes old minutes, the Overview reads a day of them.

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection};
use vow_store::overview::{ActivityMinute, KEPT};
use vow_store::rows::FromColumns;

use crate::convert::{micros, read};
use crate::error::Result;

/// Adds each minute's activity to its row.
pub(crate) fn add(conn: &Connection, minutes: &[ActivityMinute]) -> Result<()> {
    let mut upsert = conn.prepare_cached(
        "INSERT INTO delivery_activity
             (minute, succeeded, failed, delivered, dead_lettered, disabled)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (minute) DO UPDATE SET
             succeeded = succeeded + excluded.succeeded, failed = failed + excluded.failed,
             delivered = delivered + excluded.delivered,
             dead_lettered = dead_lettered + excluded.dead_lettered,
             disabled = disabled + excluded.disabled",
    )?;
    for m in minutes {
        let a = &m.activity;
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        upsert.execute(params![
            micros(m.minute),
            n(a.succeeded),
            n(a.failed),
            n(a.delivered),
            n(a.dead_lettered),
            n(a.disabled),
        ])?;
    }
    Ok(())
}

/// The minutes from `?1` to `?2`, oldest first.
pub(crate) fn between_sql() -> String {
    format!(
        "SELECT {} FROM delivery_activity WHERE minute >= ?1 AND minute <= ?2 ORDER BY minute",
        ActivityMinute::COLUMNS
    )
}

/// The minutes from `from` to `to`, oldest first.
pub(crate) fn between(
    conn: &Connection,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<ActivityMinute>> {
    let mut stmt = conn.prepare_cached(&between_sql())?;
    let rows = stmt.query_map(params![micros(from), micros(to)], read)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Deletes at most `batch` minutes older than [`KEPT`] at `now`; how many.
pub(crate) fn purge(conn: &Connection, now: DateTime<Utc>, batch: i64) -> Result<usize> {
    Ok(conn
        .prepare_cached(
            "DELETE FROM delivery_activity WHERE minute IN (
                 SELECT minute FROM delivery_activity WHERE minute < ?1 ORDER BY minute LIMIT ?2)",
        )?
        .execute(params![micros(now - KEPT), batch])?)
}
