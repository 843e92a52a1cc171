//! Inbound events and rejections: the claim (one transaction, READ COMMITTED: an insert that
//! meets a concurrent insert of the same key waits for it to commit, then does nothing, and the
//! statements after it see that row; with a replay guard, `digests` after the insert, and a
//! refused replay rolls back), operators' decisions on quarantined events, listings and
//! retention. A missing source is the foreign key `*_source_fkey` (→ `NotFound("source")`).

use crate::idempotency::{keyed, step};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::QueryAs;
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use vow_core::{InboundEventId, SourceId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::claim_target::ClaimTarget;
use vow_store::inbound::InboundEvents;
use vow_store::inbound::{
    Claim, InboundContent, InboundEvent, InboundFilter, InboundState, NewInboundEvent,
    NewRejection, Rejection, RejectionCount, StoredInbound,
};
use vow_store::rows::{event_with_content, FromColumns};
use vow_store::{Seek, StoreError, StoreResult};

use super::{digests, forwards};
use crate::convert::{self, not_found, read, PgColumns};
use crate::error::{corrupt, db_error};
use crate::seek::push_seek;
use crate::PgStore;

/// The columns of an [`InboundEvent`].
pub(crate) const COLUMNS: &str = InboundEvent::COLUMNS;

/// An event (read by `vow_store::rows`) with the stored text of the keys `work` groups, orders
/// and writes by.
pub(crate) struct EventRow {
    pub(crate) id: String,
    pub(crate) source_id: String,
    pub(crate) version: Option<String>,
    pub(crate) entity: Option<String>,
    pub(crate) attempts: u32,
    event: InboundEvent,
}

impl From<InboundEvent> for EventRow {
    fn from(event: InboundEvent) -> Self {
        EventRow {
            id: event.id.to_string(),
            source_id: event.source_id.to_string(),
            version: event.version.clone(),
            entity: event.entity.clone(),
            attempts: event.attempts,
            event,
        }
    }
}

impl sqlx::FromRow<'_, PgRow> for EventRow {
    fn from_row(row: &PgRow) -> sqlx::Result<Self> {
        vow_store::rows::read::<InboundEvent, _>(&PgColumns(row)).map(EventRow::from)
    }
}

impl EventRow {
    pub(crate) fn into_model(self) -> StoreResult<InboundEvent> {
        Ok(self.into_event())
    }

    pub(crate) fn into_event(self) -> InboundEvent {
        self.event
    }
}

pub(crate) type EventQuery<'q> = QueryAs<'q, Postgres, EventRow, PgArguments>;

/// Runs `query` for at most one event.
pub(crate) async fn one_event<'c>(
    query: EventQuery<'_>,
    ex: impl PgExecutor<'c>,
) -> StoreResult<Option<InboundEvent>> {
    query
        .fetch_optional(ex)
        .await
        .map_err(db_error)?
        .map(EventRow::into_model)
        .transpose()
}

/// Inserts `new` unless the index of `target` already holds its key; the row, if written.
async fn insert(
    conn: &mut PgConnection,
    new: &NewInboundEvent,
    target: ClaimTarget,
    conflicts_with: Option<&InboundEventId>,
) -> StoreResult<Option<InboundEvent>> {
    let sql = format!(
        "INSERT INTO inbound_events (id, source_id, account, event_id, conflicts_with, state,
             sha256, size, payload, headers, version, entity, received_at, updated_at,
             next_attempt_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14)
         ON CONFLICT ({}) WHERE {} DO NOTHING
         RETURNING {COLUMNS}",
        target.columns(),
        target.rows()
    );
    let query = sqlx::query_as::<_, EventRow>(&sql)
        .bind(new.id.to_string())
        .bind(new.source_id.to_string())
        .bind(&new.account)
        .bind(&new.event_id)
        .bind(conflicts_with.map(ToString::to_string))
        .bind(target.state().as_str())
        .bind(&new.sha256)
        .bind(convert::bigint_param(new.payload.len()))
        .bind(&new.payload)
        .bind(Json(&new.headers))
        .bind(&new.version)
        .bind(&new.entity)
        .bind(new.now)
        .bind(target.due(new.now));
    one_event(query, conn).await
}

