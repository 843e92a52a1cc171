//! Inbound events and rejections: the claim (one writer job, so one transaction, serialised
//! with every other write; with a replay guard, `digests` after the insert), operators' decisions
//! on quarantined events, listings and retention.

use crate::idempotency::keyed;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension, Row};
use vow_core::{InboundEventId, SourceId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::claim_target::ClaimTarget;
use vow_store::inbound::InboundEvents;
use vow_store::inbound::{
    Claim, InboundContent, InboundEvent, InboundFilter, InboundState, NewInboundEvent,
    NewRejection, Rejection, RejectionCount, StoredInbound,
};
use vow_store::rows::{event_with_content, FromColumns};
use vow_store::StoreResult;
use vow_store::{Seek, StoreError};

use super::{digests, sources};
use crate::convert::{id, micros, read, seek_sql, to_json, SqliteColumns};
use crate::error::Result;
use crate::SqliteStore;

pub(crate) const COLUMNS: &str = InboundEvent::COLUMNS;

/// Inserts `new` unless the index of `target` already holds its key; the row, if written.
fn insert(
    conn: &Connection,
    new: &NewInboundEvent,
    target: ClaimTarget,
    conflicts_with: Option<&InboundEventId>,
) -> Result<Option<InboundEvent>> {
    let sql = format!(
        "INSERT INTO inbound_events (id, source_id, account, event_id, conflicts_with, state,
         sha256, size, payload, headers, version, entity, received_at, updated_at,
         next_attempt_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, ?14)
         ON CONFLICT ({}) WHERE {} DO NOTHING RETURNING {COLUMNS}",
        target.columns(),
        target.rows()
    );
    Ok(conn
        .prepare_cached(&sql)?
        .query_row(
            params![
                new.id.to_string(),
                new.source_id.to_string(),
                new.account,
                new.event_id,
                conflicts_with.map(ToString::to_string),
                target.state().as_str(),
                new.sha256,
                new.payload.len() as u64,
                new.payload,
                to_json(&new.headers)?,
                new.version,
                new.entity,
                micros(new.now),
                target.due(new.now).map(micros),
            ],
            read,
        )
        .optional()?)
}

/// Counts one more delivery of the row of `new`'s id and digest among the claim (`Claim`) or
/// the quarantined rows (`Quarantine`); that row, if there is one.
fn repeat(
    conn: &Connection,
    new: &NewInboundEvent,
    among: ClaimTarget,
) -> Result<Option<InboundEvent>> {
    let sql = format!(
        "UPDATE inbound_events SET duplicates = duplicates + 1, updated_at = ?5
         WHERE source_id = ?1 AND account = ?2 AND event_id = ?3 AND sha256 = ?4 AND {}
         RETURNING {COLUMNS}",
        among.rows()
    );
    Ok(conn
        .prepare_cached(&sql)?
        .query_row(
            params![
                new.source_id.to_string(),
                new.account,
                new.event_id,
                new.sha256,
                micros(new.now),
            ],
            read,
        )
        .optional()?)
}

/// [`vow_store::inbound::InboundEvents::claim_inbound`], inside the writer's transaction.
pub(crate) fn claim(conn: &Connection, new: NewInboundEvent) -> Result<Claim> {
    sources::require(conn, new.source_id)?;
    if let Some(event) = insert(conn, &new, ClaimTarget::Claim, None)? {
        if let Some(guard) = &new.replay_guard {
            if !digests::remember(conn, &new, guard, &event)? {
                let sql = format!(
                    "SELECT {COLUMNS} FROM inbound_events WHERE id = ({})",
                    digests::HOLDER
                );
                let earlier = conn
                    .prepare_cached(&sql)?
                    .query_row(params![new.source_id.to_string(), guard.digest], read)?;
                conn.prepare_cached("DELETE FROM inbound_events WHERE id = ?1")?
                    .execute([event.id.to_string()])?;
                return Ok(Claim::Replayed(earlier));
            }
        }
        return Ok(Claim::Received(event));
    }
    if let Some(event) = repeat(conn, &new, ClaimTarget::Claim)? {
        return Ok(Claim::Duplicate(event));
    }
    let claimant = conn
        .prepare_cached(
            "SELECT id FROM inbound_events
             WHERE source_id = ?1 AND account = ?2 AND event_id = ?3 AND conflicts_with IS NULL",
        )?
        .query_row(
            params![new.source_id.to_string(), new.account, new.event_id],
            |r| id(r, 0),
        )?;
    if let Some(event) = insert(conn, &new, ClaimTarget::Quarantine, Some(&claimant))? {
        return Ok(Claim::Quarantined(event));
    }
    match repeat(conn, &new, ClaimTarget::Quarantine)? {
        Some(event) => Ok(Claim::Duplicate(event)),
        None => {
            Err(StoreError::Backend("a conflicting inbound row vanished mid-claim".into()).into())
        }
    }
}

