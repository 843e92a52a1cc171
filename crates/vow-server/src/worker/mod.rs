//! The loop every leased-work worker runs: the delivery [`Dispatcher`](crate::delivery::Dispatcher)
//! and the inbound [`Forwarder`](crate::forwarding::Forwarder) are two kinds of [`Work`] it drives.
//!
//! The store is the queue. Each turn the loop asks the work for room (or waits until a slot is
//! freed), claims at most that much due work under an expiring lease, and runs each item as its
//! own task. A claim that filled its limit is followed by another at once; otherwise the loop
//! idles until it is woken, a slot frees, or the next item is due (at most the poll interval:
//! another process's work only shows up by polling); where a freed slot wakes the loop, only a
//! claim that found nothing while nothing runs asks the store when the next item is due. A
//! failing claim is retried with [`Backoff`]. Beside the loop a heartbeat renews the leases of
//! running items every third of the lease, so a slow item is not taken over while a crashed
//! process's leases run out. On shutdown the loop stops claiming, lets running items finish
//! (bounded by the item timeout plus five seconds, then aborts them: their leases run out and
//! another worker retries them), lets the work settle (e.g. record what finished), and only then
//! stops the heartbeat.
//!
//! # Layout
//! - [`backoff`]: the pause between retries of a failing store call.

pub mod backoff;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use vow_store::StoreResult;

pub use backoff::Backoff;

/// How long a lease lasts, an item may run, and an idle worker waits for work from elsewhere.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Lease length; renewed every third of it while an item runs.
    pub lease: Duration,
    /// The longest one item runs; shutdown waits this (plus five seconds) for running items.
    pub timeout: Duration,
    /// The longest an idle worker waits before it looks for work again.
    pub poll_interval: Duration,
}

/// What a worker's log lines say when something goes wrong.
#[derive(Debug)]
pub struct Texts {
    /// A claim failed (it is retried after a backoff).
    pub claim_failed: &'static str,
    /// Reading when the next item is due failed (the worker waits the poll interval).
    pub next_due_failed: &'static str,
    /// Renewing leases kept fewer than were held.
    pub leases_lost: &'static str,
    /// Renewing leases failed.
    pub renew_failed: &'static str,
    /// Items were still running when the shutdown grace ran out.
    pub still_running: &'static str,
}

/// One kind of leased work: how to claim it, run it, and renew its leases.
pub trait Work: Send + Sync + 'static {
    /// The kind's own limits on a claim, beside how many (e.g. each endpoint's room).
    type Room: Send;
    /// One claimed item, run as its own task.
    type Item: Send + 'static;
    /// The lease of a running item, as its renewal takes it.
    type Lease: Send + Sync + 'static;

    /// What the log lines say.
    const TEXTS: Texts;

    /// Whether [`Work::woken`] also resolves when a running item frees its slot. Then after a
    /// claim that started some items, one of them finishing brings the loop back, and it need
    /// not ask the store when the next item is due.
    const WOKEN_BY_FREED_SLOT: bool = false;

    /// How many items to claim now and the kind's limits, or `None` to wait for a freed slot.
    fn room(&self) -> Option<(usize, Self::Room)>;

    /// Resolves when a running item frees its slot.
    fn slot_freed(&self) -> impl Future<Output = ()> + Send + '_;

    /// Claims at most `limit` items due at `now`, within `room`, leasing them.
    fn claim(
        &self,
        now: DateTime<Utc>,
        limit: usize,
        room: Self::Room,
    ) -> impl Future<Output = StoreResult<Vec<Self::Item>>> + Send + '_;

    /// Registers `item` as running (its slot, its lease) and returns its task.
    fn start(self: &Arc<Self>, item: Self::Item) -> impl Future<Output = ()> + Send + 'static;

    /// Resolves when an idle worker should look for work again (new work, a freed slot).
    fn woken(&self) -> impl Future<Output = ()> + Send + '_;

    /// When the next item is due, if any is queued.
    fn next_due(&self) -> impl Future<Output = StoreResult<Option<DateTime<Utc>>>> + Send + '_;

    /// The leases of the running items.
    fn leases(&self) -> Vec<Self::Lease>;

    /// Extends `leases` to `until`; how many were still held.
    fn renew<'a>(
        &'a self,
        leases: &'a [Self::Lease],
        until: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<usize>> + Send + 'a;

    /// After running items finished at shutdown, before the heartbeat stops (e.g. records what
    /// they left behind).
    fn settle(&self) -> impl Future<Output = ()> + Send + '_ {
        async {}
    }
}

