//! Processing inbound events (`vow_store::inbound::processing`): claims under leases, each
//! destination's outcome in `inbound_forwards`, the version marks in `inbound_entities`, and
//! operators' decisions. Every function runs inside one writer job, so one transaction
//! serialised with every other write: a claim and the marks it reads cannot race.

use std::collections::{HashMap, HashSet};

use crate::idempotency::keyed;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use vow_core::{DestinationId, InboundEventId, SourceId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::decisions::{self, Decided, Decision};
use vow_store::inbound::processing::Resolution;
use vow_store::inbound::processing::{
    aggregate, ClaimedEvent, Consumer, LeaseToken, WorkClaim, WorkOutcome, WorkRecorded,
    WorkRequest,
};
use vow_store::inbound::{Destination, InboundContent, InboundEvent, InboundState, Source};
use vow_store::inbound::{InboundDecisions, InboundWork};
use vow_store::rows::Columns;
use vow_store::rules::lease::{lease_until, SETTLED_PER_CLAIM};
use vow_store::rules::recording::{self, Attempt, Recording, Stored};
use vow_store::rules::supersede::{self, Candidate, Mark, Turn};
use vow_store::StoreError;
use vow_store::StoreResult;

use super::events::{with_content, COLUMNS};
use super::forwards::{destination_key, forwards, put_forward, unknown, PULL};
use super::sources;
use crate::convert::{micros, read, SqliteColumns};
use crate::error::Result;
use crate::SqliteStore;

/// Ends `event`'s lease and moves it to `state` (due at `due`); `last_error` replaces the stored
/// one unless `None`.
fn end(
    conn: &Connection,
    event: InboundEventId,
    state: InboundState,
    due: Option<DateTime<Utc>>,
    last_error: Option<Option<&str>>,
    now: DateTime<Utc>,
) -> Result<InboundEvent> {
    let sql = format!(
        "UPDATE inbound_events SET state = ?2, lease_token = NULL, lease_until = NULL,
             claimed_by = NULL, next_attempt_at = ?3,
             last_error = CASE WHEN ?4 THEN ?5 ELSE last_error END, updated_at = ?6
         WHERE id = ?1 RETURNING {COLUMNS}"
    );
    Ok(conn.prepare_cached(&sql)?.query_row(
        params![
            event.to_string(),
            state.as_str(),
            due.map(micros),
            last_error.is_some(),
            last_error.flatten(),
            micros(now),
        ],
        read,
    )?)
}

/// Writes what [`recording`] decided for `event` at `now`; the event as it now stands.
fn write(
    conn: &Connection,
    event: InboundEventId,
    recorded: Recording<Option<DestinationId>>,
    now: DateTime<Utc>,
) -> Result<InboundEvent> {
    for a in &recorded.attempts {
        let error = a.error.as_deref();
        put_forward(conn, event, a.destination, a.outcome, a.status, error, now)?;
    }
    let mut dead_letter = conn.prepare_cached(
        "UPDATE inbound_forwards SET outcome = 'dead_lettered', updated_at = ?3
         WHERE event_id = ?1 AND destination = ?2",
    )?;
    for destination in &recorded.dead_lettered {
        let key = destination_key(destination.as_ref());
        dead_letter.execute(params![event.to_string(), key, micros(now)])?;
    }
    let last_error = Some(recorded.last_error.as_deref());
    end(conn, event, recorded.state, recorded.due, last_error, now)
}

/// The stored outcomes of `event`.
fn stored(conn: &Connection, event: InboundEventId) -> Result<Vec<Stored<Option<DestinationId>>>> {
    Ok(forwards(conn, event)?
        .into_iter()
        .map(Stored::from)
        .collect())
}

/// Sources by id, read once per claim.
struct Sources<'c> {
    conn: &'c Connection,
    seen: HashMap<SourceId, Option<Source>>,
}

impl<'c> Sources<'c> {
    fn new(conn: &'c Connection) -> Self {
        Self {
            conn,
            seen: HashMap::new(),
        }
    }

