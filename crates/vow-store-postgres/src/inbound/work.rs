//! Processing inbound events ([`vow_store::inbound::processing`]): claims under leases,
//! recording outcomes and renewing leases (operators' decisions are in `operators`). Several
//! processes may claim at once; every write is one transaction (READ COMMITTED): the caller's,
//! so that a keyed API write completes its idempotency record in it
//! (`crate::idempotency::apply`).
//!
//! A claim is ONE transaction:
//! 1. settle: lock up to [`SETTLED_PER_CLAIM`] `processing` events whose lease ran out
//!    (`FOR UPDATE SKIP LOCKED`) and write what [`vow_store::rules::recording::expire`] decides
//!    for each (every destination still owed it `uncertain`, or `retryable` when idempotent;
//!    the event the aggregate of its outcomes);
//! 2. pick: lock the due candidates of the consumer (`FOR UPDATE OF e SKIP LOCKED`, oldest due
//!    first, leaving out entities with an event in `processing`);
//! 3. decide, per entity of the candidates with an entity and a version (entities in one fixed
//!    order, so two claims never wait for each other in a cycle): take the entity's row in
//!    `inbound_entities` (insert it if new, then `SELECT … FOR UPDATE`), check again under that
//!    lock that no event of the entity is `processing`, then go through its candidates,
//!    earliest due first: each not newer than the mark is superseded, the first that is newer
//!    (or holds the mark already) is taken and moves the mark, and the rest wait for a later
//!    claim;
//! 4. supersede and claim (one statement each), and read which destinations are still owed.

use std::collections::HashMap;

