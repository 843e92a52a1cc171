//! Recording attempt outcomes: one transaction per batch, each outcome written only while its
//! lease token still matches.
//!
//! The transaction (its statements on plans kept per connection: [`kept_plans`]):
//! 1. locks the batch's deliveries (`FOR NO KEY UPDATE`, in id order) and reads their lease
//!    tokens; the outcomes are then matched in order, here, exactly as if they were recorded one
//!    by one (a second outcome for one delivery finds the lease already cleared by the first);
//! 2. one statement inserts the attempt rows, updates the deliveries (clearing their leases) and
//!    resets the dead-letter count of endpoints that only got deliveries (a reset that changes
//!    nothing takes no lock: the `<> 0` guard leaves the row alone);
//! 3. only when the batch dead-lettered something: the endpoints concerned are locked, their
//!    counts replayed through the batch's outcomes in order (the rule:
//!    `vow_store::rules::dead_letter`), written back, and an endpoint that it disabled gets an
//!    `updated_at` that strictly grows (so workers caching by it notice) and its pending
//!    deliveries that hold no lease moved to `held`; each dead-letter is noted for the rate
//!    alert (`vow_store::dead_letters`);
//! 4. the batch's tally is added to the Overview's activity minutes (`activity`), last, so
//!    that row lock is held only until the commit.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgPool, Postgres, Transaction};
use vow_store::overview::tally;
use vow_store::queue::DeliveryOutcomes;
use vow_store::queue::{AttemptOutcome, Recorded};
use vow_store::rules::dead_letter::{CountEvent, EndpointHealth};
use vow_store::StoreResult;

use crate::convert;
use crate::dead_letters;
use crate::error::{corrupt, db_error};
use crate::queue::activity;
use crate::{kept_plans, PgStore};

/// A delivery as locked by step 1.
#[derive(sqlx::FromRow)]
struct LeaseRow {
    id: String,
    app_id: String,
    msg_id: String,
    endpoint_id: String,
    lease_token: Option<String>,
}

/// An outcome of the batch that moves its endpoint's dead-letter count: its index, what it
/// means for the count, and its record time.
type Counted = (usize, CountEvent, DateTime<Utc>);

/// The attempt rows to insert, as columns.
#[derive(Default)]
struct AttemptColumns {
    id: Vec<String>,
    app_id: Vec<String>,
    msg_id: Vec<String>,
    endpoint_id: Vec<String>,
    delivery_id: Vec<String>,
    started_at: Vec<DateTime<Utc>>,
    url: Vec<String>,
    response_status: Vec<Option<i32>>,
    response: Vec<String>,
    duration_ms: Vec<i64>,
    success: Vec<bool>,
    error: Vec<Option<String>>,
    trigger: Vec<&'static str>,
}

/// The delivery updates, as columns. `None` keeps the stored value where the SQL says so.
#[derive(Default)]
struct DeliveryColumns {
    id: Vec<String>,
    status: Vec<&'static str>,
    next_attempt_at: Vec<Option<DateTime<Utc>>>,
    client_errors: Vec<Option<i32>>,
    has_attempt: Vec<bool>,
    last_status: Vec<Option<i32>>,
    dead_letter_reason: Vec<Option<String>>,
    now: Vec<DateTime<Utc>>,
}

impl AttemptColumns {
    fn push(&mut self, row: &LeaseRow, outcome: &AttemptOutcome) {
        let Some(a) = &outcome.attempt else { return };
        self.id.push(a.id.to_string());
        self.app_id.push(row.app_id.clone());
        self.msg_id.push(row.msg_id.clone());
        self.endpoint_id.push(row.endpoint_id.clone());
        self.delivery_id.push(row.id.clone());
        self.started_at.push(a.started_at);
        self.url.push(a.url.clone());
        self.response_status
            .push(convert::status_param(a.response_status));
        self.response.push(a.response.clone());
        self.duration_ms.push(convert::bigint_param(a.duration_ms));
        self.success.push(a.success);
        self.error.push(a.error.clone());
        self.trigger.push(a.trigger.as_str());
    }
}

