//! Bulk replays of a source's dead letters (`vow_store::inbound::source_replay`), in batches
//! of [`BATCH`] events by id (pick them, requeue their forwards, make them due: one job, so
//! no worker claims an event in between), then a count of what was skipped. Without an
//! `Idempotency-Key` each batch is its own writer job, so SQLite's one writer is free for
//! ingest between them (100,000 dead letters in one job held it for 2.4 s in a debug build).
//! With a key, the batches run in one job: the key is claimed in the write's transaction, and
//! a key that has a record rolls the whole write back. Picking by id after the last batch, a
//! forward that fails again meanwhile is not taken twice. Progress is read by
//! `inbound_forwards.replay_id`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{params, Connection};
use vow_core::{ReplayId, SourceId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::source_replay::{
    replayable_states, replayed_outcomes, requeued, SourceReplayFilter, SourceReplayStats,
    SourceReplayed, SourceReplays,
};
use vow_store::StoreResult;

use super::forwards::{destination_key, unknown};
use crate::convert::{micros, to_json};
use crate::error::Result;
use crate::idempotency::keyed;
use crate::SqliteStore;
use vow_store::inbound::processing::Outcome;

/// `'a', 'b'`: static names as an SQL list.
fn names<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = names.into_iter().map(|n| format!("'{n}'")).collect();
    quoted.join(", ")
}

/// The forwards (`f`) of the source's events (`e`) that `filter` picks, of events a replay
/// takes (`taken`) or of those it skips: a condition over `f` with parameters ?1 (source),
/// ?2 (since), ?3 (until), ?4 (destination).
fn matching(taken: bool) -> String {
    let outcomes = names(replayed_outcomes().iter().map(|o| o.as_str()));
    let states = names(replayable_states().iter().map(|s| s.as_str()));
    let not = if taken { "" } else { "NOT" };
    format!(
        "f.outcome IN ({outcomes}) AND (?4 IS NULL OR f.destination = ?4)
         AND f.event_id IN (SELECT e.id FROM inbound_events e WHERE e.source_id = ?1
             AND (?2 IS NULL OR e.received_at >= ?2) AND (?3 IS NULL OR e.received_at < ?3)
             AND e.state {not} IN ({states}))"
    )
}

/// The parameters ?1 to ?4 of [`matching`].
fn filter_params(source: SourceId, filter: &SourceReplayFilter) -> [Value; 4] {
    let time = |t: Option<DateTime<Utc>>| t.map_or(Value::Null, |t| Value::Integer(micros(t)));
    [
        Value::Text(source.to_string()),
        time(filter.since),
        time(filter.until),
        filter
            .destination
            .map_or(Value::Null, |d| Value::Text(destination_key(Some(&d)))),
    ]
}

/// How many forwards `filter` picks of events a replay takes (`taken`) or skips.
fn count(
    conn: &Connection,
    source: SourceId,
    filter: &SourceReplayFilter,
    taken: bool,
) -> Result<u64> {
    let sql = format!(
        "SELECT count(*) FROM inbound_forwards f WHERE {}",
        matching(taken)
    );
    let params = filter_params(source, filter);
    let n: i64 = conn
        .prepare_cached(&sql)?
        .query_row(rusqlite::params_from_iter(params.iter()), |r| r.get(0))?;
    Ok(n as u64)
}

/// Events a replay requeues per writer job: each job holds the writer for tens of
/// milliseconds, so ingest and the workers' writes go on between them.
const BATCH: i64 = 2_000;