use crate::idempotency::{keyed, step};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool};
use vow_core::{DestinationId, InboundEventId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::processing::{
    ClaimedEvent, Consumer, LeaseToken, WorkClaim, WorkOutcome, WorkRecorded, WorkRequest,
};
use vow_store::inbound::InboundWork;
use vow_store::inbound::{Destination, InboundEvent, InboundState};
use vow_store::rules::lease::{lease_until, SETTLED_PER_CLAIM};
use vow_store::rules::recording::{self, Attempt, Recording, Stored};
use vow_store::rules::supersede::{self, Candidate, Mark, Turn};
use vow_store::StoreResult;

use super::events::{DetailRow, EventRow, COLUMNS};
use super::forwards::{self, destination_key, ForwardColumns, PULL};
use crate::convert;
use crate::error::{corrupt, db_error};
use crate::PgStore;

/// The sources matching `filter` as `s (sid, destinations)`, to join `inbound_events e` with:
/// their column names differ from the events', so the bare names of [`COLUMNS`] can only mean
/// the event's.
fn sources(filter: &str) -> String {
    format!("(SELECT id AS sid, destinations FROM sources WHERE {filter}) s")
}

/// The filter of [`sources`] that vow's workers forward events of.
const WITH_DESTINATIONS: &str = "jsonb_array_length(destinations) > 0";

/// An event of `e` with the destinations of its source and its lease holder.
#[derive(sqlx::FromRow)]
struct SourcedRow {
    #[sqlx(flatten)]
    event: EventRow,
    claimed_by: Option<String>,
    destinations: Json<Vec<Destination>>,
}

/// Where the stored outcomes of some events stand: per event id.
type Known = HashMap<String, Vec<Stored<String>>>;

/// The stored outcomes of the forwards of `events`.
async fn known(conn: &mut PgConnection, events: &[String]) -> StoreResult<Known> {
    let mut known = Known::new();
    for (event, stored) in forwards::outcomes_of(conn, events).await? {
        known.entry(event).or_default().push(stored);
    }
    Ok(known)
}

/// Whether `outcomes` holds a final outcome for `destination`.
fn is_done(outcomes: &[Stored<String>], destination: &str) -> bool {
    outcomes
        .iter()
        .any(|s| s.destination == destination && s.outcome.is_final())
}

/// What [`recording`] decided for some events, to write in two statements.
#[derive(Default)]
struct Recorded {
    forwards: ForwardColumns,
    ends: Ends,
}

impl Recorded {
    fn push(&mut self, id: &str, recorded: Recording<String>) {
        for a in recorded.attempts {
            let key = a.destination;
            self.forwards.push(id, key, a.outcome, a.status, a.error);
        }
        for destination in recorded.dead_lettered {
            self.forwards.dead_letter(id, destination);
        }
        let (state, due) = (recorded.state, recorded.due);
        self.ends
            .push(id.to_string(), state, due, recorded.last_error);
    }

    /// Writes them at `now`; the events, in the order pushed.
    async fn write(
        self,
        conn: &mut PgConnection,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<InboundEvent>> {
        self.forwards.upsert(conn, now).await?;
        self.ends.write(conn, now).await
    }
}

/// New states of events whose processing ended (recorded, settled or superseded), as columns;
/// written with their leases cleared.
#[derive(Default)]
struct Ends {
    id: Vec<String>,
    state: Vec<&'static str>,
    next_attempt_at: Vec<Option<DateTime<Utc>>>,
    last_error: Vec<Option<String>>,
}

impl Ends {
    fn push(
        &mut self,
        id: String,
        state: InboundState,
        next_attempt_at: Option<DateTime<Utc>>,
        last_error: Option<String>,
    ) {
        self.id.push(id);
        self.state.push(state.as_str());
        self.next_attempt_at.push(next_attempt_at);
        self.last_error.push(last_error);
    }

    /// Writes them at `now` in one statement; the events, in the order pushed.
    async fn write(
        self,
        conn: &mut PgConnection,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<InboundEvent>> {
        if self.id.is_empty() {
            return Ok(Vec::new());
        }
        // `u`'s columns are named apart from `inbound_events`'s, so RETURNING's are the row's.
        let rows = sqlx::query_as::<_, EventRow>(&format!(
            "UPDATE inbound_events e SET state = u.new_state, next_attempt_at = u.due,
                 last_error = u.error, lease_token = NULL, lease_until = NULL,
                 claimed_by = NULL, updated_at = $5
             FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::text[])
                 AS u (uid, new_state, due, error)
             WHERE e.id = u.uid
             RETURNING {COLUMNS}"
        ))
        .bind(&self.id)
        .bind(&self.state)
        .bind(&self.next_attempt_at)
        .bind(&self.last_error)
        .bind(now)
        .fetch_all(conn)
        .await
        .map_err(db_error)?;
        in_order(&self.id, rows, |r| &r.id)?
            .into_iter()
            .map(EventRow::into_model)
            .collect()
    }
}

/// `rows` (RETURNING has no order) in the order of `ids`; a missing one is a bug.
fn in_order<R>(ids: &[String], rows: Vec<R>, id: impl Fn(&R) -> &String) -> StoreResult<Vec<R>> {
    let mut by_id: HashMap<String, R> = rows.into_iter().map(|r| (id(&r).clone(), r)).collect();
    ids.iter()
        .map(|i| {
            by_id
                .remove(i)
                .ok_or_else(|| corrupt(format!("inbound event {i} vanished under its lock")))
        })
        .collect()
}

// ---- claim ------------------------------------------------------------------------------------

/// [`vow_store::inbound::InboundWork::claim_inbound_work`] inside the caller's ONE transaction (see the
/// module docs).
pub(crate) async fn claim(conn: &mut PgConnection, req: &WorkRequest) -> StoreResult<WorkClaim> {
    let expired = settle(conn, req).await?;
    let (claimed, superseded) = if req.limit == 0 {
        (Vec::new(), Vec::new())
    } else {
        take(conn, req).await?
    };
    Ok(WorkClaim {
        claimed,
        superseded,
        expired,
    })
}

/// Who held a leased event.
fn holder(row: &SourcedRow) -> StoreResult<&'static str> {
    match row.claimed_by.as_deref() {
        Some("push") => Ok("push"),
        Some(PULL) => Ok(PULL),
        other => Err(corrupt(format!(
            "inbound_events.claimed_by {other:?} on a processing event"
        ))),
    }
}

/// Step 1: settles the events whose lease ran out by `req.now`.
async fn settle(conn: &mut PgConnection, req: &WorkRequest) -> StoreResult<Vec<InboundEvent>> {
    let rows = sqlx::query_as::<_, SourcedRow>(&format!(
        "SELECT {COLUMNS}, claimed_by, s.destinations
         FROM inbound_events e JOIN {} ON s.sid = e.source_id
         WHERE state = 'processing' AND lease_until <= $1
         ORDER BY lease_until, id LIMIT $2
         FOR UPDATE OF e SKIP LOCKED",
        sources("TRUE")
    ))
    .bind(req.now)
    .bind(convert::bigint_param(SETTLED_PER_CLAIM))
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = rows.iter().map(|r| r.event.id.clone()).collect();
    let mut known = known(conn, &ids).await?;
    let mut recorded = Recorded::default();
    for row in &rows {
        let stored = known.remove(&row.event.id).unwrap_or_default();
        let attempts = row.event.attempts;
        // The destinations owed the event, and whether each is idempotent.
        let owed: Vec<(String, bool)> = match holder(row)? {
            PULL => vec![(PULL.to_string(), false)],
            _ => row
                .destinations
                .iter()
                .map(|d| (destination_key(Some(&d.id)), d.idempotent))
                .collect(),
        };
        let settled = recording::expire(&stored, owed, attempts, req.max_attempts, req.now);
        recorded.push(&row.event.id, settled);
    }
    recorded.write(conn, req.now).await
}

/// Steps 2 to 4: claims the due events of `req.consumer`.
async fn take(
    conn: &mut PgConnection,
    req: &WorkRequest,
) -> StoreResult<(Vec<ClaimedEvent>, Vec<InboundEvent>)> {
    let rows = candidates(conn, req).await?;
    let turns = decide_all(conn, &rows, req.now).await?;

    let mut superseded = Ends::default();
    let mut taken: Vec<String> = Vec::new();
    for (row, turn) in rows.iter().zip(turns) {
        match turn {
            Turn::Take { .. } => taken.push(row.event.id.clone()),
            Turn::Supersede(note) => {
                superseded.push(
                    row.event.id.clone(),
                    InboundState::Superseded,
                    None,
                    Some(note),
                );
            }
            Turn::Wait => {}
        }
    }
    let superseded = superseded.write(conn, req.now).await?;
    let claimed = lease(conn, req, &rows, &taken).await?;
    Ok((claimed, superseded))
}

/// Step 2: the due candidates, locked, oldest due first.
async fn candidates(conn: &mut PgConnection, req: &WorkRequest) -> StoreResult<Vec<SourcedRow>> {
    // A pull consumer takes its source's events only while that source has no destinations
    // (which vow's workers would forward to).
    let (filter, pull) = match req.consumer {
        Consumer::Push => (WITH_DESTINATIONS, None),
        Consumer::Pull(source) => (
            "id = $3 AND jsonb_array_length(destinations) = 0",
            Some(source.to_string()),
        ),
    };
    let sql = format!(
        "SELECT {COLUMNS}, claimed_by, s.destinations
         FROM inbound_events e JOIN {} ON s.sid = e.source_id
         WHERE state IN ('received', 'retryable') AND next_attempt_at <= $1
           AND NOT (entity IS NOT NULL AND version IS NOT NULL AND EXISTS (
               SELECT 1 FROM inbound_events o
               WHERE o.source_id = e.source_id AND o.entity = e.entity
                 AND o.state = 'processing' AND o.version IS NOT NULL))
         ORDER BY next_attempt_at, id LIMIT $2
         FOR UPDATE OF e SKIP LOCKED",
        sources(filter)
    );
    let mut query = sqlx::query_as::<_, SourcedRow>(&sql)
        .bind(req.now)
        .bind(convert::bigint_param(req.limit));
    if let Some(source) = pull {
        query = query.bind(source);
    }
    query.fetch_all(conn).await.map_err(db_error)
}

/// The (source, entity) a candidate is ordered by, if it has an entity and a version.
fn ordered_by(event: &EventRow) -> Option<(&str, &str)> {
    match (&event.entity, &event.version) {
        (Some(entity), Some(_)) => Some((&event.source_id, entity)),
        _ => None,
    }
}

/// Step 3 for every candidate, in order (one without an entity and a version is taken).
async fn decide_all(
    conn: &mut PgConnection,
    rows: &[SourcedRow],
    now: DateTime<Utc>,
) -> StoreResult<Vec<Turn>> {
    let mut turns = vec![Turn::Take { moves_mark: false }; rows.len()];
    // Entities are locked in one order in every process, so two claims never wait for each
    // other in a cycle.
    let entities = supersede::by_entity(rows, |row| ordered_by(&row.event));
    for ((source, entity), group) in entities {
        let events: Vec<&EventRow> = group.iter().map(|&i| &rows[i].event).collect();
        let decided = decide(conn, source, entity, &events, now).await?;
        for (i, turn) in group.into_iter().zip(decided) {
            turns[i] = turn;
        }
    }
    Ok(turns)
}

/// Step 3 for the candidates of one entity, earliest due first: their turns
/// ([`supersede::turns`]) under the entity's locked mark; all wait while the entity is busy.
async fn decide(
    conn: &mut PgConnection,
    source: &str,
    entity: &str,
    events: &[&EventRow],
    now: DateTime<Utc>,
) -> StoreResult<Vec<Turn>> {
    let Some(first) = events.first() else {
        return Ok(Vec::new());
    };
    // Take the entity's row: a new entity's mark is the first candidate's (the insert holds the
    // row until commit; a concurrent insert waits for it, then does nothing); an existing one
    // is locked.
    sqlx::query(
        "INSERT INTO inbound_entities (source_id, entity, version, event_id, updated_at)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (source_id, entity) DO NOTHING",
    )
    .bind(source)
    .bind(entity)
    .bind(&first.version)
    .bind(&first.id)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    let (mark, marked_by): (String, String) = sqlx::query_as(
        "SELECT version, event_id FROM inbound_entities
         WHERE source_id = $1 AND entity = $2 FOR UPDATE",
    )
    .bind(source)
    .bind(entity)
    .fetch_one(&mut *conn)
    .await
    .map_err(db_error)?;
    // Under the lock (a fresh snapshot): did another process claim an event of it meanwhile?
    let busy: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM inbound_events
                        WHERE source_id = $1 AND entity = $2 AND state = 'processing'
                          AND version IS NOT NULL)",
    )
    .bind(source)
    .bind(entity)
    .fetch_one(&mut *conn)
    .await
    .map_err(db_error)?;
    if busy {
        return Ok(vec![Turn::Wait; events.len()]);
    }
    let candidates: Vec<Candidate<'_>> = events
        .iter()
        .map(|e| Candidate {
            event: &e.id,
            version: e.version.as_deref().unwrap_or_default(),
        })
        .collect();
    let mark = Mark {
        version: &mark,
        event: &marked_by,
    };
    let turns = supersede::turns(Some(mark), &candidates);
    for (candidate, turn) in candidates.iter().zip(&turns) {
        if *turn != (Turn::Take { moves_mark: true }) {
            continue;
        }
        sqlx::query(
            "UPDATE inbound_entities SET version = $3, event_id = $4, updated_at = $5
             WHERE source_id = $1 AND entity = $2",
        )
        .bind(source)
        .bind(entity)
        .bind(candidate.version)
        .bind(candidate.event)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    }
    Ok(turns)
}