impl DeliveryColumns {
    fn push(&mut self, row: &LeaseRow, outcome: &AttemptOutcome) {
        let next = outcome.next.stored();
        self.id.push(row.id.clone());
        self.status.push(next.status.as_str());
        self.next_attempt_at.push(next.next_attempt_at);
        self.client_errors
            .push(next.client_errors.map(convert::int_param));
        self.has_attempt.push(outcome.attempt.is_some());
        self.last_status.push(
            outcome
                .attempt
                .as_ref()
                .and_then(|a| convert::status_param(a.response_status)),
        );
        self.dead_letter_reason
            .push(next.dead_letter_reason.map(str::to_string));
        self.now.push(outcome.now);
    }
}

/// Step 1: locks the deliveries `$1` in id order and reads their lease tokens.
const LOCK: &str = "SELECT id, app_id, msg_id, endpoint_id, lease_token FROM deliveries
     WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE";

/// Step 2: inserts the attempts (`$1` to `$13`, as columns), updates the deliveries (`$14` to
/// `$21`) and resets the dead-letter count of the endpoints `$22`.
const WRITE: &str = "WITH inserted AS (
         INSERT INTO attempts
             (id, app_id, msg_id, endpoint_id, delivery_id, started_at, url,
              response_status, response, duration_ms, success, error, trigger)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                              $6::timestamptz[], $7::text[], $8::int[], $9::text[],
                              $10::bigint[], $11::bool[], $12::text[], $13::text[])
     ), reset AS (
         UPDATE endpoints SET consecutive_dead_letters = 0
         WHERE id = ANY($22) AND consecutive_dead_letters <> 0
     )
     UPDATE deliveries d SET
         status = u.status,
         attempts = d.attempts + CASE WHEN u.has_attempt THEN 1 ELSE 0 END,
         next_attempt_at = COALESCE(u.next_attempt_at, d.next_attempt_at),
         client_errors = COALESCE(u.client_errors, d.client_errors),
         last_status = CASE WHEN u.has_attempt THEN u.last_status ELSE d.last_status END,
         dead_letter_reason = u.dead_letter_reason,
         manual = d.manual AND NOT u.has_attempt,
         lease_token = NULL,
         lease_until = NULL,
         updated_at = u.now
     FROM UNNEST($14::text[], $15::text[], $16::timestamptz[], $17::int[], $18::bool[],
                 $19::int[], $20::text[], $21::timestamptz[])
         AS u (id, status, next_attempt_at, client_errors, has_attempt, last_status,
               dead_letter_reason, now)
     WHERE d.id = u.id";

pub(crate) async fn record(
    pool: &PgPool,
    outcomes: Vec<AttemptOutcome>,
    disable_after: u32,
) -> StoreResult<Vec<Recorded>> {
    if outcomes.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = outcomes.iter().map(|o| o.delivery_id.to_string()).collect();
    let mut tx = kept_plans::begin(pool).await?;

    // 1. Lock the deliveries and match the lease tokens, in order.
    let mut locked: HashMap<String, LeaseRow> = sqlx::query_as::<_, LeaseRow>(LOCK)
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?
        .into_iter()
        .map(|row| (row.id.clone(), row))
        .collect();

    let mut results = vec![Recorded::LeaseLost; outcomes.len()];
    let mut attempts = AttemptColumns::default();
    let mut deliveries = DeliveryColumns::default();
    // Per endpoint, the count events of this batch in order.
    let mut events: BTreeMap<String, Vec<Counted>> = BTreeMap::new();
    for (i, (outcome, id)) in outcomes.iter().zip(&ids).enumerate() {
        let Some(row) = locked.get_mut(id) else {
            continue;
        };
        if row.lease_token.as_deref() != Some(outcome.lease.0.as_str()) {
            continue;
        }
        row.lease_token = None;
        results[i] = Recorded::Stored {
            endpoint_disabled: false,
        };
        attempts.push(row, outcome);
        deliveries.push(row, outcome);
        let Some(event) = CountEvent::of(&outcome.next) else {
            continue;
        };
        events
            .entry(row.endpoint_id.clone())
            .or_default()
            .push((i, event, outcome.now));
    }
    if deliveries.id.is_empty() {
        tx.rollback().await.map_err(db_error)?;
        return Ok(results);
    }

    let (reset_only, dead_lettering): (BTreeMap<_, _>, BTreeMap<_, _>) = events
        .into_iter()
        .partition(|(_, evs)| CountEvent::only_resets(evs.iter().map(|&(_, e, _)| e)));
    let reset_only: Vec<String> = reset_only.into_keys().collect();

    // 2. Attempts, deliveries and count resets, in one statement.
    sqlx::query(WRITE)
        .bind(&attempts.id)
        .bind(&attempts.app_id)
        .bind(&attempts.msg_id)
        .bind(&attempts.endpoint_id)
        .bind(&attempts.delivery_id)
        .bind(&attempts.started_at)
        .bind(&attempts.url)
        .bind(&attempts.response_status)
        .bind(&attempts.response)
        .bind(&attempts.duration_ms)
        .bind(&attempts.success)
        .bind(&attempts.error)
        .bind(&attempts.trigger)
        .bind(&deliveries.id)
        .bind(&deliveries.status)
        .bind(&deliveries.next_attempt_at)
        .bind(&deliveries.client_errors)
        .bind(&deliveries.has_attempt)
        .bind(&deliveries.last_status)
        .bind(&deliveries.dead_letter_reason)
        .bind(&deliveries.now)
        .bind(&reset_only)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;

    // 3. Dead-letter counts and auto-disabling.
    if !dead_lettering.is_empty() {
        count_dead_letters(&mut tx, dead_lettering, disable_after, &mut results).await?;
    }

    // 4. The batch's tally, last, so its row lock is held only until the commit.
    activity::add(&mut tx, &tally(outcomes.iter().zip(&results))).await?;

    tx.commit().await.map_err(db_error)?;
    Ok(results)
}