/// Requeues, as replay `id` at `now`, what `filter` picks of the next [`BATCH`] events after
/// `after` (by id); the forwards requeued, and the last event taken when there may be more.
fn replay_batch(
    conn: &Connection,
    source: SourceId,
    id: ReplayId,
    filter: &SourceReplayFilter,
    now: DateTime<Utc>,
    after: Option<String>,
) -> Result<(u64, Option<String>)> {
    let outcomes = names(replayed_outcomes().iter().map(|o| o.as_str()));
    let states = names(replayable_states().iter().map(|s| s.as_str()));
    let pick = format!(
        "SELECT e.id FROM inbound_events e WHERE e.source_id = ?1
             AND (?2 IS NULL OR e.received_at >= ?2) AND (?3 IS NULL OR e.received_at < ?3)
             AND e.state IN ({states}) AND (?5 IS NULL OR e.id > ?5)
             AND EXISTS (SELECT 1 FROM inbound_forwards f WHERE f.event_id = e.id
                 AND f.outcome IN ({outcomes}) AND (?4 IS NULL OR f.destination = ?4))
         ORDER BY e.id LIMIT ?6"
    );
    let [a, b, c, d] = filter_params(source, filter);
    let events: Vec<String> = conn
        .prepare_cached(&pick)?
        .query_map(params![a, b, c, d, after, BATCH], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let Some(last) = events.last().cloned() else {
        return Ok((0, None));
    };
    let events = to_json(&events)?;
    let (outcome, state) = requeued();
    let requeued = conn
        .prepare_cached(&format!(
            "UPDATE inbound_forwards SET outcome = ?2, replay_id = ?3, updated_at = ?4
             WHERE event_id IN (SELECT value FROM json_each(?1))
                 AND outcome IN ({outcomes}) AND (?5 IS NULL OR destination = ?5)"
        ))?
        .execute(params![
            events,
            outcome.as_str(),
            id.to_string(),
            micros(now),
            d
        ])?;
    conn.prepare_cached(
        "UPDATE inbound_events SET state = ?2, attempts = 0, next_attempt_at = ?3,
             lease_token = NULL, lease_until = NULL, claimed_by = NULL, updated_at = ?3
         WHERE id IN (SELECT value FROM json_each(?1))",
    )?
    .execute(params![events, state.as_str(), micros(now)])?;
    Ok((requeued as u64, Some(last)))
}

fn stats(conn: &Connection, source: SourceId, id: ReplayId) -> Result<SourceReplayStats> {
    let mut stmt = conn.prepare_cached(
        "SELECT f.outcome, e.state = 'processing', count(*)
         FROM inbound_forwards f JOIN inbound_events e ON e.id = f.event_id
         WHERE f.replay_id = ?2 AND e.source_id = ?1
         GROUP BY f.outcome, e.state = 'processing'",
    )?;
    let mut rows = stmt.query(params![source.to_string(), id.to_string()])?;
    let mut stats = SourceReplayStats::default();
    while let Some(row) = rows.next()? {
        let name: String = row.get(0)?;
        let outcome = Outcome::parse(&name).ok_or_else(|| unknown(0, name))?;
        let n: i64 = row.get(2)?;
        stats.add(outcome, row.get(1)?, n as u64);
    }
    Ok(stats)
}

#[async_trait]
impl SourceReplays for SqliteStore {
    async fn replay_source_keyed(
        &self,
        source: SourceId,
        id: ReplayId,
        filter: &SourceReplayFilter,
        now: DateTime<Utc>,
        completion: Option<Completion<SourceReplayed>>,
    ) -> StoreResult<Applied<SourceReplayed>> {
        let filter = *filter;
        let batches = move |c: &Connection, requeued: &mut u64, after: &mut Option<String>| {
            let (n, last) = replay_batch(c, source, id, &filter, now, after.take())?;
            *requeued += n;
            *after = last;
            Ok::<_, crate::error::Error>(after.is_some())
        };
        let done = move |c: &Connection, requeued: u64| {
            let skipped = count(c, source, &filter, false)?;
            Ok(SourceReplayed { requeued, skipped })
        };
        if completion.is_some() {
            // The key may be claimed in this job (and refused, rolling it back): all in one.
            let all = move |c: &Connection| {
                let (mut requeued, mut after) = (0, None);
                while batches(c, &mut requeued, &mut after)? {}
                done(c, requeued)
            };
            return self.write(move |c| keyed(c, completion, all)).await;
        }
        let (mut requeued, mut after) = (0, None);
        loop {
            let (n, last) = self
                .write(move |c| {
                    let (mut n, mut last) = (0, after);
                    batches(c, &mut n, &mut last)?;
                    Ok((n, last))
                })
                .await?;
            requeued += n;
            after = last;
            if after.is_none() {
                break;
            }
        }
        let replayed = self.write(move |c| done(c, requeued)).await?;
        Ok((replayed, None))
    }

    async fn count_source_replay(
        &self,
        source: SourceId,
        filter: &SourceReplayFilter,
    ) -> StoreResult<SourceReplayed> {
        let filter = *filter;
        self.read(move |c| {
            Ok(SourceReplayed {
                requeued: count(c, source, &filter, true)?,
                skipped: count(c, source, &filter, false)?,
            })
        })
        .await
    }

    async fn source_replay_stats(
        &self,
        source: SourceId,
        id: ReplayId,
    ) -> StoreResult<SourceReplayStats> {
        self.read(move |c| stats(c, source, id)).await
    }
}
