//! The delivery worker of one process: deliveries as [`worker`] work (the claim loop, heartbeat
//! and shutdown drain are the generic ones), with its in-flight bookkeeping and recorder.
//!
//! An endpoint may hold more claims than request slots (`DeliverySettings::claim_ahead`): the
//! claims beyond them wait in the process for a slot. At shutdown those still waiting are not
//! attempted: they give their leases back ([`given_back`]), so another process takes them at
//! once and the shutdown waits only for the requests already running.
//!
//! [`Occupancy`] tells the backlog bound ([`crate::admission`]) where each endpoint's claims
//! wait: on the endpoint (for a slot, or in a request) or on this process (to be recorded).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, SubsecRound, Utc};
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use vow_core::{DeliveryId, EndpointId};
use vow_store::queue::{
    AttemptOutcome, ClaimRequest, ClaimedDelivery, EndpointRoom, LeaseToken, NextState, Recorded,
};
use vow_store::{Delivery, DeliveryQueue, StoreResult};

use super::attempt::{self, AttemptEnv};
use super::operational::Operational;
use super::settings::DeliverySettings;
use super::throttle::Throttle;
use crate::metrics as m;
use crate::worker::{self, lock, Backoff, Texts, Work};

/// Outcomes written per store call at most.
const RECORD_BATCH: usize = 512;

/// Claims and attempts deliveries until shut down.
pub struct Dispatcher {
    queue: Arc<dyn DeliveryQueue>,
    env: Arc<AttemptEnv>,
    settings: DeliverySettings,
    wake: Arc<Notify>,
    operational: Option<Operational>,
    shared: Arc<Shared>,
}

/// An outcome and the delivery it is about, on its way to the recorder.
type Finished = (AttemptOutcome, Delivery);

/// What the claim loop, the attempt tasks, the heartbeat and the recorder share.
struct Shared {
    /// Claims held at once at most (`max_in_flight`).
    places: usize,
    /// Requests in flight per endpoint at most (`max_per_endpoint`).
    slots_per_endpoint: usize,
    /// Claims an endpoint may hold: `claim_ahead` times its slots.
    claims_per_endpoint: usize,
    in_flight: Mutex<InFlight>,
    /// Signalled when an in-flight slot frees up.
    freed: Notify,
    throttle: Throttle,
}

/// Claims not yet recorded (how many, and the lease each delivery is held under) and each
/// endpoint's claims not yet attempted. A claim only hands an endpoint the room it has left
/// (`claim_ahead` times its slots), and an attempt waits for one of its endpoint's slots, so
/// each endpoint's concurrency is bounded: a slot is a request to it, and frees as its response
/// is in, while the claim's place among `max_in_flight` is held until its outcome is written
/// (the lease keeps the delivery from being claimed again until then).
///
/// A delivery can be claimed again by this process while the outcome of its earlier attempt
/// still waits to be recorded: when that lease ran out first (the store was unreachable for
/// longer than a lease, so neither the outcome nor a renewal could be written). Each claim holds
/// its place until its own outcome is recorded (the earlier one is then refused as
/// `LeaseLost`), and the newer lease is the one the heartbeat renews.
#[derive(Default)]
struct InFlight {
    claims: usize,
    /// Claims recorded since the dispatcher was made.
    recorded: u64,
    leases: HashMap<DeliveryId, LeaseToken>,
    per_endpoint: HashMap<EndpointId, EndpointWork>,
}

/// An endpoint's claims not yet attempted to the end, its claims not yet recorded, and its
/// request slots; forgotten when it has no claim left, so no task still waits for those slots.
struct EndpointWork {
    claimed: usize,
    held: usize,
    slots: Arc<Semaphore>,
}