/// Runs `work` until `shutdown`, then drains it (see the module docs).
pub async fn run<W: Work>(work: Arc<W>, timing: Timing, shutdown: CancellationToken) {
    let stop_heartbeat = CancellationToken::new();
    let heartbeat = tokio::spawn(heartbeat(
        work.clone(),
        timing.lease,
        stop_heartbeat.clone(),
    ));
    let mut tasks = JoinSet::new();
    let mut backoff = Backoff::default();
    while !shutdown.is_cancelled() {
        while tasks.try_join_next().is_some() {}
        let Some((limit, room)) = work.room() else {
            tokio::select! {
                _ = work.slot_freed() => continue,
                _ = shutdown.cancelled() => break,
            }
        };
        let now = Utc::now().trunc_subsecs(6);
        let claimed = match work.claim(now, limit, room).await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff.delay(), "{}", W::TEXTS.claim_failed);
                if !backoff.sleep_unless(&shutdown).await {
                    break;
                }
                continue;
            }
        };
        backoff.reset();
        let full = claimed.len() == limit;
        for item in claimed {
            tasks.spawn(work.start(item));
        }
        if full {
            continue;
        }
        // A claim that took some but not all it could: what it left is either not due or held
        // back by the kind's own room (e.g. an endpoint's slots). While items run (`tasks`
        // holds those just started too, until joined) and one of them brings the loop back as
        // it finishes, the loop does not ask the store when the next item falls due: on
        // PostgreSQL a walk from the front of each endpoint's pending rows, past the entries
        // of rows delivered since the last vacuum (measured at 5,000 msg/s offered to one
        // endpoint: 54 ms a call, hundreds of calls a run).
        let idle = if W::WOKEN_BY_FREED_SLOT && !tasks.is_empty() {
            timing.poll_interval
        } else {
            idle_wait(&*work, now, timing.poll_interval).await
        };
        tokio::select! {
            _ = work.woken() => {},
            _ = tokio::time::sleep(idle) => {},
            _ = shutdown.cancelled() => break,
        }
    }
    let grace = timing.timeout + Duration::from_secs(5);
    if tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        tracing::warn!("{}", W::TEXTS.still_running);
        tasks.abort_all();
    }
    work.settle().await;
    stop_heartbeat.cancel();
    let _ = heartbeat.await;
}

/// How long to sleep after a claim at `claimed_at` took everything it could: until the next item
/// is due, at most `poll`. An item that was already due at `claimed_at` and not taken had no room
/// (e.g. its endpoint's): only a freed slot, which wakes the loop, makes it claimable.
async fn idle_wait<W: Work>(work: &W, claimed_at: DateTime<Utc>, poll: Duration) -> Duration {
    match work.next_due().await {
        Ok(Some(due)) if due > claimed_at => {
            (due - Utc::now()).to_std().unwrap_or_default().min(poll)
        }
        Ok(_) => poll,
        Err(e) => {
            tracing::warn!(error = %e, "{}", W::TEXTS.next_due_failed);
            poll
        }
    }
}

/// Renews the leases of running items every third of `lease`.
async fn heartbeat<W: Work>(work: Arc<W>, lease: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(lease / 3) => {},
            _ = stop.cancelled() => return,
        }
        let leases = work.leases();
        if leases.is_empty() {
            continue;
        }
        let until =
            Utc::now().trunc_subsecs(6) + chrono::Duration::from_std(lease).unwrap_or_default();
        match work.renew(&leases, until).await {
            Ok(kept) if kept < leases.len() => {
                tracing::info!(lost = leases.len() - kept, "{}", W::TEXTS.leases_lost)
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "{}", W::TEXTS.renew_failed),
        }
    }
}

/// Locks `m`, also after a task panicked holding it (the bookkeeping it guards stays usable).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
