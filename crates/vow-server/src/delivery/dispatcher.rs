//! The claim loop of one process, with its in-flight bookkeeping, lease heartbeat and recorder.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use vow_core::{DeliveryId, EndpointId};
use vow_store::queue::{
    AttemptOutcome, ClaimRequest, ClaimedDelivery, EndpointRoom, LeaseToken, Recorded,
};
use vow_store::{Delivery, DeliveryQueue, StoreResult};

use super::attempt::{self, AttemptEnv};
use super::backoff::Backoff;
use super::operational::Operational;
use super::settings::DeliverySettings;
use super::throttle::Throttle;
use crate::metrics as m;

/// Outcomes written per store call at most.
const RECORD_BATCH: usize = 512;

/// Claims and attempts deliveries until shut down.
pub struct Dispatcher {
    queue: Arc<dyn DeliveryQueue>,
    env: Arc<AttemptEnv>,
    settings: DeliverySettings,
    wake: Arc<Notify>,
    operational: Option<Operational>,
}

/// An outcome and the delivery it is about, on its way to the recorder.
type Finished = (AttemptOutcome, Delivery);

/// What the claim loop, the attempt tasks, the heartbeat and the recorder share.
#[derive(Default)]
struct Shared {
    in_flight: Mutex<InFlight>,
    /// Signalled when an in-flight slot frees up.
    freed: Notify,
    throttle: Throttle,
}

/// Claimed deliveries not yet recorded: their leases, and how many each endpoint has. A claim
/// only hands an endpoint the room it has left, so this is also what bounds each endpoint's
/// concurrency.
#[derive(Default)]
struct InFlight {
    leases: HashMap<DeliveryId, (LeaseToken, EndpointId)>,
    per_endpoint: HashMap<EndpointId, usize>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, InFlight> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Free slots, and the room each endpoint has left.
    fn capacity(&self, settings: &DeliverySettings) -> (usize, EndpointRoom) {
        let f = self.lock();
        let free = settings.max_in_flight.saturating_sub(f.leases.len());
        let room = EndpointRoom {
            default: settings.max_per_endpoint,
            except: f
                .per_endpoint
                .iter()
                .map(|(ep, n)| (*ep, settings.max_per_endpoint.saturating_sub(*n)))
                .collect(),
        };
        (free, room)
    }

    /// Registers a claimed delivery.
    fn start(&self, c: &ClaimedDelivery) {
        let mut f = self.lock();
        let ep = c.delivery.endpoint_id;
        f.leases.insert(c.delivery.id, (c.lease.clone(), ep));
        *f.per_endpoint.entry(ep).or_default() += 1;
        metrics::gauge!(m::IN_FLIGHT).set(f.leases.len() as f64);
    }

    /// Forgets recorded deliveries and wakes the claim loop.
    fn finish(&self, ids: impl IntoIterator<Item = DeliveryId>) {
        let mut f = self.lock();
        for id in ids {
            if let Some((_, ep)) = f.leases.remove(&id) {
                if let Some(n) = f.per_endpoint.get_mut(&ep) {
                    *n -= 1;
                    if *n == 0 {
                        f.per_endpoint.remove(&ep);
                    }
                }
            }
        }
        metrics::gauge!(m::IN_FLIGHT).set(f.leases.len() as f64);
        drop(f);
        self.freed.notify_one();
    }

    fn leases(&self) -> Vec<(DeliveryId, LeaseToken)> {
        self.lock()
            .leases
            .iter()
            .map(|(id, (lease, _))| (*id, lease.clone()))
            .collect()
    }
}

impl Dispatcher {
    /// A dispatcher for `queue`; `wake` is notified whenever new work may be due.
    pub fn new(
        queue: Arc<dyn DeliveryQueue>,
        egress: vow_egress::EgressClient,
        settings: DeliverySettings,
        wake: Arc<Notify>,
    ) -> Self {
        let env = Arc::new(AttemptEnv {
            egress,
            schedule: settings.schedule.clone(),
            timeout: settings.timeout,
        });
        Self {
            queue,
            env,
            settings,
            wake,
            operational: None,
        }
    }

    /// Sends operational events through `operational`.
    pub fn with_operational(mut self, operational: Operational) -> Self {
        self.operational = Some(operational);
        self
    }