impl Shared {
    fn new(settings: &DeliverySettings) -> Self {
        Self {
            places: settings.max_in_flight,
            slots_per_endpoint: settings.max_per_endpoint,
            claims_per_endpoint: settings.max_per_endpoint * settings.claim_ahead.max(1),
            in_flight: Mutex::default(),
            freed: Notify::new(),
            throttle: Throttle::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InFlight> {
        lock(&self.in_flight)
    }

    /// Free slots, and the room each endpoint has left.
    fn capacity(&self, settings: &DeliverySettings) -> (usize, EndpointRoom) {
        let f = self.lock();
        let free = settings.max_in_flight.saturating_sub(f.claims);
        let most = self.claims_per_endpoint;
        let room = EndpointRoom {
            default: most,
            except: f
                .per_endpoint
                .iter()
                .map(|(ep, w)| (*ep, most.saturating_sub(w.claimed)))
                .collect(),
        };
        (free, room)
    }

    /// Registers a claimed delivery; the slots of its endpoint, which its attempt waits for.
    fn start(&self, c: &ClaimedDelivery) -> Arc<Semaphore> {
        self.take(c.delivery.id, c.lease.clone(), c.delivery.endpoint_id)
    }

    /// Takes a place and a share of `endpoint`'s room for the claim of `id` under `lease`;
    /// the endpoint's slots.
    fn take(&self, id: DeliveryId, lease: LeaseToken, endpoint: EndpointId) -> Arc<Semaphore> {
        let mut f = self.lock();
        f.claims += 1;
        f.leases.insert(id, lease);
        metrics::gauge!(m::IN_FLIGHT).set(f.claims as f64);
        let work = f
            .per_endpoint
            .entry(endpoint)
            .or_insert_with(|| EndpointWork {
                claimed: 0,
                held: 0,
                slots: Arc::new(Semaphore::new(self.slots_per_endpoint)),
            });
        work.claimed += 1;
        work.held += 1;
        work.slots.clone()
    }

    /// Gives back the share of `endpoint`'s room of a claim whose attempt has its response (or
    /// gave up; its slot is already free), and wakes the claim loop.
    fn attempted(&self, endpoint: EndpointId) {
        if let Some(w) = self.lock().per_endpoint.get_mut(&endpoint) {
            w.claimed = w.claimed.saturating_sub(1);
        }
        self.freed.notify_one();
    }

    /// Frees the places of recorded claims (each delivery, the lease it was attempted under
    /// and its endpoint) and wakes the claim loop. A delivery's lease is forgotten with its own
    /// claim only: one a newer claim replaced is renewed until that claim is recorded.
    fn finish(&self, recorded: impl IntoIterator<Item = (DeliveryId, LeaseToken, EndpointId)>) {
        let mut f = self.lock();
        for (id, lease, endpoint) in recorded {
            f.recorded += 1;
            if f.leases.get(&id) == Some(&lease) {
                f.leases.remove(&id);
            }
            f.claims = f.claims.saturating_sub(1);
            if let Some(w) = f.per_endpoint.get_mut(&endpoint) {
                w.held = w.held.saturating_sub(1);
                if w.held == 0 {
                    f.per_endpoint.remove(&endpoint);
                }
            }
        }
        metrics::gauge!(m::IN_FLIGHT).set(f.claims as f64);
        drop(f);
        self.freed.notify_one();
    }

    /// Each endpoint with claims not yet recorded, and the share of them that wait for or are
    /// in a request to it.
    fn on_the_endpoint(&self) -> Vec<(EndpointId, f64)> {
        let f = self.lock();
        let share = |w: &EndpointWork| w.claimed.min(w.held) as f64 / w.held.max(1) as f64;
        f.per_endpoint
            .iter()
            .map(|(ep, w)| (*ep, share(w)))
            .collect()
    }

    fn leases(&self) -> Vec<(DeliveryId, LeaseToken)> {
        self.lock()
            .leases
            .iter()
            .map(|(id, lease)| (*id, lease.clone()))
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
            relay: Arc::default(),
        });
        Self {
            queue,
            env,
            shared: Arc::new(Shared::new(&settings)),
            settings,
            wake,
            operational: None,
        }
    }

    /// What this dispatcher's claims wait on, for the backlog bound ([`crate::admission`]).
    pub fn occupancy(&self) -> Occupancy {
        Occupancy(self.shared.clone())
    }

    /// Attempts relay endpoints through `hub` (the one the API's `vow listen` streams
    /// register with).
    pub fn with_relay(mut self, hub: Arc<crate::relay::Hub>) -> Self {
        let env = AttemptEnv {
            relay: hub,
            ..(*self.env).clone()
        };
        self.env = Arc::new(env);
        self
    }

    /// Sends operational events through `operational`.
    pub fn with_operational(mut self, operational: Operational) -> Self {
        self.operational = Some(operational);
        self
    }

    /// Runs until `shutdown`, then lets running attempts finish (bounded by the attempt
    /// timeout) and records their outcomes.
    pub async fn run(self, shutdown: CancellationToken) {
        let (outcomes, rx) = mpsc::unbounded_channel();
        let recorder = tokio::spawn(record(
            self.queue.clone(),
            rx,
            self.shared.clone(),
            self.settings.disable_after,
            self.operational.clone(),
        ));
        let timing = self.settings.timing();
        let work = Arc::new(Deliveries {
            dispatcher: self,
            stopping: shutdown.clone(),
            outcomes: Mutex::new(Some(outcomes)),
            recorder: Mutex::new(Some(recorder)),
        });
        worker::run(work, timing, shutdown).await;
    }