/// Step 4: leases the events `taken` (of `rows`), in the order of `rows`, with their content
/// and, for a push claim, the destinations still owed them.
async fn lease(
    conn: &mut PgConnection,
    req: &WorkRequest,
    rows: &[SourcedRow],
    taken: &[String],
) -> StoreResult<Vec<ClaimedEvent>> {
    if taken.is_empty() {
        return Ok(Vec::new());
    }
    let lease = LeaseToken::fresh();
    let lease_until = lease_until(req.now, req.lease);
    let leased = sqlx::query_as::<_, DetailRow>(&format!(
        "UPDATE inbound_events SET state = 'processing', lease_token = $2, lease_until = $3,
             claimed_by = $4, attempts = attempts + 1, next_attempt_at = NULL, updated_at = $5
         WHERE id = ANY($1)
         RETURNING {COLUMNS}, headers, payload"
    ))
    .bind(taken)
    .bind(&lease.0)
    .bind(lease_until)
    .bind(req.consumer.as_str())
    .bind(req.now)
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?;
    let leased = in_order(taken, leased, |r| &r.event.id)?;
    let mut known = match req.consumer {
        Consumer::Push => known(conn, taken).await?,
        Consumer::Pull(_) => Known::new(),
    };
    let destinations: HashMap<&String, &[Destination]> = rows
        .iter()
        .map(|r| (&r.event.id, r.destinations.as_slice()))
        .collect();

    let mut claimed = Vec::with_capacity(leased.len());
    for row in leased {
        let outcomes = known.remove(&row.event.id).unwrap_or_default();
        let pending = match req.consumer {
            Consumer::Push => destinations
                .get(&row.event.id)
                .copied()
                .unwrap_or_default()
                .iter()
                .filter(|d| !is_done(&outcomes, &destination_key(Some(&d.id))))
                .cloned()
                .collect(),
            Consumer::Pull(_) => Vec::new(),
        };
        let (event, content) = row.into_parts()?;
        claimed.push(ClaimedEvent {
            event,
            content,
            lease: lease.clone(),
            lease_until,
            pending,
        });
    }
    Ok(claimed)
}