/// Counts one more delivery of the row of `new`'s id and digest among the claim (`Claim`) or
/// the quarantined rows (`Quarantine`); that row, if there is one.
async fn repeat(
    conn: &mut PgConnection,
    new: &NewInboundEvent,
    among: ClaimTarget,
) -> StoreResult<Option<InboundEvent>> {
    let sql = format!(
        "UPDATE inbound_events SET duplicates = duplicates + 1, updated_at = $5
         WHERE source_id = $1 AND account = $2 AND event_id = $3 AND sha256 = $4 AND {}
         RETURNING {COLUMNS}",
        among.rows()
    );
    let query = sqlx::query_as::<_, EventRow>(&sql)
        .bind(new.source_id.to_string())
        .bind(&new.account)
        .bind(&new.event_id)
        .bind(&new.sha256)
        .bind(new.now);
    one_event(query, conn).await
}

/// [`vow_store::inbound::InboundEvents::claim_inbound`] as ONE transaction.
pub(crate) async fn claim(pool: &PgPool, new: NewInboundEvent) -> StoreResult<Claim> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    let claim = claim_in(&mut tx, &new).await?;
    if matches!(claim, Claim::Replayed(_)) {
        tx.rollback().await.map_err(db_error)?;
    } else {
        tx.commit().await.map_err(db_error)?;
    }
    Ok(claim)
}

async fn claim_in(conn: &mut PgConnection, new: &NewInboundEvent) -> StoreResult<Claim> {
    if let Some(event) = insert(conn, new, ClaimTarget::Claim, None).await? {
        if let Some(guard) = &new.replay_guard {
            if !digests::remember(conn, new, guard, &event).await? {
                let sql = format!(
                    "SELECT {COLUMNS} FROM inbound_events WHERE id = ({})",
                    digests::HOLDER
                );
                let query = sqlx::query_as::<_, EventRow>(&sql)
                    .bind(new.source_id.to_string())
                    .bind(&guard.digest);
                let earlier = one_event(query, conn).await?;
                let earlier = earlier
                    .ok_or_else(|| corrupt("a replay guard's digest names no inbound event"))?;
                return Ok(Claim::Replayed(earlier));
            }
        }
        return Ok(Claim::Received(event));
    }
    if let Some(event) = repeat(conn, new, ClaimTarget::Claim).await? {
        return Ok(Claim::Duplicate(event));
    }
    // The claim row only goes with its source, so a claim gone by now means the source is.
    let claimant: String = sqlx::query_scalar(
        "SELECT id FROM inbound_events
         WHERE source_id = $1 AND account = $2 AND event_id = $3 AND conflicts_with IS NULL",
    )
    .bind(new.source_id.to_string())
    .bind(&new.account)
    .bind(&new.event_id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?
    .ok_or_else(|| not_found("source"))?;
    let claimant = claimant
        .parse()
        .map_err(|e| corrupt(format!("inbound_events.id {claimant:?}: {e}")))?;
    if let Some(event) = insert(conn, new, ClaimTarget::Quarantine, Some(&claimant)).await? {
        return Ok(Claim::Quarantined(event));
    }
    repeat(conn, new, ClaimTarget::Quarantine)
        .await?
        .map(Claim::Duplicate)
        .ok_or_else(|| not_found("source"))
}

/// An event with its content, from `{COLUMNS}, headers, payload`.
pub(crate) struct DetailRow {
    pub(crate) event: EventRow,
    content: Option<InboundContent>,
}

impl sqlx::FromRow<'_, PgRow> for DetailRow {
    fn from_row(row: &PgRow) -> sqlx::Result<Self> {
        let (event, content) = event_with_content(&PgColumns(row))?;
        Ok(DetailRow {
            event: event.into(),
            content,
        })
    }
}

impl DetailRow {
    /// The event and its content (`None` once purged).
    pub(crate) fn into_parts(self) -> StoreResult<(InboundEvent, Option<InboundContent>)> {
        Ok((self.event.event, self.content))
    }
}