    /// Claims at most `limit` deliveries due at `now`, within `room`, under a lease.
    async fn claim(
        &self,
        now: DateTime<Utc>,
        limit: usize,
        room: EndpointRoom,
    ) -> StoreResult<Vec<ClaimedDelivery>> {
        let request = ClaimRequest {
            now,
            lease: chrono::Duration::from_std(self.settings.lease).unwrap_or_default(),
            limit,
            room,
        };
        self.queue.claim_deliveries(&request).await
    }

    /// Attempts everything due at `now`, records it, and repeats until nothing is due; returns
    /// how many attempts it recorded. Deterministic (no background tasks), for tests and
    /// `vow demo`: move `now` forward to reach retries.
    pub async fn drain_at(&self, now: DateTime<Utc>) -> StoreResult<usize> {
        let mut total = 0;
        loop {
            let claimed = self
                .claim(now, self.settings.claim_batch, EndpointRoom::unlimited())
                .await?;
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
            settled(self.operational.as_ref(), &finished, &results).await;
        }
    }
}

/// What a [`Dispatcher`]'s claims wait on: the endpoint, or this process.
#[derive(Clone)]
pub struct Occupancy(Arc<Shared>);

impl Occupancy {
    /// Each endpoint with claims not yet recorded here, and the share of them (0 to 1) that
    /// wait for one of its request slots or are in a request to it. The rest wait on this
    /// process: for a core, or for their outcome to be written.
    pub fn on_the_endpoint(&self) -> Vec<(EndpointId, f64)> {
        self.0.on_the_endpoint()
    }

    /// Claims recorded so far (their outcomes written), and the most held at once.
    pub fn recorded_of_places(&self) -> (u64, usize) {
        (self.0.lock().recorded, self.0.places)
    }
}

/// One run of a [`Dispatcher`]: deliveries as [`worker`] work. Finished attempts go to the
/// recorder, which frees their slots once their outcomes are stored.
struct Deliveries {
    dispatcher: Dispatcher,
    /// Cancelled at shutdown: a claim still waiting for its endpoint's slot gives its lease back.
    stopping: CancellationToken,
    /// The recorder's input; closed when the run settles, so the recorder finishes.
    outcomes: Mutex<Option<mpsc::UnboundedSender<Finished>>>,
    recorder: Mutex<Option<JoinHandle<()>>>,
}

impl Work for Deliveries {
    type Room = EndpointRoom;
    type Item = ClaimedDelivery;
    type Lease = (DeliveryId, LeaseToken);

    const TEXTS: Texts = Texts {
        claim_failed: "claiming deliveries failed",
        next_due_failed: "reading the next due delivery failed",
        leases_lost: "some leases were taken over",
        renew_failed: "renewing leases failed",
        still_running: "attempts still running at shutdown; their leases will expire and another worker retries them",
    };

    const WOKEN_BY_FREED_SLOT: bool = true;

    /// While attempts run, waits for a worthwhile batch of free slots: every claim costs a store
    /// round trip (and on SQLite a turn of the one writer) however few it takes. Relay
    /// endpoints whose listener was lately missed here get none ([`Hub::passed_over`]).
    ///
    /// [`Hub::passed_over`]: crate::relay::Hub::passed_over
    fn room(&self) -> Option<(usize, EndpointRoom)> {
        let settings = &self.dispatcher.settings;
        let (free, mut room) = self.dispatcher.shared.capacity(settings);
        let running = settings.max_in_flight - free;
        if free == 0 || (running > 0 && free < settings.max_in_flight / 8) {
            return None;
        }
        let passed_over = self.dispatcher.env.relay.passed_over();
        room.except
            .extend(passed_over.into_iter().map(|ep| (ep, 0)));
        Some((free.min(settings.claim_batch), room))
    }