pub(crate) fn get(
    conn: &Connection,
    source: SourceId,
    event: InboundEventId,
) -> Result<Option<StoredInbound>> {
    let sql = format!(
        "SELECT {COLUMNS}, headers, payload FROM inbound_events WHERE source_id = ?1 AND id = ?2"
    );
    let found = conn
        .prepare_cached(&sql)?
        .query_row([source.to_string(), event.to_string()], with_content)
        .optional()?;
    let Some((event, content)) = found else {
        return Ok(None);
    };
    let forwards = super::forwards::forwards(conn, event.id)?;
    Ok(Some(StoredInbound {
        event,
        content,
        forwards,
    }))
}

/// An event and its content, from `{COLUMNS}, headers, payload`.
pub(crate) fn with_content(
    row: &Row<'_>,
) -> rusqlite::Result<(InboundEvent, Option<InboundContent>)> {
    event_with_content(&SqliteColumns(row))
}

pub(crate) fn list(
    conn: &Connection,
    source: SourceId,
    filter: &InboundFilter,
    seek: &Seek,
) -> Result<Vec<InboundEvent>> {
    let mut filters = vec!["source_id = ?1"];
    if filter.state.is_some() {
        filters.push("state = ?2");
    }
    let sql = seek_sql(
        &format!("{COLUMNS} FROM inbound_events"),
        &filters,
        "id",
        seek,
        3,
        4,
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        params![
            source.to_string(),
            filter.state.map(InboundState::as_str),
            seek.after,
            seek.fetch()
        ],
        read,
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub(crate) fn resolve(
    conn: &Connection,
    source: SourceId,
    event: InboundEventId,
    to: InboundState,
    now: DateTime<Utc>,
) -> Result<InboundEvent> {
    let sql = format!(
        "UPDATE inbound_events SET state = ?3, updated_at = ?4,
             next_attempt_at = CASE WHEN ?3 = 'received' THEN ?4 END
         WHERE source_id = ?1 AND id = ?2 AND state = 'quarantined' RETURNING {COLUMNS}"
    );
    let keys = [source.to_string(), event.to_string()];
    let updated = conn
        .prepare_cached(&sql)?
        .query_row(params![keys[0], keys[1], to.as_str(), micros(now)], read)
        .optional()?;
    if let Some(event) = updated {
        return Ok(event);
    }
    let exists = conn
        .prepare_cached("SELECT 1 FROM inbound_events WHERE source_id = ?1 AND id = ?2")?
        .query_row(keys, |_| Ok(()))
        .optional()?;
    Err(match exists {
        Some(()) => vow_store::inbound::not_quarantined(),
        None => StoreError::NotFound("inbound event"),
    }
    .into())
}

const REJECTION_COLUMNS: &str = Rejection::COLUMNS;

/// Records `r` in slot `n % keep` of its source's ring, `n` counting the source's rejections
/// (an upsert overwriting the oldest row in place), drops slots beyond `keep`, and counts the
/// reason: four indexed statements whatever the log holds.
pub(crate) fn record_rejection(conn: &Connection, r: NewRejection, keep: u32) -> Result<()> {
    sources::require(conn, r.source_id)?;
    let source = r.source_id.to_string();
    let recorded: i64 = conn
        .prepare_cached(
            "INSERT INTO inbound_rejection_ring (source_id, recorded) VALUES (?1, 1)
             ON CONFLICT (source_id) DO UPDATE SET recorded = recorded + 1
             RETURNING recorded",
        )?
        .query_row([&source], |row| row.get(0))?;
    let keep = i64::from(keep.max(1));
    conn.prepare_cached(&format!(
        "INSERT INTO inbound_rejections ({REJECTION_COLUMNS}, slot)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (source_id, slot) DO UPDATE SET id = excluded.id, reason = excluded.reason,
             status = excluded.status, body_size = excluded.body_size,
             received_at = excluded.received_at"
    ))?
    .execute(params![
        r.id.to_string(),
        source,
        r.reason,
        r.status,
        r.body_size,
        micros(r.now),
        (recorded - 1) % keep,
    ])?;
    conn.prepare_cached("DELETE FROM inbound_rejections WHERE source_id = ?1 AND slot >= ?2")?
        .execute(params![source, keep])?;
    conn.prepare_cached(
        "INSERT INTO inbound_rejection_counts (source_id, reason, count, first_at, last_at)
         VALUES (?1, ?2, 1, ?3, ?3)
         ON CONFLICT (source_id, reason) DO UPDATE SET count = count + 1,
             first_at = min(first_at, excluded.first_at), last_at = max(last_at, excluded.last_at)",
    )?
    .execute(params![source, r.reason, micros(r.now)])?;
    Ok(())
}

pub(crate) fn rejection_counts(conn: &Connection, source: SourceId) -> Result<Vec<RejectionCount>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {} FROM inbound_rejection_counts WHERE source_id = ?1 ORDER BY reason",
        RejectionCount::COLUMNS
    ))?;
    let rows = stmt.query_map([source.to_string()], read)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub(crate) fn list_rejections(
    conn: &Connection,
    source: SourceId,
    seek: &Seek,
) -> Result<Vec<Rejection>> {
    let sql = seek_sql(
        &format!("{REJECTION_COLUMNS} FROM inbound_rejections"),
        &["source_id = ?1"],
        "id",
        seek,
        2,
        3,
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![source.to_string(), seek.after, seek.fetch()], read)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Clears the content of at most `batch` events received before `before`, oldest first, and
/// deletes at most `batch` rejections recorded before it.
pub(crate) fn purge(conn: &Connection, before: DateTime<Utc>, batch: usize) -> Result<u64> {
    let contents = conn
        .prepare_cached(
            "UPDATE inbound_events SET payload = NULL, headers = NULL WHERE id IN (
                 SELECT id FROM inbound_events WHERE payload IS NOT NULL AND received_at < ?1
                 ORDER BY received_at LIMIT ?2)",
        )?
        .execute(params![micros(before), batch])?;
    let rejections = conn
        .prepare_cached(
            "DELETE FROM inbound_rejections WHERE id IN (
                 SELECT id FROM inbound_rejections WHERE received_at < ?1
                 ORDER BY received_at LIMIT ?2)",
        )?
        .execute(params![micros(before), batch])?;
    Ok((contents + rejections) as u64)
}