// ---- record and renew -------------------------------------------------------------------------

/// [`vow_store::inbound::InboundWork::record_inbound_work`] inside the caller's transaction: the event
/// is locked while its lease is checked, its forwards written, and its state set to their
/// aggregate.
pub(crate) async fn record(
    conn: &mut PgConnection,
    outcome: WorkOutcome,
) -> StoreResult<WorkRecorded> {
    let id = outcome.event.to_string();
    let held: Option<i32> = sqlx::query_scalar(
        "SELECT 1 FROM inbound_events
         WHERE id = $1 AND state = 'processing' AND lease_token = $2 FOR UPDATE",
    )
    .bind(&id)
    .bind(&outcome.lease.0)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?;
    if held.is_none() {
        return Ok(WorkRecorded::LeaseLost);
    }

    let stored = known(conn, std::slice::from_ref(&id))
        .await?
        .remove(&id)
        .unwrap_or_default();
    let key = |d: Option<DestinationId>| destination_key(d.as_ref());
    let reports = outcome.results.into_iter();
    let reports = reports.map(|r| Attempt::reported(r, key)).collect();
    let mut recorded = Recorded::default();
    recorded.push(&id, recording::record(&stored, reports, outcome.next));
    let event = recorded.write(conn, outcome.now).await?.pop();
    event
        .map(|e| WorkRecorded::Stored(Box::new(e)))
        .ok_or_else(|| corrupt("a recorded inbound event vanished"))
}

