//! [`DeliveryQueue`] on SQLite: every method that changes state is one writer job (so one
//! transaction, and serialised with every other write: two claims can never overlap); listings,
//! stats and `next_due` run on the read connections.
//!
//! # Layout
//! - `claim`: claiming with leases, renewing them, `next_due`.
//! - `record`: recording outcomes (fencing by lease token, auto-disabling endpoints).
//! - `attempts`: the attempts log, expunging and retention.
//! - `operator`: resend, replay, endpoint stats.
//! - `attempted`: attempted destinations of a message, attempted messages of an endpoint.

mod attempted;
mod attempts;
mod claim;
pub(crate) mod operator;
mod record;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{AppId, AttemptId, DeliveryId, EndpointId, MessageId};
use vow_store::queue::{
    Attempt, AttemptFilter, AttemptOutcome, AttemptedDestination, AttemptedMessage, ClaimRequest,
    ClaimedDelivery, DeliveryStats, LeaseToken, MessageStatus, Recorded, ReplayFilter,
};
use vow_store::{Delivery, DeliveryQueue, MessageFilter, Seek, StoreResult};

use crate::SqliteStore;

#[async_trait]
impl DeliveryQueue for SqliteStore {
    async fn claim_deliveries(&self, req: &ClaimRequest) -> StoreResult<Vec<ClaimedDelivery>> {
        let req = req.clone();
        self.write(move |c| claim::claim(c, &req)).await
    }

    async fn renew_leases(
        &self,
        leases: &[(DeliveryId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize> {
        if leases.is_empty() {
            return Ok(0);
        }
        let leases = leases.to_vec();
        self.write(move |c| claim::renew(c, &leases, until)).await
    }

    async fn record_attempts(
        &self,
        outcomes: Vec<AttemptOutcome>,
        disable_after: u32,
    ) -> StoreResult<Vec<Recorded>> {
        if outcomes.is_empty() {
            return Ok(Vec::new());
        }
        self.write(move |c| record::record(c, &outcomes, disable_after))
            .await
    }

    async fn next_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        self.read(claim::next_due).await
    }

    async fn list_attempts(
        &self,
        app: AppId,
        filter: &AttemptFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<Attempt>> {
        let filter = filter.clone();
        let seek = seek.clone();
        self.read(move |c| attempts::list(c, app, &filter, &seek))
            .await
    }

    async fn get_attempt(
        &self,
        app: AppId,
        msg: MessageId,
        id: AttemptId,
    ) -> StoreResult<Option<Attempt>> {
        self.read(move |c| attempts::get(c, app, msg, id)).await
    }

    async fn resend(
        &self,
        app: AppId,
        msg: MessageId,
        endpoint: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<Delivery> {
        self.write(move |c| operator::resend(c, app, msg, endpoint, now))
            .await
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
        let filter = filter.clone();
        let replay = move |c: &rusqlite::Connection| {
            operator::replay(c, app, endpoint, &filter, now, spacing, dry_run)
        };
        if dry_run {
            self.read(replay).await
        } else {
            self.write(replay).await
        }
    }

    async fn endpoint_stats(
        &self,
        app: AppId,
        endpoint: EndpointId,
        since: Option<DateTime<Utc>>,
        until: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<DeliveryStats> {
        self.read(move |c| operator::stats(c, app, endpoint, since, until, now))
            .await
    }

    async fn list_attempted_destinations(
        &self,
        app: AppId,
        msg: MessageId,
        now: DateTime<Utc>,
        seek: &Seek,
    ) -> StoreResult<Vec<AttemptedDestination>> {
        let seek = seek.clone();
        self.read(move |c| attempted::destinations(c, app, msg, now, &seek))
            .await
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
        let (filter, seek) = (filter.clone(), seek.clone());
        self.read(move |c| attempted::messages(c, app, endpoint, &filter, status, now, &seek))
            .await
    }

    async fn expunge_message_content(&self, app: AppId, msg: MessageId) -> StoreResult<()> {
        self.write(move |c| attempts::expunge_message(c, app, msg))
            .await
    }

    async fn expunge_attempt_content(
        &self,
        app: AppId,
        msg: MessageId,
        id: AttemptId,
    ) -> StoreResult<()> {
        self.write(move |c| attempts::expunge_one(c, app, msg, id))
            .await
    }

    async fn purge_expired(
        &self,
        now: DateTime<Utc>,
        responses_before: DateTime<Utc>,
        batch: usize,
    ) -> StoreResult<u64> {
        if batch == 0 {
            return Ok(0);
        }
        self.write(move |c| attempts::purge(c, now, responses_before, batch))
            .await
    }
}