    /// Runs until `shutdown`, then lets running attempts finish (bounded by the attempt
    /// timeout) and records their outcomes.
    pub async fn run(self, shutdown: CancellationToken) {
        let shared = Arc::new(Shared::default());
        let (outcomes, rx) = mpsc::unbounded_channel();
        let recorder = tokio::spawn(record(
            self.queue.clone(),
            rx,
            shared.clone(),
            self.settings.disable_after,
            self.operational.clone(),
        ));
        let stop_heartbeat = CancellationToken::new();
        let heartbeat = tokio::spawn(heartbeat(
            self.queue.clone(),
            shared.clone(),
            self.settings.lease,
            stop_heartbeat.clone(),
        ));
        let mut tasks = JoinSet::new();
        let mut backoff = Backoff::default();
        while !shutdown.is_cancelled() {
            while tasks.try_join_next().is_some() {}
            let (free, room) = shared.capacity(&self.settings);
            // While attempts run, wait for a worthwhile batch of free slots: every claim costs a
            // store round trip (and on SQLite a turn of the one writer) however few it takes.
            let running = self.settings.max_in_flight - free;
            if free == 0 || (running > 0 && free < self.settings.max_in_flight / 8) {
                tokio::select! {
                    _ = shared.freed.notified() => continue,
                    _ = shutdown.cancelled() => break,
                }
            }
            let request = ClaimRequest {
                now: Utc::now().trunc_subsecs(6),
                lease: chrono::Duration::from_std(self.settings.lease).unwrap_or_default(),
                limit: free.min(self.settings.claim_batch),
                room,
            };
            let claimed = match self.queue.claim_deliveries(&request).await {
                Ok(claimed) => claimed,
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff.delay(), "claiming deliveries failed");
                    if !backoff.sleep_unless(&shutdown).await {
                        break;
                    }
                    continue;
                }
            };
            backoff.reset();
            let full = claimed.len() == request.limit;
            for c in claimed {
                shared.start(&c);
                let (env, shared, outcomes) = (self.env.clone(), shared.clone(), outcomes.clone());
                tasks.spawn(async move {
                    if let Some(rate) = c.endpoint.throttle_rate {
                        shared.throttle.wait(c.delivery.endpoint_id, rate).await;
                    }
                    let outcome = attempt::run(&env, &c, Utc::now()).await;
                    // The recorder only stops after every sender is gone.
                    let _ = outcomes.send((outcome, c.delivery));
                });
            }
            if full {
                continue;
            }
            let idle = self.idle_wait(request.now).await;
            tokio::select! {
                _ = self.wake.notified() => {},
                _ = shared.freed.notified() => {},
                _ = tokio::time::sleep(idle) => {},
                _ = shutdown.cancelled() => break,
            }
        }
        let grace = self.settings.timeout + Duration::from_secs(5);
        if tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} })
            .await
            .is_err()
        {
            tracing::warn!("attempts still running at shutdown; their leases will expire and another worker retries them");
            tasks.abort_all();
        }
        drop(outcomes);
        let _ = recorder.await;
        stop_heartbeat.cancel();
        let _ = heartbeat.await;
    }

    /// Attempts everything due at `now`, records it, and repeats until nothing is due; returns
    /// how many attempts it recorded. Deterministic (no background tasks), for tests and
    /// `vow demo`: move `now` forward to reach retries.
    pub async fn drain_at(&self, now: DateTime<Utc>) -> StoreResult<usize> {
        let mut total = 0;
        loop {
            let request = ClaimRequest {
                now,
                lease: chrono::Duration::from_std(self.settings.lease).unwrap_or_default(),
                limit: self.settings.claim_batch,
                room: EndpointRoom::unlimited(),
            };
            let claimed = self.queue.claim_deliveries(&request).await?;
            if claimed.is_empty() {
                return Ok(total);
            }
            let mut attempts = JoinSet::new();
            for c in claimed {
                let env = self.env.clone();
                attempts.spawn(async move { (attempt::run(&env, &c, now).await, c.delivery) });
            }
            let finished: Vec<Finished> = attempts.join_all().await;
            total += finished.iter().filter(|(o, _)| o.attempt.is_some()).count();
            let outcomes = finished.iter().map(|(o, _)| o.clone()).collect();
            let results = self
                .queue
                .record_attempts(outcomes, self.settings.disable_after)
                .await?;
            for ((outcome, _), result) in finished.iter().zip(&results) {
                account(outcome, result);
            }
            observe(self.operational.as_ref(), &finished, &results).await;
        }
    }

    /// How long to sleep after a claim at `claimed_at` took everything it could: until the next
    /// delivery is due, at most the poll interval (work queued by another process only shows up
    /// by polling). A delivery that was already due at `claimed_at` and not taken belongs to an
    /// endpoint without room: only a freed slot (which wakes the loop) makes it claimable.
    async fn idle_wait(&self, claimed_at: DateTime<Utc>) -> Duration {
        let poll = self.settings.poll_interval;
        match self.queue.next_due().await {
            Ok(Some(due)) if due <= claimed_at => poll,
            Ok(Some(due)) => (due - Utc::now()).to_std().unwrap_or_default().min(poll),
            Ok(None) => poll,
            Err(e) => {
                tracing::warn!(error = %e, "reading the next due delivery failed");
                poll
            }
        }
    }
}