/// Extends the leases whose token still matches; how many did.
pub(crate) async fn renew(
    pool: &PgPool,
    leases: &[(InboundEventId, LeaseToken)],
    until: DateTime<Utc>,
) -> StoreResult<usize> {
    crate::queue::claim::renew_leases(
        pool,
        "inbound_events",
        "state = 'processing'",
        leases,
        until,
    )
    .await
}

/// The earliest time a push claim could take something: the first due event of a source with
/// destinations whose entity is not busy, or the end of the first lease of such a source (its
/// settling may make the event due at once). An event waiting for its busy entity comes due
/// when that entity's event is recorded (or its lease ends, which is counted).
pub(crate) async fn next_due(pool: &PgPool) -> StoreResult<Option<DateTime<Utc>>> {
    let pushed = sources(WITH_DESTINATIONS);
    sqlx::query_scalar(&format!(
        "SELECT LEAST(
             (SELECT next_attempt_at
              FROM inbound_events e JOIN {pushed} ON s.sid = e.source_id
              WHERE state IN ('received', 'retryable')
                AND NOT (entity IS NOT NULL AND version IS NOT NULL AND EXISTS (
                    SELECT 1 FROM inbound_events o
                    WHERE o.source_id = e.source_id AND o.entity = e.entity
                      AND o.state = 'processing' AND o.version IS NOT NULL))
              ORDER BY next_attempt_at LIMIT 1),
             (SELECT lease_until
              FROM inbound_events e JOIN {pushed} ON s.sid = e.source_id
              WHERE state = 'processing'
              ORDER BY lease_until LIMIT 1))"
    ))
    .fetch_one(pool)
    .await
    .map_err(db_error)
}

#[async_trait]
impl InboundWork for PgStore {
    async fn claim_inbound_work_keyed(
        &self,
        request: &WorkRequest,
        completion: Option<Completion<WorkClaim>>,
    ) -> StoreResult<Applied<WorkClaim>> {
        let request = request.clone();
        let write = step(move |tx| Box::pin(async move { claim(tx, &request).await }));
        keyed(&self.pool, completion, write).await
    }

    async fn record_inbound_work(&self, outcome: WorkOutcome) -> StoreResult<WorkRecorded> {
        in_transaction!(self, |tx| record(&mut tx, outcome).await?)
    }

    async fn record_inbound_work_keyed(
        &self,
        outcome: WorkOutcome,
        completion: Option<Completion<InboundEvent>>,
    ) -> StoreResult<Applied<InboundEvent>> {
        let write =
            step(move |tx| Box::pin(async move { record(tx, outcome).await?.into_event() }));
        keyed(&self.pool, completion, write).await
    }

    async fn renew_inbound_leases(
        &self,
        leases: &[(InboundEventId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize> {
        renew(&self.pool, leases, until).await
    }

    async fn next_inbound_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        next_due(&self.pool).await
    }
}
