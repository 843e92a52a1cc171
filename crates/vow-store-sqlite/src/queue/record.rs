//! Recording attempt outcomes: the fenced delivery update, the attempt row, and the endpoint's
//! consecutive dead-letter count with auto-disabling (the rule is
//! `vow_store::rules::dead_letter`; this is its SQL). One writer job records a whole batch, in
//! order, so a later outcome sees what an earlier one of the same batch did, then adds the
//! batch's tally to the Overview's activity minutes.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use vow_store::overview::tally;
use vow_store::queue::{AttemptOutcome, DeliveryOutcomes, Recorded};
use vow_store::rules::dead_letter::{CountEvent, EndpointHealth};
use vow_store::StoreResult;

use crate::convert::micros;
use crate::dead_letters;
use crate::error::Result;
use crate::queue::activity;
use crate::queue::attempt::{self, Owner};
use crate::SqliteStore;

pub(crate) fn record(
    conn: &Connection,
    outcomes: &[AttemptOutcome],
    disable_after: u32,
) -> Result<Vec<Recorded>> {
    let recorded = outcomes
        .iter()
        .map(|o| record_one(conn, o, disable_after))
        .collect::<Result<Vec<_>>>()?;
    activity::add(conn, &tally(outcomes.iter().zip(&recorded)))?;
    Ok(recorded)
}

fn record_one(conn: &Connection, o: &AttemptOutcome, disable_after: u32) -> Result<Recorded> {
    let now = micros(o.now);
    let next = o.next.stored();
    let delivery = o.delivery_id.to_string();
    // Only while the token matches; the lease ends with the record whatever the outcome.
    // `last_status` follows the attempt when there is one (NULL when it got no response).
    let owner: Option<(String, String, String)> = conn
        .prepare_cached(
            "UPDATE deliveries SET status = ?3, attempts = attempts + ?4,
             last_status = CASE WHEN ?4 THEN ?5 ELSE last_status END,
             next_attempt_at = coalesce(?6, next_attempt_at),
             client_errors = coalesce(?7, client_errors), dead_letter_reason = ?8,
             manual = manual AND NOT ?4,
             lease_token = NULL, lease_until = NULL, updated_at = ?9
             WHERE id = ?1 AND lease_token = ?2
             RETURNING app_id, msg_id, endpoint_id",
        )?
        .query_row(
            params![
                delivery,
                o.lease.0,
                next.status.as_str(),
                o.attempt.is_some(),
                o.attempt.as_ref().and_then(|a| a.response_status),
                next.next_attempt_at.map(micros),
                next.client_errors,
                next.dead_letter_reason,
                now,
            ],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    let Some((app, msg, endpoint)) = owner else {
        return Ok(Recorded::LeaseLost);
    };
    if let Some(attempt) = &o.attempt {
        let owner = Owner {
            app: &app,
            msg: &msg,
            endpoint: &endpoint,
            delivery: &delivery,
        };
        attempt::insert(conn, &owner, attempt)?;
    }
    let endpoint_disabled = match CountEvent::of(&o.next) {
        Some(event) => count(conn, &app, &endpoint, event, disable_after, now)?,
        None => false,
    };
    Ok(Recorded::Stored { endpoint_disabled })
}

/// Runs `event` through the endpoint's dead-letter count ([`EndpointHealth::record`]) and
/// writes back what changed (noting a dead-letter for the rate alert); whether this disabled the endpoint, whose waiting deliveries are
/// then held.
fn count(
    conn: &Connection,
    app: &str,
    endpoint: &str,
    event: CountEvent,
    disable_after: u32,
    now: i64,
) -> Result<bool> {
    let health: Option<EndpointHealth> = conn
        .prepare_cached("SELECT consecutive_dead_letters, disabled FROM endpoints WHERE id = ?1")?
        .query_row([endpoint], |r| {
            Ok(EndpointHealth {
                consecutive_dead_letters: r.get(0)?,
                disabled: r.get(1)?,
            })
        })
        .optional()?;
    let Some(before) = health else {
        return Ok(false);
    };
    if let CountEvent::DeadLetter { .. } = event {
        dead_letters::note(conn, app, endpoint, now)?;
    }
    let mut after = before;
    if !after.record(event, disable_after) {
        if after != before {
            conn.prepare_cached(
                "UPDATE endpoints SET consecutive_dead_letters = ?2 WHERE id = ?1",
            )?
            .execute(params![endpoint, after.consecutive_dead_letters])?;
        }
        return Ok(false);
    }
    // `updated_at` strictly grows, so workers caching the endpoint by it notice.
    conn.prepare_cached(
        "UPDATE endpoints SET disabled = 1, consecutive_dead_letters = ?3, disabled_reason = ?4,
         updated_at = max(?2, updated_at + 1) WHERE id = ?1",
    )?
    .execute(params![
        endpoint,
        now,
        after.consecutive_dead_letters,
        event.disable_reason(disable_after)
    ])?;
    // Its waiting deliveries are held; leased ones come back through their worker (a retry
    // is claimed with `disabled: true` and recorded as `Hold`).
    conn.prepare_cached(
        "UPDATE deliveries SET status = 'held', updated_at = ?3
         WHERE app_id = ?1 AND endpoint_id = ?2 AND status = 'pending' AND lease_token IS NULL",
    )?
    .execute(params![app, endpoint, now])?;
    Ok(true)
}

#[async_trait]
impl DeliveryOutcomes for SqliteStore {
    async fn record_attempts(
        &self,
        outcomes: Vec<AttemptOutcome>,
        disable_after: u32,
    ) -> StoreResult<Vec<Recorded>> {
        if outcomes.is_empty() {
            return Ok(Vec::new());
        }
        self.write(move |c| record(c, &outcomes, disable_after))
            .await
    }
}