/// Writes outcomes back in batches. A store error is retried (the outcome is never dropped:
/// if the process dies first, the lease expires and the delivery is attempted again).
async fn record(
    queue: Arc<dyn DeliveryQueue>,
    mut rx: mpsc::UnboundedReceiver<Finished>,
    shared: Arc<Shared>,
    disable_after: u32,
    operational: Option<Operational>,
) {
    let mut batch = Vec::with_capacity(RECORD_BATCH);
    while rx.recv_many(&mut batch, RECORD_BATCH).await > 0 {
        let mut backoff = Backoff::default();
        let outcomes: Vec<AttemptOutcome> = batch.iter().map(|(o, _)| o.clone()).collect();
        let results = loop {
            match queue.record_attempts(outcomes.clone(), disable_after).await {
                Ok(results) => break results,
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff.delay(), "recording attempts failed");
                    backoff.sleep().await;
                }
            }
        };
        for ((outcome, _), result) in batch.iter().zip(&results) {
            account(outcome, result);
        }
        observe(operational.as_ref(), &batch, &results).await;
        shared.finish(batch.drain(..).map(|(o, _)| o.delivery_id));
    }
}

/// Emits the operational events recorded outcomes call for.
async fn observe(operational: Option<&Operational>, finished: &[Finished], results: &[Recorded]) {
    let Some(op) = operational else { return };
    for ((outcome, delivery), result) in finished.iter().zip(results) {
        op.observe(outcome, delivery, result).await;
    }
}

/// Logs a recorded outcome and counts it in the metrics.
fn account(outcome: &AttemptOutcome, result: &Recorded) {
    use vow_store::queue::NextState;
    let kind = match &outcome.next {
        NextState::Delivered => "delivered",
        NextState::RetryAt { .. } => "retry",
        NextState::DeadLetter { .. } => "dead_lettered",
        NextState::Hold => "held",
    };
    match (result, &outcome.next) {
        (Recorded::LeaseLost, _) => {
            metrics::counter!(m::LEASES_LOST).increment(1);
            tracing::info!(delivery = %outcome.delivery_id, "lease lost before recording; another worker owns this delivery");
            return;
        }
        (Recorded::Stored { endpoint_disabled }, NextState::DeadLetter { reason, .. }) => {
            metrics::counter!(m::DEAD_LETTERED).increment(1);
            tracing::warn!(delivery = %outcome.delivery_id, %reason, endpoint_disabled, "delivery dead-lettered")
        }
        (Recorded::Stored { .. }, next) => {
            tracing::debug!(delivery = %outcome.delivery_id, ?next, "attempt recorded")
        }
    }
    if outcome.attempt.is_some() {
        metrics::counter!(m::ATTEMPTS, "outcome" => kind).increment(1);
    }
    if let Recorded::Stored {
        endpoint_disabled: true,
    } = result
    {
        metrics::counter!(m::ENDPOINTS_DISABLED).increment(1);
    }
}

/// Renews the leases of running attempts every third of the lease.
async fn heartbeat(
    queue: Arc<dyn DeliveryQueue>,
    shared: Arc<Shared>,
    lease: Duration,
    stop: CancellationToken,
) {
    let every = lease / 3;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {},
            _ = stop.cancelled() => return,
        }
        let leases = shared.leases();
        if leases.is_empty() {
            continue;
        }
        let until =
            Utc::now().trunc_subsecs(6) + chrono::Duration::from_std(lease).unwrap_or_default();
        match queue.renew_leases(&leases, until).await {
            Ok(kept) if kept < leases.len() => {
                tracing::info!(lost = leases.len() - kept, "some leases were taken over")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "renewing leases failed"),
        }
    }
}
