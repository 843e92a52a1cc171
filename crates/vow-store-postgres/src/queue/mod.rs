//! The [`DeliveryQueue`] impl of [`PgStore`]: the store is the queue.
//!
//! Several processes share one database, so every promise of the trait holds across pools:
//! - a claim is one statement (`FOR UPDATE SKIP LOCKED` picks due, un-leased rows nobody else is
//!   claiming, and the same statement stamps them with a fresh lease token), so two claims never
//!   return one delivery;
//! - a record locks the deliveries it names first and writes an outcome only while its lease token
//!   still matches (fencing), all outcomes of a batch in one transaction;
//! - the endpoint's consecutive dead-letter count is read and written under a row lock, so two
//!   processes dead-lettering at once count both.
//!
//! # Layout
//! - `claim`: claiming, lease renewal and `next_due`.
//! - `record`: recording outcomes, dead-letter counting and auto-disabling.
//! - `attempt`: the attempt rows: listing, reading, expunging one.
//! - `operator`: resend, replay and endpoint statistics.
//! - `retention`: expunging a message's content and purging expired content.
//! - `attempted`: attempted destinations of a message, attempted messages of an endpoint.

mod attempt;
mod attempted;
pub(crate) mod claim;
pub(crate) mod operator;
mod record;
mod retention;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{AppId, AttemptId, DeliveryId, EndpointId, MessageId};
use vow_store::queue::{
    Attempt, AttemptFilter, AttemptOutcome, AttemptedDestination, AttemptedMessage, ClaimRequest,
    ClaimedDelivery, DeliveryStats, LeaseToken, MessageStatus, Recorded, ReplayFilter,
};
use vow_store::{Delivery, DeliveryQueue, MessageFilter, Seek, StoreResult};

use crate::PgStore;

#[async_trait]
impl DeliveryQueue for PgStore {
    async fn claim_deliveries(&self, req: &ClaimRequest) -> StoreResult<Vec<ClaimedDelivery>> {
        claim::claim(&self.pool, req).await
    }

    async fn renew_leases(
        &self,
        leases: &[(DeliveryId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize> {
        claim::renew(&self.pool, leases, until).await
    }

    async fn record_attempts(
        &self,
        outcomes: Vec<AttemptOutcome>,
        disable_after: u32,
    ) -> StoreResult<Vec<Recorded>> {
        record::record(&self.pool, outcomes, disable_after).await
    }

    async fn next_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        claim::next_due(&self.pool).await
    }

    async fn list_attempts(
        &self,
        app: AppId,
        filter: &AttemptFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<Attempt>> {
        attempt::list(&self.pool, app, filter, seek).await
    }

    async fn get_attempt(
        &self,
        app: AppId,
        msg: MessageId,
        id: AttemptId,
    ) -> StoreResult<Option<Attempt>> {
        attempt::get(&self.pool, app, msg, id).await
    }

    async fn resend(
        &self,
        app: AppId,
        msg: MessageId,
        endpoint: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<Delivery> {
        operator::resend(&mut *self.conn().await?, app, msg, endpoint, now).await
    }

    async fn replay(
        &self,
        app: AppId,
        endpoint: EndpointId,
        filter: &ReplayFilter,
        now: DateTime<Utc>,
        spacing: chrono::Duration,
        dry_run: bool,
    ) -> StoreResult<u64> {
        let mut conn = self.conn().await?;
        operator::replay(&mut conn, app, endpoint, filter, now, spacing, dry_run).await
    }

    async fn endpoint_stats(
        &self,
        app: AppId,
        endpoint: EndpointId,
        since: Option<DateTime<Utc>>,
        until: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<DeliveryStats> {
        operator::endpoint_stats(&self.pool, app, endpoint, since, until, now).await
    }

    async fn list_attempted_destinations(
        &self,
        app: AppId,
        msg: MessageId,
        now: DateTime<Utc>,
        seek: &Seek,
    ) -> StoreResult<Vec<AttemptedDestination>> {
        attempted::destinations(&self.pool, app, msg, now, seek).await
    }

    async fn list_attempted_messages(
        &self,
        app: AppId,
        endpoint: EndpointId,
        filter: &MessageFilter,
        status: Option<MessageStatus>,
        now: DateTime<Utc>,
        seek: &Seek,
    ) -> StoreResult<Vec<AttemptedMessage>> {
        attempted::messages(&self.pool, app, endpoint, filter, status, now, seek).await
    }

    async fn expunge_message_content(&self, app: AppId, msg: MessageId) -> StoreResult<()> {
        retention::expunge_message(&self.pool, app, msg).await
    }

    async fn expunge_attempt_content(
        &self,
        app: AppId,
        msg: MessageId,
        id: AttemptId,
    ) -> StoreResult<()> {
        attempt::expunge(&self.pool, app, msg, id).await
    }

    async fn purge_expired(
        &self,
        now: DateTime<Utc>,
        responses_before: DateTime<Utc>,
        batch: usize,
    ) -> StoreResult<u64> {
        retention::purge_expired(&self.pool, now, responses_before, batch).await
    }
}
