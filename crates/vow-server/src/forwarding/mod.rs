//! Forwarding inbound events to their sources' destinations (issue 5, item 6).
//!
//! The store is the queue ([`vow_store::inbound::processing`]). A [`Forwarder`] claims due
//! events with an expiring lease, forwards each one's exact bytes to every destination still
//! owed it (concurrently), signed with that destination's Standard Webhooks secret: `webhook-id`
//! is vow's inbound event id (stable across retries), and `vow-source` and `vow-event-id`
//! (the provider's id) go along with the provider's own non-secret headers. Each result is
//! classified ([`classify`]); retryable ones are due again after the retry schedule's delay
//! with jitter, or dead-lettered once it is spent. A heartbeat renews the leases of events
//! still being forwarded; a worker that dies leaves leases that run out, and the next claim
//! records the destinations it owed as `uncertain` (or retries an idempotent one). A relay
//! destination (`vow listen --source`) is forwarded to through its listener ([`crate::relay`]).
//!
//! # Layout
//! - [`classify`]: what a response or an error means.
//! - [`request`]: the signed request for one destination.

pub mod classify;
pub mod request;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, SubsecRound, Utc};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use vow_core::retry::next_try;
use vow_core::InboundEventId;
use vow_egress::EgressClient;
use vow_store::inbound::processing::{
    ClaimedEvent, Consumer, DestinationResult, LeaseToken, NextTry, Outcome, WorkClaim,
    WorkOutcome, WorkRecorded, WorkRequest,
};
use vow_store::{InboundStore, StoreResult};

use crate::delivery::DeliverySettings;
use crate::metrics as m;
use crate::relay::Hub;
use crate::worker::{self, lock, Backoff, Texts, Work};
use request::Senders;

/// Forwards inbound events until shut down.
#[derive(Clone)]
pub struct Forwarder {
    inbound: Arc<dyn InboundStore>,
    senders: Senders,
    settings: DeliverySettings,
    wake: Arc<Notify>,
}

/// The leases of events being forwarded, for the heartbeat.
#[derive(Default)]
struct Leases(Mutex<HashMap<InboundEventId, LeaseToken>>);

impl Leases {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<InboundEventId, LeaseToken>> {
        lock(&self.0)
    }
}

impl Forwarder {
    /// A forwarder for `inbound`, sending through `egress`, with the delivery workers'
    /// schedule, timeout, lease, concurrency and poll interval; `wake` is notified when an
    /// event becomes due.
    pub fn new(
        inbound: Arc<dyn InboundStore>,
        egress: EgressClient,
        settings: DeliverySettings,
        wake: Arc<Notify>,
    ) -> Self {
        Self {
            inbound,
            senders: Senders {
                egress,
                relay: Arc::default(),
            },
            settings,
            wake,
        }
    }

    /// Forwards to relay destinations through `hub` (the one the API's `vow listen --source`
    /// streams register with), rather than a hub of its own no listener reaches.
    pub fn with_relay(mut self, hub: Arc<Hub>) -> Self {
        self.senders.relay = hub;
        self
    }

    fn request(&self, now: DateTime<Utc>, limit: usize) -> WorkRequest {
        WorkRequest {
            now: now.trunc_subsecs(6),
            lease: chrono::Duration::from_std(self.settings.lease).unwrap_or_default(),
            limit,
            consumer: Consumer::Push,
            max_attempts: self.settings.schedule.max_attempts(),
        }
    }

    /// Runs until `shutdown`, then lets running forwards finish (bounded by the timeout).
    pub async fn run(self, shutdown: CancellationToken) {
        let timing = self.settings.timing();
        let work = Arc::new(Forwards {
            slots: Arc::new(Semaphore::new(self.settings.max_in_flight)),
            leases: Leases::default(),
            forwarder: self,
        });
        worker::run(work, timing, shutdown).await;
    }

    /// Forwards everything due at `now`, records it, and repeats until nothing is due; how
    /// many events it recorded. Deterministic, for tests: move `now` forward to reach retries.
    pub async fn drain_at(&self, now: DateTime<Utc>) -> StoreResult<usize> {
        let mut total = 0;
        loop {
            let work = self
                .inbound
                .claim_inbound_work(&self.request(now, self.settings.claim_batch))
                .await?;
            account_claim(&work);
            if work.claimed.is_empty() {
                return Ok(total);
            }
            let mut running = JoinSet::new();
            for claimed in work.claimed {
                let this = self.clone();
                running.spawn(async move { forward(&this, &claimed, now).await });
            }
            for outcome in running.join_all().await {
                self.record(outcome).await;
                total += 1;
            }
        }
    }

    /// Records `outcome`, retrying a store failure until it is stored or the lease is gone (if
    /// the process dies first, the lease runs out and the next claim settles the event).
    async fn record(&self, outcome: WorkOutcome) {
        let mut backoff = Backoff::default();
        let event = outcome.event;
        loop {
            match self.inbound.record_inbound_work(outcome.clone()).await {
                Ok(WorkRecorded::Stored(stored)) => {
                    for r in &outcome.results {
                        let kind = match (r.outcome, outcome.next) {
                            (Outcome::Retryable, NextTry::Exhausted) => "dead_lettered",
                            (o, _) => o.as_str(),
                        };
                        metrics::counter!(m::INBOUND_FORWARDS, "outcome" => kind).increment(1);
                    }
                    tracing::debug!(%event, state = stored.state.as_str(), "inbound event forwarded");
                    return;
                }
                Ok(WorkRecorded::LeaseLost) => {
                    metrics::counter!(m::LEASES_LOST).increment(1);
                    tracing::info!(%event, "lease lost before recording; the event was settled or claimed again");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, %event, retry_in = ?backoff.delay(), "recording a forward failed");
                    backoff.sleep().await;
                }
            }
        }
    }
}

