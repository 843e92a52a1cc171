//! `inbound_forwards`: what became of an inbound event at each destination, one row per
//! (event, destination); a pull consumer's row has destination [`PULL`].

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use vow_core::InboundEventId;
use vow_store::inbound::processing::{Forward, Outcome};
use vow_store::rows::FromColumns;
use vow_store::rules::recording::Stored;
use vow_store::StoreResult;

use crate::convert::{self, read};
use crate::error::{corrupt, db_error};

pub(crate) use vow_store::rows::{destination_key, PULL};

/// A stored outcome.
pub(crate) fn outcome(value: &str) -> StoreResult<Outcome> {
    Outcome::parse(value).ok_or_else(|| corrupt(format!("inbound_forwards.outcome {value:?}")))
}

/// The forwards of `event`, by destination.
pub(crate) async fn of<'c>(
    ex: impl PgExecutor<'c>,
    event: &InboundEventId,
) -> StoreResult<Vec<Forward>> {
    sqlx::query(&format!(
        "SELECT {} FROM inbound_forwards WHERE event_id = $1 ORDER BY destination",
        Forward::COLUMNS
    ))
    .bind(event.to_string())
    .try_map(read::<Forward>)
    .fetch_all(ex)
    .await
    .map_err(db_error)
}

/// The stored outcomes of the forwards of each of `events`, as `(event id, outcome)`.
pub(crate) async fn outcomes_of(
    conn: &mut PgConnection,
    events: &[String],
) -> StoreResult<Vec<(String, Stored<String>)>> {
    let rows: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT event_id, destination, outcome, error FROM inbound_forwards
         WHERE event_id = ANY($1)",
    )
    .bind(events)
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    rows.into_iter()
        .map(|(event, destination, o, error)| {
            let outcome = outcome(&o)?;
            Ok((
                event,
                Stored {
                    destination,
                    outcome,
                    error,
                },
            ))
        })
        .collect()
}

/// Outcomes to write, as columns: one row per (event, destination).
#[derive(Default)]
pub(crate) struct ForwardColumns {
    event_id: Vec<String>,
    destination: Vec<String>,
    outcome: Vec<&'static str>,
    status: Vec<Option<i32>>,
    error: Vec<Option<String>>,
    /// 1 for an attempt, 0 for a stored outcome dead-lettered.
    attempts: Vec<i32>,
}

impl ForwardColumns {
    /// Adds the outcome of one attempt of `event` at `destination` (a key of
    /// [`destination_key`]).
    pub(crate) fn push(
        &mut self,
        event: &str,
        destination: String,
        outcome: Outcome,
        status: Option<u16>,
        error: Option<String>,
    ) {
        self.event_id.push(event.to_string());
        self.destination.push(destination);
        self.outcome.push(outcome.as_str());
        self.status.push(convert::status_param(status));
        self.error.push(error);
        self.attempts.push(1);
    }

    /// Dead-letters the stored outcome of `event` at `destination`: no attempt, its status and
    /// error stay.
    pub(crate) fn dead_letter(&mut self, event: &str, destination: String) {
        self.push(event, destination, Outcome::DeadLettered, None, None);
        if let Some(last) = self.attempts.last_mut() {
            *last = 0;
        }
    }

    /// Writes them at `now`, one statement: a new row counts one attempt, an existing one
    /// takes the new outcome, status and error and counts one more (a dead-letter only takes
    /// the outcome). A pair must appear once.
    pub(crate) async fn upsert(
        self,
        conn: &mut PgConnection,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        if self.event_id.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO inbound_forwards
                 (event_id, destination, outcome, attempts, status, error, updated_at)
             SELECT u.event_id, u.destination, u.outcome, u.attempts, u.status, u.error, $7
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::int[])
                 AS u (event_id, destination, outcome, status, error, attempts)
             ON CONFLICT (event_id, destination) DO UPDATE SET
                 outcome = EXCLUDED.outcome,
                 attempts = inbound_forwards.attempts + EXCLUDED.attempts,
                 status = CASE WHEN EXCLUDED.attempts > 0 THEN EXCLUDED.status
                               ELSE inbound_forwards.status END,
                 error = CASE WHEN EXCLUDED.attempts > 0 THEN EXCLUDED.error
                              ELSE inbound_forwards.error END,
                 updated_at = EXCLUDED.updated_at",
        )
        .bind(&self.event_id)
        .bind(&self.destination)
        .bind(&self.outcome)
        .bind(&self.status)
        .bind(&self.error)
        .bind(&self.attempts)
        .bind(now)
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }
}
