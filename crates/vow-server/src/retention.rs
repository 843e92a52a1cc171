//! Retention: a background cleaner that deletes old messages whole (with their deliveries and
//! attempts), expired message payloads and old attempt response bodies, ages `Idempotency-Key`
//! records into tombstones and then out, and removes old raw inbound payloads and rejection
//! records, in small batches. After each batch it pauses five times as long as the batch took,
//! so it takes at most a sixth of the store's time, and less when the store is busy (its
//! batches then take longer): a store catching up on months of old rows keeps taking messages.

use std::future::Future;
use std::time::{Duration, Instant};

use chrono::{DateTime, SubsecRound, Utc};
use tokio_util::sync::CancellationToken;
use vow_store::StoreResult;

use crate::metrics as m;
use crate::stores::Stores;

/// Rows changed per store call.
const BATCH: usize = 500;

/// After a batch, the pause is this many times as long as the batch took.
const PAUSE_PER_BATCH: u32 = 5;

/// The shortest pause between two batches.
const MIN_PAUSE: Duration = Duration::from_millis(10);

/// The longest pause between two batches, however slow the last one was.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// How long each kind of content is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// Messages, with their deliveries and attempts, after their creation (`None`: forever).
    pub messages: Option<chrono::Duration>,
    /// Attempt response bodies.
    pub responses: chrono::Duration,
    /// Raw inbound payloads and rejection records.
    pub inbound: chrono::Duration,
}

/// What the cleaner purges, and how long content is kept.
pub struct Cleaner {
    stores: Stores,
    kept: Kept,
}

impl Cleaner {
    /// A cleaner of `stores` keeping content as long as `kept` says.
    pub fn new(stores: Stores, kept: Kept) -> Self {
        Self { stores, kept }
    }

    /// Runs until `shutdown`: every `every`, one [`Cleaner::sweep`].
    pub async fn run(self, every: Duration, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {},
                _ = shutdown.cancelled() => return,
            }
            self.sweep(Utc::now().trunc_subsecs(6)).await;
        }
    }

    /// Purges everything due at `now`, each kind in batches until a batch comes back short.
    /// Old messages go first, so the payloads and responses they hold are not cleared first.
    pub async fn sweep(&self, now: DateTime<Utc>) {
        let started = Instant::now();
        let Stores {
            store,
            queue,
            inbound,
            ..
        } = &self.stores;
        if let Some(kept) = self.kept.messages {
            in_batches("messages", || queue.purge_messages(now - kept, BATCH)).await;
        }
        in_batches("content", || {
            queue.purge_expired(now, now - self.kept.responses, BATCH)
        })
        .await;
        in_batches("idempotency_records", || async {
            let aged = store.purge_idempotent(now, BATCH).await?;
            Ok(aged as u64)
        })
        .await;
        in_batches("inbound_payloads", || {
            inbound.purge_inbound(now - self.kept.inbound, BATCH)
        })
        .await;
        in_batches("sessions", || async {
            let ended = store.purge_sessions(now, BATCH).await?;
            Ok(ended as u64)
        })
        .await;
        metrics::histogram!(m::RETENTION_SWEEP_SECONDS).record(started.elapsed().as_secs_f64());
    }
}

/// Calls `purge` until it changes fewer than [`BATCH`] rows (or fails), pausing in between.
async fn in_batches<F, Fut>(what: &'static str, mut purge: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<u64>>,
{
    loop {
        let started = Instant::now();
        let purged = purge().await;
        if let Ok(n) = purged {
            metrics::counter!(m::RETENTION_PURGED, "what" => what).increment(n);
        }
        match purged {
            Ok(n) if (n as usize) < BATCH => return,
            Ok(n) => tracing::debug!(rows = n, what, "purged a batch"),
            Err(e) => {
                tracing::warn!(error = %e, what, "purging failed");
                return;
            }
        }
        tokio::time::sleep(pause_after(started.elapsed())).await;
    }
}

/// The pause after a batch that took `batch`: [`PAUSE_PER_BATCH`] times as long, within
/// [`MIN_PAUSE`] and [`MAX_PAUSE`].
fn pause_after(batch: Duration) -> Duration {
    (batch * PAUSE_PER_BATCH).clamp(MIN_PAUSE, MAX_PAUSE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slower_batch_is_followed_by_a_longer_pause_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(pause_after(ms(20)), ms(100));
        assert_eq!(pause_after(ms(60)), ms(300));
        assert_eq!(pause_after(ms(1)), MIN_PAUSE);
        assert_eq!(pause_after(Duration::from_secs(3)), MAX_PAUSE);
    }
}