/// Step 3: locks the endpoints `$1` in id order and reads their dead-letter counts.
const LOCK_COUNTS: &str = "SELECT id, app_id, consecutive_dead_letters, disabled FROM endpoints
    WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE";

/// Step 3: writes each endpoint's count, and when it changed, whether it is disabled and why.
const WRITE_COUNTS: &str = "UPDATE endpoints e SET
        consecutive_dead_letters = u.count,
        disabled = u.disabled,
        disabled_reason = CASE WHEN u.changed_at IS NULL THEN e.disabled_reason
                               ELSE u.reason END,
        updated_at = CASE WHEN u.changed_at IS NULL THEN e.updated_at
                          ELSE GREATEST(u.changed_at,
                                        e.updated_at + interval '1 microsecond') END
    FROM UNNEST($1::text[], $2::int[], $3::bool[], $4::timestamptz[], $5::text[])
        AS u (id, count, disabled, changed_at, reason)
    WHERE e.id = u.id";

/// Step 3: moves the pending deliveries that hold no lease of the endpoints `$1` to `held`, each
/// endpoint's at `$2`.
const HOLD: &str = "WITH c AS (
        SELECT h.held_id, u.at AS held_at
        FROM UNNEST($1::text[], $2::timestamptz[]) AS u (endpoint_id, at)
        CROSS JOIN LATERAL (
            SELECT id AS held_id FROM deliveries
            WHERE endpoint_id = u.endpoint_id AND status = 'pending' AND lease_token IS NULL
            FOR UPDATE SKIP LOCKED) h)
    UPDATE deliveries d SET status = 'held', updated_at = c.held_at
    FROM c WHERE d.id = c.held_id AND d.lease_token IS NULL";

/// An endpoint's dead-letter bookkeeping, as locked and then as replayed through the batch.
#[derive(sqlx::FromRow)]
struct CountRow {
    id: String,
    app_id: String,
    consecutive_dead_letters: i32,
    disabled: bool,
}

