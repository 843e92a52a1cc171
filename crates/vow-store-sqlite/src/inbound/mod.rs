//! [`InboundStore`] on SQLite: every write (a source change, a claim, a rejection, a purge) is
//! one writer job, so one transaction committed before its caller hears back: an acknowledged
//! claim is on disk. Reads run on the read connections.
//!
//! # Layout
//! - `sources`: the `sources` table.
//! - `events`: the claim, `inbound_events` and `inbound_rejections`.
//! - `digests`: the replay guard's `inbound_digests`, consulted by the claim.
//! - `work`: processing: leases, outcomes per destination, version marks.

pub(crate) mod digests;
pub(crate) mod events;
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

use crate::SqliteStore;

#[async_trait]
impl InboundStore for SqliteStore {
    async fn create_source(&self, new: NewSource) -> StoreResult<Source> {
        self.write(move |c| sources::create(c, new)).await
    }

    async fn get_source(&self, id: SourceId) -> StoreResult<Option<Source>> {
        self.read(move |c| sources::get(c, id)).await
    }

    async fn get_source_by_token(&self, token: &str) -> StoreResult<Option<Source>> {
        let token = token.to_owned();
        self.read(move |c| sources::get_by_token(c, &token)).await
    }

    async fn list_sources(&self, seek: &Seek) -> StoreResult<Vec<Source>> {
        let seek = seek.clone();
        self.read(move |c| sources::list(c, &seek)).await
    }

    async fn update_source(
        &self,
        id: SourceId,
        fields: SourceFields,
        now: DateTime<Utc>,
    ) -> StoreResult<Source> {
        self.write(move |c| sources::update(c, id, fields, now))
            .await
    }

    async fn delete_source(&self, id: SourceId) -> StoreResult<()> {
        self.write(move |c| sources::delete(c, id)).await
    }

    async fn claim_inbound(&self, new: NewInboundEvent) -> StoreResult<Claim> {
        self.write(move |c| events::claim(c, new)).await
    }

    async fn get_inbound_event(
        &self,
        source: SourceId,
        id: InboundEventId,
    ) -> StoreResult<Option<StoredInbound>> {
        self.read(move |c| events::get(c, source, id)).await
    }

    async fn list_inbound_events(
        &self,
        source: SourceId,
        filter: &InboundFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<InboundEvent>> {
        let (filter, seek) = (*filter, seek.clone());
        self.read(move |c| events::list(c, source, &filter, &seek))
            .await
    }

    async fn resolve_quarantined(
        &self,
        source: SourceId,
        id: InboundEventId,
        to: InboundState,
        now: DateTime<Utc>,
    ) -> StoreResult<InboundEvent> {
        self.write(move |c| events::resolve(c, source, id, to, now))
            .await
    }

    async fn record_rejection(&self, rejection: NewRejection, keep: u32) -> StoreResult<()> {
        self.write(move |c| events::record_rejection(c, rejection, keep))
            .await
    }

    async fn rejection_counts(&self, source: SourceId) -> StoreResult<Vec<RejectionCount>> {
        self.read(move |c| events::rejection_counts(c, source))
            .await
    }

    async fn list_rejections(&self, source: SourceId, seek: &Seek) -> StoreResult<Vec<Rejection>> {
        let seek = seek.clone();
        self.read(move |c| events::list_rejections(c, source, &seek))
            .await
    }

    async fn purge_inbound(&self, before: DateTime<Utc>, batch: usize) -> StoreResult<u64> {
        self.write(move |c| events::purge(c, before, batch)).await
    }

    async fn claim_inbound_work(&self, request: &WorkRequest) -> StoreResult<WorkClaim> {
        let request = request.clone();
        self.write(move |c| work::claim(c, &request)).await
    }

    async fn record_inbound_work(&self, outcome: WorkOutcome) -> StoreResult<WorkRecorded> {
        self.write(move |c| work::record(c, outcome)).await
    }

    async fn renew_inbound_leases(
        &self,
        leases: &[(InboundEventId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize> {
        let leases = leases.to_vec();
        self.write(move |c| work::renew(c, &leases, until)).await
    }

    async fn next_inbound_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        self.read(work::next_due).await
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
        self.write(move |c| work::decide(c, source, id, decision, destination, now))
            .await
    }

    async fn replay_inbound(
        &self,
        source: SourceId,
        id: InboundEventId,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
    ) -> StoreResult<Decided> {
        self.write(move |c| work::decide(c, source, id, Decision::Replay, destination, now))
            .await
    }
}