#[async_trait]
impl InboundEvents for SqliteStore {
    async fn claim_inbound(&self, new: NewInboundEvent) -> StoreResult<Claim> {
        self.write_intake(move |c| claim(c, new)).await
    }

    async fn get_inbound_event(
        &self,
        source: SourceId,
        id: InboundEventId,
    ) -> StoreResult<Option<StoredInbound>> {
        self.read(move |c| get(c, source, id)).await
    }

    async fn list_inbound_events(
        &self,
        source: SourceId,
        filter: &InboundFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<InboundEvent>> {
        let (filter, seek) = (*filter, seek.clone());
        self.read(move |c| list(c, source, &filter, &seek)).await
    }

    async fn resolve_quarantined_keyed(
        &self,
        source: SourceId,
        id: InboundEventId,
        to: InboundState,
        now: DateTime<Utc>,
        completion: Option<Completion<InboundEvent>>,
    ) -> StoreResult<Applied<InboundEvent>> {
        let resolved = move |c: &Connection| resolve(c, source, id, to, now);
        self.write(move |c| keyed(c, completion, resolved)).await
    }

    async fn record_rejection(&self, rejection: NewRejection, keep: u32) -> StoreResult<()> {
        self.write(move |c| record_rejection(c, rejection, keep))
            .await
    }

    async fn rejection_counts(&self, source: SourceId) -> StoreResult<Vec<RejectionCount>> {
        self.read(move |c| rejection_counts(c, source)).await
    }

    async fn list_rejections(&self, source: SourceId, seek: &Seek) -> StoreResult<Vec<Rejection>> {
        let seek = seek.clone();
        self.read(move |c| list_rejections(c, source, &seek)).await
    }

    async fn purge_inbound(&self, before: DateTime<Utc>, batch: usize) -> StoreResult<u64> {
        self.write(move |c| purge(c, before, batch)).await
    }
}
