//! The loop's turns, driven with a work kind whose claims, items and wake-ups the test controls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use vow_store::StoreResult;

use super::{run, Texts, Timing, Work};

/// Hands out the items queued in `claimable`, one claim at a time (up to the limit); an item
/// runs until `finish` is notified, then frees its slot.
#[derive(Default)]
struct Scripted {
    claimable: Mutex<usize>,
    claims: AtomicUsize,
    next_due_asked: AtomicUsize,
    running: AtomicUsize,
    finish: Notify,
    freed: Notify,
    wake: Notify,
}

impl Work for Scripted {
    type Room = ();
    type Item = ();
    type Lease = ();

    const TEXTS: Texts = Texts {
        claim_failed: "claim failed",
        next_due_failed: "next due failed",
        leases_lost: "leases lost",
        renew_failed: "renew failed",
        still_running: "still running",
    };

    const WOKEN_BY_FREED_SLOT: bool = true;

    fn room(&self) -> Option<(usize, ())> {
        Some((10, ()))
    }

    async fn slot_freed(&self) {
        self.freed.notified().await
    }

    async fn claim(&self, _now: DateTime<Utc>, limit: usize, _room: ()) -> StoreResult<Vec<()>> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        let mut left = self.claimable.lock().unwrap();
        let n = (*left).min(limit);
        *left -= n;
        Ok(vec![(); n])
    }

    fn start(
        self: &Arc<Self>,
        _item: (),
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.running.fetch_add(1, Ordering::SeqCst);
        let me = self.clone();
        async move {
            me.finish.notified().await;
            me.running.fetch_sub(1, Ordering::SeqCst);
            me.freed.notify_waiters();
        }
    }

    async fn woken(&self) {
        tokio::select! {
            _ = self.wake.notified() => {},
            _ = self.freed.notified() => {},
        }
    }

    async fn next_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        self.next_due_asked.fetch_add(1, Ordering::SeqCst);
        Ok(None)
    }

    fn leases(&self) -> Vec<()> {
        Vec::new()
    }

    async fn renew<'a>(&'a self, _leases: &'a [()], _until: DateTime<Utc>) -> StoreResult<usize> {
        Ok(0)
    }
}

/// Waits (a few seconds at most) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The delivery worker is woken by every new message: while its items run, a claim that finds
/// no room or nothing due does not make it ask the store when the next item is due (on
/// PostgreSQL a walk from the front of each endpoint's pending rows); once nothing runs, it does.
#[tokio::test]
async fn asks_when_the_next_item_is_due_only_when_nothing_runs() {
    let work = Arc::new(Scripted {
        claimable: Mutex::new(1),
        ..Default::default()
    });
    let timing = Timing {
        lease: Duration::from_secs(60),
        timeout: Duration::from_secs(1),
        // Long enough that no turn in this test comes from the poll.
        poll_interval: Duration::from_secs(60),
    };
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(run(work.clone(), timing, shutdown.clone()));

    until("the first claim to start its item", || {
        work.running.load(Ordering::SeqCst) == 1
    })
    .await;
    for woken in 1..=3 {
        let claims = work.claims.load(Ordering::SeqCst);
        work.wake.notify_one();
        until("a claim after the wake-up", || {
            work.claims.load(Ordering::SeqCst) > claims
        })
        .await;
        assert_eq!(work.running.load(Ordering::SeqCst), 1, "wake-up {woken}");
    }
    assert_eq!(work.claims.load(Ordering::SeqCst), 4);
    assert_eq!(work.next_due_asked.load(Ordering::SeqCst), 0);

    // The item finishes: the claim it brings finds nothing, and nothing runs any more.
    work.finish.notify_one();
    until("the store to be asked when the next item is due", || {
        work.next_due_asked.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(work.running.load(Ordering::SeqCst), 0);
    assert_eq!(work.claims.load(Ordering::SeqCst), 5);

    shutdown.cancel();
    worker.await.unwrap();
}