/// Step 3 of [`record`]: for each endpoint in `events` (all with at least one dead-letter), lock
/// it, replay its events in order, write the count back, disable it when due, and hold its
/// pending deliveries that hold no lease. Marks in `results` the outcome that disabled it.
async fn count_dead_letters(
    tx: &mut Transaction<'static, Postgres>,
    events: BTreeMap<String, Vec<Counted>>,
    disable_after: u32,
    results: &mut [Recorded],
) -> StoreResult<()> {
    let endpoint_ids: Vec<&str> = events.keys().map(String::as_str).collect();
    let rows = sqlx::query_as::<_, CountRow>(LOCK_COUNTS)
        .bind(&endpoint_ids)
        .fetch_all(&mut **tx)
        .await
        .map_err(db_error)?;

    let mut ids = Vec::new();
    let mut counts = Vec::new();
    let mut disabled = Vec::new();
    let mut changed_at = Vec::new();
    let mut reasons: Vec<Option<String>> = Vec::new();
    // Endpoints to sweep into `held`, with the time of the dead-letter that disabled them.
    let mut hold_ids = Vec::new();
    let mut hold_at = Vec::new();
    // One note per dead-letter, for the rate alert.
    let (mut noted, mut noted_apps, mut noted_at) = (Vec::new(), Vec::new(), Vec::new());
    for row in rows {
        // A missing endpoint was deleted, and its deliveries with it: nothing to count.
        let Some(evs) = events.get(&row.id) else {
            continue;
        };
        let mut health = EndpointHealth {
            consecutive_dead_letters: u32::try_from(row.consecutive_dead_letters).map_err(
                |_| {
                    corrupt(format!(
                        "endpoints.consecutive_dead_letters is negative: {}",
                        row.consecutive_dead_letters
                    ))
                },
            )?,
            disabled: row.disabled,
        };
        let mut last_change = None;
        let mut reason = None;
        for &(i, event, now) in evs {
            if let CountEvent::DeadLetter { .. } = event {
                noted.push(row.id.clone());
                noted_apps.push(row.app_id.clone());
                noted_at.push(now);
            }
            if health.record(event, disable_after) {
                last_change = Some(now);
                reason = Some(event.disable_reason(disable_after));
                results[i] = Recorded::Stored {
                    endpoint_disabled: true,
                };
            }
        }
        ids.push(row.id.clone());
        counts.push(convert::int_param(health.consecutive_dead_letters));
        disabled.push(health.disabled);
        changed_at.push(last_change);
        reasons.push(reason);
        if let Some(at) = last_change {
            hold_ids.push(row.id);
            hold_at.push(at);
        }
    }

    sqlx::query(WRITE_COUNTS)
        .bind(&ids)
        .bind(&counts)
        .bind(&disabled)
        .bind(&changed_at)
        .bind(&reasons)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;

    if !hold_ids.is_empty() {
        // Only rows that hold no lease: a leased one (even with an expired lease, whose worker
        // may still record) comes back through its worker, which claims it with
        // `disabled: true` and records `Hold`. For the same reason rows another transaction has
        // locked (being claimed, resent or replayed right now) are skipped, not waited for.
        sqlx::query(HOLD)
            .bind(&hold_ids)
            .bind(&hold_at)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
    }
    dead_letters::note(tx, &noted, &noted_apps, &noted_at).await
}

#[async_trait]
impl DeliveryOutcomes for PgStore {
    async fn record_attempts(
        &self,
        outcomes: Vec<AttemptOutcome>,
        disable_after: u32,
    ) -> StoreResult<Vec<Recorded>> {
        record(&self.pool, outcomes, disable_after).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kept_plans::tests::off_index_reads;

    /// On an empty store, where a kept plan goes wrong: every statement a record may run reads
    /// each table by an index condition and joins by nested loops.
    #[tokio::test]
    async fn the_records_kept_plans_read_by_index_conditions_only() {
        let (store, _url) = crate::testing::fresh_store().await;
        let mut conn = store.conn().await.unwrap();
        let statements = [
            ("lock", LOCK, "text[]", "'{a}'"),
            (
                "write",
                WRITE,
                "text[], text[], text[], text[], text[], timestamptz[], text[], int[], text[], \
                 bigint[], bool[], text[], text[], text[], text[], timestamptz[], int[], \
                 bool[], int[], text[], timestamptz[], text[]",
                "'{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', \
                 '{a}', '{delivered}', '{}', '{}', '{t}', '{}', '{}', '{}', '{}'",
            ),
            ("lock counts", LOCK_COUNTS, "text[]", "'{a}'"),
            (
                "write counts",
                WRITE_COUNTS,
                "text[], int[], bool[], timestamptz[], text[]",
                "'{a}', '{1}', '{f}', '{NULL}', '{NULL}'",
            ),
            ("hold", HOLD, "text[], timestamptz[]", "'{a}', ARRAY[now()]"),
            (
                "activity",
                activity::ADD,
                "timestamptz[], bigint[], bigint[], bigint[], bigint[], bigint[], float8",
                "ARRAY[now()], '{1}', '{0}', '{1}', '{0}', '{0}', 4",
            ),
        ];
        for (name, sql, types, args) in statements {
            let (off, plan) = off_index_reads(&mut conn, sql, types, args).await;
            assert_eq!(off, Vec::<String>::new(), "{name}: {plan}");
        }
    }
}
