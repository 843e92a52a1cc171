//! The dead-letter alert's counts and raised alerts ([`vow_store::DeadLetterAlerts`]); the notes
//! are written by recording (`queue::record`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection};
use vow_core::{AppId, EndpointId};
use vow_store::dead_letters::{DeadLetterAlerts, DeadLetterCount, RaisedAlert};
use vow_store::overview::KEPT;
use vow_store::rows::FromColumns;
use vow_store::StoreResult;

use crate::convert::{micros, read};
use crate::error::Result;
use crate::SqliteStore;

/// Notes that one of `endpoint`'s deliveries was dead-lettered at `now` (microseconds).
pub(crate) fn note(conn: &Connection, app: &str, endpoint: &str, now: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO dead_letter_notes (endpoint_id, app_id, at) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![endpoint, app, now])?;
    Ok(())
}

/// Deletes at most `batch` notes older than [`KEPT`] at `now`; how many.
pub(crate) fn purge(conn: &Connection, now: DateTime<Utc>, batch: i64) -> Result<usize> {
    Ok(conn
        .prepare_cached(
            "DELETE FROM dead_letter_notes WHERE rowid IN (
                 SELECT rowid FROM dead_letter_notes WHERE at < ?1 ORDER BY at LIMIT ?2)",
        )?
        .execute(params![micros(now - KEPT), batch])?)
}

#[async_trait]
impl DeadLetterAlerts for SqliteStore {
    async fn dead_letters_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<DeadLetterCount>> {
        self.read(move |conn| {
            let sql = format!(
                "SELECT {} FROM (
                     SELECT n.app_id, n.endpoint_id, count(*) AS count
                     FROM dead_letter_notes n JOIN endpoints e ON e.id = n.endpoint_id
                     WHERE n.at >= ?1 GROUP BY n.app_id, n.endpoint_id)
                 ORDER BY endpoint_id",
                DeadLetterCount::COLUMNS
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map([micros(since)], read)?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn raise_dead_letter_alert(
        &self,
        app: AppId,
        endpoint: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.write(move |conn| {
            let raised = conn
                .prepare_cached(
                    "INSERT INTO dead_letter_alerts (endpoint_id, app_id, raised_at)
                     SELECT id, app_id, ?3 FROM endpoints WHERE id = ?1 AND app_id = ?2
                     ON CONFLICT (endpoint_id) DO UPDATE SET raised_at = ?3, cleared_at = NULL
                     WHERE cleared_at < ?3",
                )?
                .execute(params![endpoint.to_string(), app.to_string(), micros(now)])?;
            Ok(raised == 1)
        })
        .await
    }

    async fn raised_dead_letter_alerts(&self) -> StoreResult<Vec<RaisedAlert>> {
        self.read(|conn| {
            let sql = format!(
                "SELECT {} FROM dead_letter_alerts WHERE cleared_at IS NULL ORDER BY endpoint_id",
                RaisedAlert::COLUMNS
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map([], read)?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn clear_dead_letter_alert(
        &self,
        endpoint: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.write(move |conn| {
            let cleared = conn
                .prepare_cached(
                    "UPDATE dead_letter_alerts SET cleared_at = ?2
                     WHERE endpoint_id = ?1 AND cleared_at IS NULL",
                )?
                .execute(params![endpoint.to_string(), micros(now)])?;
            Ok(cleared == 1)
        })
        .await
    }
}