/// The event with its content and its forwards: two reads, the event first (a forward
/// recorded in between may show an outcome newer than the event's state).
pub(crate) async fn get(
    pool: &PgPool,
    source: SourceId,
    id: InboundEventId,
) -> StoreResult<Option<StoredInbound>> {
    let Some(row) = sqlx::query_as::<_, DetailRow>(&format!(
        "SELECT {COLUMNS}, headers, payload FROM inbound_events
         WHERE source_id = $1 AND id = $2"
    ))
    .bind(source.to_string())
    .bind(id.to_string())
    .fetch_optional(pool)
    .await
    .map_err(db_error)?
    else {
        return Ok(None);
    };
    let (event, content) = row.into_parts()?;
    let forwards = forwards::of(pool, &event.id).await?;
    Ok(Some(StoredInbound {
        event,
        content,
        forwards,
    }))
}

pub(crate) async fn list(
    pool: &PgPool,
    source: SourceId,
    filter: &InboundFilter,
    seek: &Seek,
) -> StoreResult<Vec<InboundEvent>> {
    let mut qb = QueryBuilder::<Postgres>::new(format!(
        "SELECT {COLUMNS} FROM inbound_events WHERE source_id = "
    ));
    qb.push_bind(source.to_string());
    if let Some(state) = filter.state {
        qb.push(" AND state = ").push_bind(state.as_str());
    }
    push_seek(&mut qb, "id", seek);
    qb.build_query_as::<EventRow>()
        .fetch_all(pool)
        .await
        .map_err(db_error)?
        .into_iter()
        .map(EventRow::into_model)
        .collect()
}

/// [`vow_store::inbound::InboundEvents::resolve_quarantined`] on `conn` (one statement when it applies;
/// the caller's transaction, if any, holds it with the rest).
pub(crate) async fn resolve(
    conn: &mut PgConnection,
    source: SourceId,
    id: InboundEventId,
    to: InboundState,
    now: DateTime<Utc>,
) -> StoreResult<InboundEvent> {
    // A released event is due at once; a discarded one never.
    let sql = format!(
        "UPDATE inbound_events SET state = $3, updated_at = $4,
             next_attempt_at = CASE WHEN $3 = 'received' THEN $4::timestamptz END
         WHERE source_id = $1 AND id = $2 AND state = 'quarantined'
         RETURNING {COLUMNS}"
    );
    let query = sqlx::query_as::<_, EventRow>(&sql)
        .bind(source.to_string())
        .bind(id.to_string())
        .bind(to.as_str())
        .bind(now);
    if let Some(event) = one_event(query, &mut *conn).await? {
        return Ok(event);
    }
    let exists: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM inbound_events WHERE source_id = $1 AND id = $2")
            .bind(source.to_string())
            .bind(id.to_string())
            .fetch_optional(&mut *conn)
            .await
            .map_err(db_error)?;
    Err(match exists {
        Some(_) => vow_store::inbound::not_quarantined(),
        None => StoreError::NotFound("inbound event"),
    })
}

const REJECTION_COLUMNS: &str = Rejection::COLUMNS;

/// Records `r` in slot `n % keep` of its source's ring, `n` counting the source's rejections
/// (the ring row's lock orders one source's rejections), overwriting the oldest row in place,
/// drops slots beyond `keep`, and counts the reason: one statement, a fixed number of row
/// writes whatever the log holds.
pub(crate) async fn record_rejection(pool: &PgPool, r: NewRejection, keep: u32) -> StoreResult<()> {
    sqlx::query(
        "WITH ring AS (
             INSERT INTO inbound_rejection_ring AS g (source_id, recorded) VALUES ($1, 1)
             ON CONFLICT (source_id) DO UPDATE SET recorded = g.recorded + 1
             RETURNING recorded
         ), counted AS (
             INSERT INTO inbound_rejection_counts AS c (source_id, reason, count, first_at, last_at)
             VALUES ($1, $3, 1, $6, $6)
             ON CONFLICT (source_id, reason) DO UPDATE SET count = c.count + 1,
                 first_at = LEAST(c.first_at, excluded.first_at),
                 last_at = GREATEST(c.last_at, excluded.last_at)
         ), trimmed AS (
             DELETE FROM inbound_rejections WHERE source_id = $1 AND slot >= $7
         )
         INSERT INTO inbound_rejections (id, source_id, reason, status, body_size, received_at, slot)
         SELECT $2, $1, $3, $4, $5, $6, (recorded - 1) % $7 FROM ring
         ON CONFLICT (source_id, slot) DO UPDATE SET id = excluded.id, reason = excluded.reason,
             status = excluded.status, body_size = excluded.body_size,
             received_at = excluded.received_at",
    )
    .bind(r.source_id.to_string())
    .bind(r.id.to_string())
    .bind(r.reason)
    .bind(i32::from(r.status))
    .bind(convert::bigint_param(r.body_size))
    .bind(r.now)
    .bind(i64::from(keep.max(1)))
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(())
}