    /// The destinations of `id` (none when it is gone).
    fn destinations(&mut self, id: SourceId) -> Result<Vec<Destination>> {
        if !self.seen.contains_key(&id) {
            let source = sources::get(self.conn, id)?;
            self.seen.insert(id, source);
        }
        Ok(self.seen[&id]
            .as_ref()
            .map(|s| s.fields.destinations.clone())
            .unwrap_or_default())
    }
}

/// The destinations of `event` that have no final outcome yet.
fn pending(
    conn: &Connection,
    sources: &mut Sources<'_>,
    event: &InboundEvent,
) -> Result<Vec<Destination>> {
    let done: HashSet<Option<DestinationId>> = forwards(conn, event.id)?
        .into_iter()
        .filter(|f| f.outcome.is_final())
        .map(|f| f.destination)
        .collect();
    Ok(sources
        .destinations(event.source_id)?
        .into_iter()
        .filter(|d| !done.contains(&Some(d.id)))
        .collect())
}

/// Settles the events whose lease ran out (see the module docs of `processing`).
fn settle_expired(
    conn: &Connection,
    sources: &mut Sources<'_>,
    request: &WorkRequest,
) -> Result<Vec<InboundEvent>> {
    let sql = format!(
        "SELECT {COLUMNS}, claimed_by FROM inbound_events
         WHERE state = 'processing' AND lease_until <= ?1 ORDER BY lease_until, id LIMIT ?2"
    );
    let expired: Vec<(InboundEvent, Option<String>)> = conn
        .prepare_cached(&sql)?
        .query_map(params![micros(request.now), SETTLED_PER_CLAIM], |row| {
            Ok((read(row)?, row.get(16)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut settled = Vec::with_capacity(expired.len());
    for (event, claimed_by) in expired {
        let owed: Vec<(Option<DestinationId>, bool)> = match claimed_by.as_deref() {
            Some(PULL) => vec![(None, false)],
            _ => sources
                .destinations(event.source_id)?
                .into_iter()
                .map(|d| (Some(d.id), d.idempotent))
                .collect(),
        };
        let stored = stored(conn, event.id)?;
        let (attempts, max) = (event.attempts, request.max_attempts);
        let recorded = recording::expire(&stored, owed, attempts, max, request.now);
        settled.push(write(conn, event.id, recorded, request.now)?);
    }
    Ok(settled)
}

/// The due events a claim considers, oldest due first, with their content.
fn candidates(
    conn: &Connection,
    request: &WorkRequest,
) -> Result<Vec<(InboundEvent, Option<InboundContent>)>> {
    let (filter, pull_source) = match request.consumer {
        Consumer::Push => (PUSHED, None),
        // Only while the source has no destinations, which vow's workers would forward to.
        Consumer::Pull(source) => (
            "source_id = ?3 AND source_id IN (SELECT id FROM sources WHERE destinations = '[]')",
            Some(source.to_string()),
        ),
    };
    let sql = format!(
        "SELECT {COLUMNS}, headers, payload FROM inbound_events e
         WHERE state IN ('received', 'retryable') AND next_attempt_at <= ?1 AND {filter}
           AND {ENTITY_FREE}
         ORDER BY next_attempt_at, id LIMIT ?2"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let map = with_content;
    let rows = match pull_source {
        None => stmt.query_map(params![micros(request.now), request.limit], map)?,
        Some(source) => stmt.query_map(params![micros(request.now), request.limit, source], map)?,
    };
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The entity's mark: (version, the event that set it).
fn mark(conn: &Connection, source: SourceId, entity: &str) -> Result<Option<(String, String)>> {
    Ok(conn
        .prepare_cached(
            "SELECT version, event_id FROM inbound_entities WHERE source_id = ?1 AND entity = ?2",
        )?
        .query_row(params![source.to_string(), entity], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?)
}

fn set_mark(
    conn: &Connection,
    event: &InboundEvent,
    entity: &str,
    version: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO inbound_entities (source_id, entity, version, event_id, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (source_id, entity) DO UPDATE SET version = excluded.version,
             event_id = excluded.event_id, updated_at = excluded.updated_at",
    )?
    .execute(params![
        event.source_id.to_string(),
        entity,
        version,
        event.id.to_string(),
        micros(now),
    ])?;
    Ok(())
}

fn supersede(
    conn: &Connection,
    event: InboundEventId,
    note: &str,
    now: DateTime<Utc>,
) -> Result<InboundEvent> {
    let sql = format!(
        "UPDATE inbound_events SET state = 'superseded', last_error = ?2, next_attempt_at = NULL,
             updated_at = ?3 WHERE id = ?1 RETURNING {COLUMNS}"
    );
    Ok(conn
        .prepare_cached(&sql)?
        .query_row(params![event.to_string(), note, micros(now)], read)?)
}

/// Leases `event` to the claimer.
fn lease(
    conn: &Connection,
    event: InboundEventId,
    request: &WorkRequest,
) -> Result<(InboundEvent, LeaseToken, DateTime<Utc>)> {
    let token = LeaseToken::fresh();
    let until = lease_until(request.now, request.lease);
    let sql = format!(
        "UPDATE inbound_events SET state = 'processing', lease_token = ?2, lease_until = ?3,
             attempts = attempts + 1, claimed_by = ?4, next_attempt_at = NULL, updated_at = ?5
         WHERE id = ?1 RETURNING {COLUMNS}"
    );
    let leased = conn.prepare_cached(&sql)?.query_row(
        params![
            event.to_string(),
            token.0,
            micros(until),
            request.consumer.as_str(),
            micros(request.now),
        ],
        read,
    )?;
    Ok((leased, token, until))
}

/// `vow_store::inbound::InboundWork::claim_inbound_work`.
pub(crate) fn claim(conn: &Connection, request: &WorkRequest) -> Result<WorkClaim> {
    let mut sources = Sources::new(conn);
    let mut work = WorkClaim {
        expired: settle_expired(conn, &mut sources, request)?,
        ..WorkClaim::default()
    };
    let candidates = candidates(conn, request)?;
    let turns = turns(conn, &candidates)?;
    for ((event, content), turn) in candidates.into_iter().zip(turns) {
        match turn {
            Turn::Wait => continue,
            Turn::Supersede(note) => {
                work.superseded
                    .push(supersede(conn, event.id, &note, request.now)?);
                continue;
            }
            Turn::Take { moves_mark } => {
                if let (true, Some(entity), Some(version)) =
                    (moves_mark, &event.entity, &event.version)
                {
                    set_mark(conn, &event, entity, version, request.now)?;
                }
            }
        }
        let (event, lease, lease_until) = lease(conn, event.id, request)?;
        let pending = match request.consumer {
            Consumer::Push => pending(conn, &mut sources, &event)?,
            Consumer::Pull(_) => Vec::new(),
        };
        work.claimed.push(ClaimedEvent {
            event,
            content,
            lease,
            lease_until,
            pending,
        });
    }
    Ok(work)
}

/// The turn of each candidate, in order: per entity, [`supersede::turns`] under its mark; one
/// without an entity and a version is taken.
fn turns(
    conn: &Connection,
    candidates: &[(InboundEvent, Option<InboundContent>)],
) -> Result<Vec<Turn>> {
    let ids: Vec<String> = candidates.iter().map(|(e, _)| e.id.to_string()).collect();
    let entities = supersede::by_entity(candidates, |(event, _)| {
        match (&event.entity, &event.version) {
            (Some(entity), Some(_)) => Some((event.source_id, entity.as_str())),
            _ => None,
        }
    });
    let mut turns = vec![Turn::Take { moves_mark: false }; candidates.len()];
    for ((source, entity), group) in entities {
        let marked = mark(conn, source, entity)?;
        let mark = marked
            .as_ref()
            .map(|(version, event)| Mark { version, event });
        let of_entity: Vec<Candidate<'_>> = group
            .iter()
            .map(|&i| Candidate {
                event: &ids[i],
                version: candidates[i].0.version.as_deref().unwrap_or_default(),
            })
            .collect();
        for (i, turn) in group.into_iter().zip(supersede::turns(mark, &of_entity)) {
            turns[i] = turn;
        }
    }
    Ok(turns)
}

/// `vow_store::inbound::InboundWork::record_inbound_work`.
pub(crate) fn record(conn: &Connection, outcome: WorkOutcome) -> Result<WorkRecorded> {
    let held = conn
        .prepare_cached(
            "SELECT 1 FROM inbound_events WHERE id = ?1 AND state = 'processing' AND lease_token = ?2",
        )?
        .query_row(params![outcome.event.to_string(), outcome.lease.0], |_| Ok(()))
        .optional()?;
    if held.is_none() {
        return Ok(WorkRecorded::LeaseLost);
    }
    let reports = outcome.results.into_iter();
    let reports = reports.map(|r| Attempt::reported(r, |d| d)).collect();
    let stored = stored(conn, outcome.event)?;
    let recorded = recording::record(&stored, reports, outcome.next);
    let event = write(conn, outcome.event, recorded, outcome.now)?;
    Ok(WorkRecorded::Stored(Box::new(event)))
}

/// `vow_store::inbound::InboundWork::renew_inbound_leases`.
pub(crate) fn renew(
    conn: &Connection,
    leases: &[(InboundEventId, LeaseToken)],
    until: DateTime<Utc>,
) -> Result<usize> {
    let mut stmt = conn.prepare_cached(
        "UPDATE inbound_events SET lease_until = ?3
         WHERE id = ?1 AND lease_token = ?2 AND state = 'processing'",
    )?;
    let mut kept = 0;
    for (id, token) in leases {
        kept += stmt.execute(params![id.to_string(), token.0, micros(until)])?;
    }
    Ok(kept)
}

/// Events of sources that vow's workers forward.
const PUSHED: &str = "source_id IN (SELECT id FROM sources WHERE destinations <> '[]')";

/// That no other versioned event of the entity of `e` (an event with an entity and a version)
/// is being processed.
const ENTITY_FREE: &str = "(entity IS NULL OR version IS NULL OR NOT EXISTS (
    SELECT 1 FROM inbound_events p WHERE p.source_id = e.source_id
      AND p.entity = e.entity AND p.state = 'processing' AND p.version IS NOT NULL))";

/// `vow_store::inbound::InboundWork::next_inbound_due`: the first due event of a pushed source
/// whose entity is not busy, or the end of the first lease of such a source (its settling may
/// make the event due at once).
pub(crate) fn next_due(conn: &Connection) -> Result<Option<DateTime<Utc>>> {
    let sql = format!(
        "SELECT MIN(due) FROM (
             SELECT * FROM (SELECT next_attempt_at AS due FROM inbound_events e
                 WHERE state IN ('received', 'retryable') AND {PUSHED} AND {ENTITY_FREE}
                 ORDER BY next_attempt_at LIMIT 1)
             UNION ALL
             SELECT * FROM (SELECT lease_until AS due FROM inbound_events
                 WHERE state = 'processing' AND {PUSHED} ORDER BY lease_until LIMIT 1))"
    );
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([], |row| SqliteColumns(row).opt_time(0))?)
}

/// The state of `source`'s event `id`; `NotFound("inbound event")` when absent.
fn state_of(conn: &Connection, source: SourceId, id: InboundEventId) -> Result<InboundState> {
    let state: Option<String> = conn
        .prepare_cached("SELECT state FROM inbound_events WHERE source_id = ?1 AND id = ?2")?
        .query_row([source.to_string(), id.to_string()], |r| r.get(0))
        .optional()?;
    let state = state.ok_or(StoreError::NotFound("inbound event"))?;
    Ok(InboundState::parse(&state).ok_or_else(|| unknown(0, state))?)
}

/// `vow_store::inbound::InboundDecisions::resolve_uncertain` and `replay_inbound`: the forwards
/// [`decisions::targets`] names get the decision's outcome (a replay takes them from a bulk
/// replay's count), the event its aggregate (due at `now` when retryable, with fresh attempts
/// when forwarded again).
pub(crate) fn decide(
    conn: &Connection,
    source: SourceId,
    id: InboundEventId,
    decision: Decision,
    only: Option<DestinationId>,
    now: DateTime<Utc>,
) -> Result<Decided> {
    let state = state_of(conn, source, id)?;
    let targets = decisions::targets(state, decision, &forwards(conn, id)?, only)?;
    let mut rewrite = conn.prepare_cached(
        "UPDATE inbound_forwards SET outcome = ?3, updated_at = ?4,
             replay_id = CASE WHEN ?5 THEN NULL ELSE replay_id END
         WHERE event_id = ?1 AND destination = ?2",
    )?;
    for destination in &targets {
        rewrite.execute(params![
            id.to_string(),
            destination_key(destination.as_ref()),
            decision.outcome().as_str(),
            micros(now),
            decision == Decision::Replay,
        ])?;
    }
    if decision.resets_attempts() {
        conn.prepare_cached("UPDATE inbound_events SET attempts = 0 WHERE id = ?1")?
            .execute([id.to_string()])?;
    }
    let all = forwards(conn, id)?;
    let state = aggregate(all.iter().map(|f| f.outcome));
    let due = (state == InboundState::Retryable).then_some(now);
    let event = end(conn, id, state, due, None, now)?;
    let changed = all
        .into_iter()
        .filter(|f| targets.contains(&f.destination))
        .collect();
    Ok(Decided { event, changed })
}

#[async_trait]
impl InboundWork for SqliteStore {
    async fn claim_inbound_work_keyed(
        &self,
        request: &WorkRequest,
        completion: Option<Completion<WorkClaim>>,
    ) -> StoreResult<Applied<WorkClaim>> {
        let request = request.clone();
        self.write(move |c| keyed(c, completion, |c| claim(c, &request)))
            .await
    }

    async fn record_inbound_work(&self, outcome: WorkOutcome) -> StoreResult<WorkRecorded> {
        self.write(move |c| record(c, outcome)).await
    }

    async fn record_inbound_work_keyed(
        &self,
        outcome: WorkOutcome,
        completion: Option<Completion<InboundEvent>>,
    ) -> StoreResult<Applied<InboundEvent>> {
        let recorded = move |c: &Connection| Ok(record(c, outcome)?.into_event()?);
        self.write(move |c| keyed(c, completion, recorded)).await
    }

    async fn renew_inbound_leases(
        &self,
        leases: &[(InboundEventId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize> {
        let leases = leases.to_vec();
        self.write(move |c| renew(c, &leases, until)).await
    }

    async fn next_inbound_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        self.read(next_due).await
    }
}

#[async_trait]
impl InboundDecisions for SqliteStore {
    async fn resolve_uncertain_keyed(
        &self,
        source: SourceId,
        id: InboundEventId,
        resolution: Resolution,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
        completion: Option<Completion<Decided>>,
    ) -> StoreResult<Applied<Decided>> {
        let decision = Decision::Resolve(resolution);
        let decided = move |c: &Connection| decide(c, source, id, decision, destination, now);
        self.write(move |c| keyed(c, completion, decided)).await
    }

    async fn replay_inbound_keyed(
        &self,
        source: SourceId,
        id: InboundEventId,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
        completion: Option<Completion<Decided>>,
    ) -> StoreResult<Applied<Decided>> {
        let decided =
            move |c: &Connection| decide(c, source, id, Decision::Replay, destination, now);
        self.write(move |c| keyed(c, completion, decided)).await
    }
}