    fn slot_freed(&self) -> impl Future<Output = ()> + Send + '_ {
        self.dispatcher.shared.freed.notified()
    }

    async fn claim(
        &self,
        now: DateTime<Utc>,
        limit: usize,
        room: EndpointRoom,
    ) -> StoreResult<Vec<ClaimedDelivery>> {
        self.dispatcher.claim(now, limit, room).await
    }

    fn start(self: &Arc<Self>, c: ClaimedDelivery) -> impl Future<Output = ()> + Send + 'static {
        let slots = self.dispatcher.shared.start(&c);
        let (env, shared) = (self.dispatcher.env.clone(), self.dispatcher.shared.clone());
        let queue = self.dispatcher.queue.clone();
        let outcomes = lock(&self.outcomes).clone();
        let stopping = self.stopping.clone();
        async move {
            // Claims run ahead of the endpoint's slots; the semaphore is never closed.
            let slot = tokio::select! {
                biased;
                _ = stopping.cancelled() => None,
                slot = slots.acquire() => slot.ok(),
            };
            let outcome = match slot {
                None => given_back(&c),
                Some(_slot) => {
                    if let Some(rate) = c.endpoint.throttle_rate {
                        let endpoint = c.delivery.endpoint_id;
                        shared.throttle.wait(queue.as_ref(), endpoint, rate).await;
                    }
                    attempt::run(&env, &c, Utc::now()).await
                }
            };
            shared.attempted(c.delivery.endpoint_id);
            // The recorder only stops after every sender is gone.
            if let Some(outcomes) = outcomes {
                let _ = outcomes.send((outcome, c.delivery));
            }
        }
    }

    async fn woken(&self) {
        tokio::select! {
            _ = self.dispatcher.wake.notified() => {},
            _ = self.dispatcher.shared.freed.notified() => {},
        }
    }

    async fn next_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        self.dispatcher.queue.next_due().await
    }

    fn leases(&self) -> Vec<(DeliveryId, LeaseToken)> {
        self.dispatcher.shared.leases()
    }

    async fn renew(
        &self,
        leases: &[(DeliveryId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize> {
        self.dispatcher.queue.renew_leases(leases, until).await
    }

    /// Closes the recorder's input and waits until it stored every outcome.
    async fn settle(&self) {
        drop(lock(&self.outcomes).take());
        let recorder = lock(&self.recorder).take();
        if let Some(recorder) = recorder {
            let _ = recorder.await;
        }
    }
}

/// What a claim not attempted at shutdown records: its lease given back, its due time and
/// counts as they were, no attempt (so another process can take it at once, not once the lease
/// has run out).
fn given_back(c: &ClaimedDelivery) -> AttemptOutcome {
    AttemptOutcome {
        delivery_id: c.delivery.id,
        lease: c.lease.clone(),
        attempt: None,
        next: NextState::RetryAt {
            at: c.delivery.next_attempt_at,
            client_errors: c.delivery.client_errors,
        },
        now: Utc::now().trunc_subsecs(6),
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
        settled(operational.as_ref(), &batch, &results).await;
        let recorded = batch.drain(..);
        shared.finish(recorded.map(|(o, d)| (o.delivery_id, o.lease, d.endpoint_id)));
    }
}

/// After outcomes are recorded: accounts each in logs and metrics, and emits the operational
/// events they call for.
async fn settled(operational: Option<&Operational>, finished: &[Finished], results: &[Recorded]) {
    for ((outcome, delivery), result) in finished.iter().zip(results) {
        account(outcome, delivery, result);
        if let Some(op) = operational {
            op.observe(outcome, delivery, result).await;
        }
    }
}

/// Logs a recorded outcome and counts and times it in the metrics.
fn account(outcome: &AttemptOutcome, delivery: &Delivery, result: &Recorded) {
    let kind = outcome.next.kind();
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
    if let Some(attempt) = &outcome.attempt {
        metrics::counter!(m::ATTEMPTS, "outcome" => kind).increment(1);
        let took = attempt.duration_ms as f64 / 1000.0;
        metrics::histogram!(m::ATTEMPT_SECONDS, "outcome" => kind).record(took);
        if matches!(outcome.next, NextState::Delivered) && !delivery.manual {
            let done =
                attempt.started_at + chrono::TimeDelta::milliseconds(attempt.duration_ms as i64);
            metrics::histogram!(m::END_TO_END_SECONDS)
                .record(m::seconds(done - delivery.created_at));
        }
    }
    if let Recorded::Stored {
        endpoint_disabled: true,
    } = result
    {
        metrics::counter!(m::ENDPOINTS_DISABLED).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Places held, the leases renewed, and each endpoint's claims not yet attempted.
    fn slots(shared: &Shared) -> (usize, Vec<(DeliveryId, LeaseToken)>, Vec<usize>) {
        let leases = shared.leases();
        let f = shared.lock();
        let claimed = f.per_endpoint.values().map(|w| w.claimed).collect();
        (f.claims, leases, claimed)
    }

    /// An endpoint may hold `claim_ahead` times its slots claimed, and its room shrinks by
    /// each claim; only its slots' worth of attempts get a slot, the next waits for one to free.
    #[test]
    fn claims_run_ahead_of_an_endpoints_slots_but_requests_do_not() {
        let settings = DeliverySettings {
            max_per_endpoint: 2,
            claim_ahead: 2,
            ..DeliverySettings::default()
        };
        let shared = Shared::new(&settings);
        let endpoint = EndpointId::new();
        let lease = LeaseToken("lease".into());
        let slots: Vec<_> = (0..3)
            .map(|_| shared.take(DeliveryId::new(), lease.clone(), endpoint))
            .collect();
        let (_, room) = shared.capacity(&settings);
        assert_eq!(room.default, 4);
        assert_eq!(room.except, HashMap::from([(endpoint, 4 - 3)]));
        let first = slots[0].try_acquire().expect("a slot for the first");
        let _second = slots[1].try_acquire().expect("a slot for the second");
        assert!(slots[2].try_acquire().is_err(), "the third waits");
        drop(first);
        assert!(
            slots[2].try_acquire().is_ok(),
            "a freed slot goes to the third"
        );
    }

    /// The store was down for longer than a lease: this process claimed a delivery again
    /// while its earlier attempt's outcome waited to be recorded. Both claims give their place
    /// back, in either order, and the newer lease is renewed while it is held. The endpoint's
    /// room is given back as the attempts end, before their outcomes are recorded; the
    /// endpoint is forgotten once both are.
    #[test]
    fn a_delivery_claimed_again_before_its_outcome_is_recorded_frees_both_places() {
        let (id, endpoint) = (DeliveryId::new(), EndpointId::new());
        let (old, new) = (LeaseToken("old".into()), LeaseToken("new".into()));
        for old_first in [true, false] {
            let shared = Shared::new(&DeliverySettings::default());
            let _ = shared.take(id, old.clone(), endpoint);
            let _ = shared.take(id, new.clone(), endpoint);
            assert_eq!(slots(&shared), (2, vec![(id, new.clone())], vec![2]));
            shared.attempted(endpoint);
            assert_eq!(slots(&shared), (2, vec![(id, new.clone())], vec![1]));
            shared.attempted(endpoint);
            assert_eq!(slots(&shared), (2, vec![(id, new.clone())], vec![0]));
            if old_first {
                shared.finish([(id, old.clone(), endpoint)]);
                assert_eq!(slots(&shared), (1, vec![(id, new.clone())], vec![0]));
                shared.finish([(id, new.clone(), endpoint)]);
            } else {
                shared.finish([(id, new.clone(), endpoint)]);
                assert_eq!(slots(&shared), (1, vec![], vec![0]));
                shared.finish([(id, old.clone(), endpoint)]);
            }
            assert_eq!(
                slots(&shared),
                (0, vec![], vec![]),
                "no place is left taken"
            );
        }
    }

    /// An endpoint's claims are on the endpoint while they wait for or are in a request to it,
    /// and on this process once their attempt has ended until their outcome is recorded.
    #[test]
    fn the_share_of_claims_on_the_endpoint_falls_as_attempts_end_and_rises_as_they_are_recorded() {
        let shared = Shared::new(&DeliverySettings::default());
        let (slow, fast) = (EndpointId::new(), EndpointId::new());
        let lease = LeaseToken("lease".into());
        let ids: Vec<DeliveryId> = (0..4).map(|_| DeliveryId::new()).collect();
        for (id, endpoint) in ids.iter().zip([slow, slow, fast, fast]) {
            let _ = shared.take(*id, lease.clone(), endpoint);
        }
        let shares = |shared: &Shared| {
            let all: HashMap<EndpointId, f64> = shared.on_the_endpoint().into_iter().collect();
            (all.get(&slow).copied(), all.get(&fast).copied())
        };
        assert_eq!(shares(&shared), (Some(1.0), Some(1.0)));
        shared.attempted(fast);
        assert_eq!(shares(&shared), (Some(1.0), Some(0.5)));
        shared.attempted(fast);
        assert_eq!(shares(&shared), (Some(1.0), Some(0.0)));
        shared.finish([(ids[2], lease.clone(), fast), (ids[3], lease.clone(), fast)]);
        assert_eq!(shares(&shared), (Some(1.0), None), "recorded: forgotten");
    }
}
