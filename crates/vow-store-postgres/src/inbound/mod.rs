//! [`InboundStore`] on PostgreSQL: a claim is one transaction (see `events`), and so is each
//! processing write (see `work`: its functions run in the transaction they are given, here a
//! fresh one, in `crate::idempotency::apply` the keyed API write's); several processes may
//! share the tables.
//!
//! # Layout
//! - `sources`: the `sources` table.
//! - `events`: the claim, `inbound_events` and `inbound_rejections`.
//! - `digests`: the replay guard's `inbound_digests`, consulted by the claim.
//! - `forwards`: `inbound_forwards`, each destination's outcome of an event.
//! - `work`: processing: claims under leases (with the ordering by version kept in
//!   `inbound_entities`), recording outcomes, renewals.
//! - `operators`: operators' decisions (replay, resolve), each destination on its own.

pub(crate) mod digests;
pub(crate) mod events;
pub(crate) mod forwards;
pub(crate) mod operators;
pub(crate) mod sources;
pub(crate) mod work;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{DestinationId, InboundEventId, SourceId};
use vow_store::inbound::decisions::{Decided, Decision};
use vow_store::inbound::processing::{
    LeaseToken, Resolution, WorkClaim, WorkOutcome, WorkRecorded, WorkRequest,
};
use vow_store::inbound::{
    Claim, InboundEvent, InboundFilter, InboundState, NewInboundEvent, NewRejection, NewSource,
    Rejection, RejectionCount, Source, SourceFields, StoredInbound,
};
use vow_store::{InboundStore, Seek, StoreResult};

use crate::error::db_error;
use crate::PgStore;

/// `$body` with `$tx` bound to a fresh transaction of `$store`'s pool, committed when `$body`
/// returns a value (an error returns before the commit, so the transaction rolls back).
macro_rules! in_transaction {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut $tx = $store.pool.begin().await.map_err(db_error)?;
        let out = $body;
        $tx.commit().await.map_err(db_error)?;
        Ok(out)
    }};
}

#[async_trait]
impl InboundStore for PgStore {
    async fn create_source(&self, new: NewSource) -> StoreResult<Source> {
        sources::create(&mut *self.conn().await?, new).await
    }

    async fn get_source(&self, id: SourceId) -> StoreResult<Option<Source>> {
        sources::get(&self.pool, id).await
    }

    async fn get_source_by_token(&self, token: &str) -> StoreResult<Option<Source>> {
        sources::get_by_token(&self.pool, token).await
    }

    async fn list_sources(&self, seek: &Seek) -> StoreResult<Vec<Source>> {
        sources::list(&self.pool, seek).await
    }

    async fn update_source(
        &self,
        id: SourceId,
        fields: SourceFields,
        now: DateTime<Utc>,
    ) -> StoreResult<Source> {
        sources::update(&self.pool, id, fields, now).await
    }

    async fn delete_source(&self, id: SourceId) -> StoreResult<()> {
        sources::delete(&self.pool, id).await
    }

    async fn claim_inbound(&self, new: NewInboundEvent) -> StoreResult<Claim> {
        events::claim(&self.pool, new).await
    }

    async fn get_inbound_event(
        &self,
        source: SourceId,
        id: InboundEventId,
    ) -> StoreResult<Option<StoredInbound>> {
        events::get(&self.pool, source, id).await
    }

    async fn list_inbound_events(
        &self,
        source: SourceId,
        filter: &InboundFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<InboundEvent>> {
        events::list(&self.pool, source, filter, seek).await
    }

    async fn resolve_quarantined(
        &self,
        source: SourceId,
        id: InboundEventId,
        to: InboundState,
        now: DateTime<Utc>,
    ) -> StoreResult<InboundEvent> {
        events::resolve(&mut *self.conn().await?, source, id, to, now).await
    }

    async fn record_rejection(&self, rejection: NewRejection, keep: u32) -> StoreResult<()> {
        events::record_rejection(&self.pool, rejection, keep).await
    }

    async fn rejection_counts(&self, source: SourceId) -> StoreResult<Vec<RejectionCount>> {
        events::rejection_counts(&self.pool, source).await
    }

    async fn list_rejections(&self, source: SourceId, seek: &Seek) -> StoreResult<Vec<Rejection>> {
        events::list_rejections(&self.pool, source, seek).await
    }

    async fn purge_inbound(&self, before: DateTime<Utc>, batch: usize) -> StoreResult<u64> {
        events::purge(&self.pool, before, batch).await
    }

    async fn claim_inbound_work(&self, request: &WorkRequest) -> StoreResult<WorkClaim> {
        in_transaction!(self, |tx| work::claim(&mut tx, request).await?)
    }

    async fn record_inbound_work(&self, outcome: WorkOutcome) -> StoreResult<WorkRecorded> {
        in_transaction!(self, |tx| work::record(&mut tx, outcome).await?)
    }

    async fn renew_inbound_leases(
        &self,
        leases: &[(InboundEventId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize> {
        work::renew(&self.pool, leases, until).await
    }

    async fn next_inbound_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        work::next_due(&self.pool).await
    }

    async fn resolve_uncertain(
        &self,
        source: SourceId,
        id: InboundEventId,
        resolution: Resolution,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
    ) -> StoreResult<Decided> {
        let decision = Decision::Resolve(resolution);
        in_transaction!(self, |tx| {
            operators::decide(&mut tx, source, id, decision, destination, now).await?
        })
    }

    async fn replay_inbound(
        &self,
        source: SourceId,
        id: InboundEventId,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
    ) -> StoreResult<Decided> {
        in_transaction!(self, |tx| {
            operators::decide(&mut tx, source, id, Decision::Replay, destination, now).await?
        })
    }
}
