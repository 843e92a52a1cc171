//! The dead-letter alert's counts and raised alerts ([`vow_store::DeadLetterAlerts`]); the notes
//! are written by recording (`queue::record`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};
use vow_core::{AppId, EndpointId};
use vow_store::dead_letters::{DeadLetterAlerts, DeadLetterCount, RaisedAlert};
use vow_store::rows::FromColumns;
use vow_store::StoreResult;

use crate::convert::read;
use crate::error::db_error;
use crate::PgStore;

/// Notes one dead-letter per `(endpoint, app, at)`.
pub(crate) async fn note(
    tx: &mut Transaction<'static, Postgres>,
    endpoints: &[String],
    apps: &[String],
    at: &[DateTime<Utc>],
) -> StoreResult<()> {
    if endpoints.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO dead_letter_notes (endpoint_id, app_id, at)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::timestamptz[])",
    )
    .bind(endpoints)
    .bind(apps)
    .bind(at)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// The statement retention runs (a CTE of its purge): deletes at most `$3` notes older than `$4`
/// (`activity::purge_before`: [`KEPT`](vow_store::overview::KEPT) before `now`), `RETURNING 1` each.
pub(crate) const PURGE: &str = "DELETE FROM dead_letter_notes
     WHERE ctid IN (SELECT ctid FROM dead_letter_notes WHERE at < $4 ORDER BY at LIMIT $3)
     RETURNING 1";

#[async_trait]
impl DeadLetterAlerts for PgStore {
    async fn dead_letters_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<DeadLetterCount>> {
        sqlx::query(&format!(
            "SELECT {} FROM (
                 SELECT n.app_id, n.endpoint_id, count(*) AS count
                 FROM dead_letter_notes n JOIN endpoints e ON e.id = n.endpoint_id
                 WHERE n.at >= $1 GROUP BY n.app_id, n.endpoint_id) c
             ORDER BY endpoint_id",
            DeadLetterCount::COLUMNS
        ))
        .bind(since)
        .try_map(read::<DeadLetterCount>)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)
    }

    async fn raise_dead_letter_alert(
        &self,
        app: AppId,
        endpoint: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let raised = sqlx::query(
            "INSERT INTO dead_letter_alerts (endpoint_id, app_id, raised_at)
             SELECT id, app_id, $3 FROM endpoints WHERE id = $1 AND app_id = $2
             ON CONFLICT (endpoint_id) DO UPDATE SET raised_at = $3, cleared_at = NULL
             WHERE dead_letter_alerts.cleared_at < $3",
        )
        .bind(endpoint.to_string())
        .bind(app.to_string())
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(raised.rows_affected() == 1)
    }

    async fn raised_dead_letter_alerts(&self) -> StoreResult<Vec<RaisedAlert>> {
        sqlx::query(&format!(
            "SELECT {} FROM dead_letter_alerts WHERE cleared_at IS NULL ORDER BY endpoint_id",
            RaisedAlert::COLUMNS
        ))
        .try_map(read::<RaisedAlert>)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)
    }

    async fn clear_dead_letter_alert(
        &self,
        endpoint: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let cleared = sqlx::query(
            "UPDATE dead_letter_alerts SET cleared_at = $2
             WHERE endpoint_id = $1 AND cleared_at IS NULL",
        )
        .bind(endpoint.to_string())
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(cleared.rows_affected() == 1)
    }
}