pub(crate) async fn rejection_counts(
    pool: &PgPool,
    source: SourceId,
) -> StoreResult<Vec<RejectionCount>> {
    sqlx::query(&format!(
        "SELECT {} FROM inbound_rejection_counts WHERE source_id = $1 ORDER BY reason",
        RejectionCount::COLUMNS
    ))
    .bind(source.to_string())
    .try_map(read::<RejectionCount>)
    .fetch_all(pool)
    .await
    .map_err(db_error)
}

pub(crate) async fn list_rejections(
    pool: &PgPool,
    source: SourceId,
    seek: &Seek,
) -> StoreResult<Vec<Rejection>> {
    let mut qb = QueryBuilder::<Postgres>::new(format!(
        "SELECT {REJECTION_COLUMNS} FROM inbound_rejections WHERE source_id = "
    ));
    qb.push_bind(source.to_string());
    push_seek(&mut qb, "id", seek);
    qb.build()
        .try_map(read::<Rejection>)
        .fetch_all(pool)
        .await
        .map_err(db_error)
}

/// Clears the content of up to `batch` events received before `before` and deletes up to
/// `batch` rejections recorded before it, in one statement; rows another process holds are
/// skipped (the next run gets them).
pub(crate) async fn purge(pool: &PgPool, before: DateTime<Utc>, batch: usize) -> StoreResult<u64> {
    let changed: i64 = sqlx::query_scalar(
        "WITH c AS (
             UPDATE inbound_events SET payload = NULL, headers = NULL
             WHERE id IN (SELECT id FROM inbound_events
                          WHERE payload IS NOT NULL AND received_at < $1
                          ORDER BY received_at LIMIT $2 FOR UPDATE SKIP LOCKED)
             RETURNING 1
         ), r AS (
             DELETE FROM inbound_rejections
             WHERE id IN (SELECT id FROM inbound_rejections WHERE received_at < $1
                          ORDER BY received_at LIMIT $2 FOR UPDATE SKIP LOCKED)
             RETURNING 1
         )
         SELECT (SELECT count(*) FROM c) + (SELECT count(*) FROM r)",
    )
    .bind(before)
    .bind(convert::bigint_param(batch))
    .fetch_one(pool)
    .await
    .map_err(db_error)?;
    Ok(u64::try_from(changed).unwrap_or_default())
}

#[async_trait]
impl InboundEvents for PgStore {
    async fn claim_inbound(&self, new: NewInboundEvent) -> StoreResult<Claim> {
        // Shares a transaction and its commit with concurrent claims.
        self.inbound_claims.claim(new).await
    }

    async fn get_inbound_event(
        &self,
        source: SourceId,
        id: InboundEventId,
    ) -> StoreResult<Option<StoredInbound>> {
        get(&self.pool, source, id).await
    }

    async fn list_inbound_events(
        &self,
        source: SourceId,
        filter: &InboundFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<InboundEvent>> {
        list(&self.pool, source, filter, seek).await
    }

    async fn resolve_quarantined_keyed(
        &self,
        source: SourceId,
        id: InboundEventId,
        to: InboundState,
        now: DateTime<Utc>,
        completion: Option<Completion<InboundEvent>>,
    ) -> StoreResult<Applied<InboundEvent>> {
        let write = step(move |tx| Box::pin(resolve(tx, source, id, to, now)));
        keyed(&self.pool, completion, write).await
    }

    async fn record_rejection(&self, rejection: NewRejection, keep: u32) -> StoreResult<()> {
        record_rejection(&self.pool, rejection, keep).await
    }

    async fn rejection_counts(&self, source: SourceId) -> StoreResult<Vec<RejectionCount>> {
        rejection_counts(&self.pool, source).await
    }

    async fn list_rejections(&self, source: SourceId, seek: &Seek) -> StoreResult<Vec<Rejection>> {
        list_rejections(&self.pool, source, seek).await
    }

    async fn purge_inbound(&self, before: DateTime<Utc>, batch: usize) -> StoreResult<u64> {
        purge(&self.pool, before, batch).await
    }
}