/// One run of a [`Forwarder`]: inbound events as [`worker`] work, each forwarded and recorded in
/// its own task, which holds one of the slots.
struct Forwards {
    forwarder: Forwarder,
    slots: Arc<Semaphore>,
    leases: Leases,
}

impl Work for Forwards {
    type Room = ();
    type Item = ClaimedEvent;
    type Lease = (InboundEventId, LeaseToken);

    const TEXTS: Texts = Texts {
        claim_failed: "claiming inbound events failed",
        next_due_failed: "reading the next due inbound event failed",
        leases_lost: "some inbound leases were lost",
        renew_failed: "renewing inbound leases failed",
        still_running: "forwards still running at shutdown; their leases will run out",
    };

    fn room(&self) -> Option<(usize, ())> {
        let free = self
            .slots
            .available_permits()
            .min(self.forwarder.settings.claim_batch);
        (free > 0).then_some((free, ()))
    }

    async fn slot_freed(&self) {
        let _ = self.slots.acquire().await;
    }

    async fn claim(
        &self,
        now: DateTime<Utc>,
        limit: usize,
        (): (),
    ) -> StoreResult<Vec<ClaimedEvent>> {
        let request = self.forwarder.request(now, limit);
        let work = self.forwarder.inbound.claim_inbound_work(&request).await?;
        account_claim(&work);
        Ok(work.claimed)
    }

    fn start(self: &Arc<Self>, claimed: ClaimedEvent) -> impl Future<Output = ()> + Send + 'static {
        // Only the loop takes slots, and it claimed no more than were free.
        let permit = self.slots.clone().try_acquire_owned().ok();
        self.leases
            .lock()
            .insert(claimed.event.id, claimed.lease.clone());
        let this = self.clone();
        async move {
            let id = claimed.event.id;
            let outcome = forward(&this.forwarder, &claimed, Utc::now()).await;
            this.forwarder.record(outcome).await;
            this.leases.lock().remove(&id);
            drop(permit);
        }
    }

    async fn woken(&self) {
        self.forwarder.wake.notified().await
    }

    async fn next_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        self.forwarder.inbound.next_inbound_due().await
    }

    fn leases(&self) -> Vec<(InboundEventId, LeaseToken)> {
        self.leases
            .lock()
            .iter()
            .map(|(id, l)| (*id, l.clone()))
            .collect()
    }

    async fn renew(
        &self,
        leases: &[(InboundEventId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize> {
        self.forwarder
            .inbound
            .renew_inbound_leases(leases, until)
            .await
    }
}

/// Counts what a claim superseded and settled.
fn account_claim(work: &WorkClaim) {
    if !work.superseded.is_empty() {
        metrics::counter!(m::INBOUND_SUPERSEDED).increment(work.superseded.len() as u64);
    }
    for event in &work.expired {
        metrics::counter!(m::INBOUND_EXPIRED_LEASES).increment(1);
        tracing::warn!(event = %event.id, state = event.state.as_str(),
            "an inbound event's lease ran out before its outcome was recorded");
    }
}

/// Forwards `claimed` to every destination it is owed, at logical time `now`.
async fn forward(this: &Forwarder, claimed: &ClaimedEvent, now: DateTime<Utc>) -> WorkOutcome {
    let event = &claimed.event;
    let results: Vec<DestinationResult> = match &claimed.content {
        None => claimed
            .pending
            .iter()
            .map(|d| DestinationResult {
                destination: Some(d.id),
                outcome: Outcome::Retryable,
                status: None,
                error: Some("the payload was removed by retention before it was forwarded".into()),
            })
            .collect(),
        Some(_) => {
            let timestamp = u64::try_from(now.timestamp()).unwrap_or_default();
            let shared = Arc::new(claimed.clone());
            let mut sends = JoinSet::new();
            for (i, d) in claimed.pending.iter().enumerate() {
                let (shared, senders, timeout) =
                    (shared.clone(), this.senders.clone(), this.settings.timeout);
                let (id, idempotent) = (d.id, d.idempotent);
                sends.spawn(async move {
                    let event = &shared.event;
                    let content = shared.content.as_ref().expect("matched Some above");
                    let sent = request::send(
                        &senders,
                        timeout,
                        event,
                        content,
                        &shared.pending[i],
                        timestamp,
                    )
                    .await;
                    let result = DestinationResult {
                        destination: Some(id),
                        ..classify::classify(&sent, idempotent)
                    };
                    (i, result)
                });
            }
            // In the source's order of destinations, whichever answered first.
            let mut results = sends.join_all().await;
            results.sort_by_key(|(i, _)| *i);
            results.into_iter().map(|(_, r)| r).collect()
        }
    };
    let retry =
        claimed.content.is_some() && results.iter().any(|r| r.outcome == Outcome::Retryable);
    let next = next_try(
        &this.settings.schedule,
        event.attempts,
        retry,
        now,
        &mut rand::thread_rng(),
    );
    WorkOutcome {
        event: event.id,
        lease: claimed.lease.clone(),
        results,
        next,
        now: now.trunc_subsecs(6),
    }
}
