//! Retention: a background cleaner that deletes expired message payloads and old attempt
//! response bodies, ages `Idempotency-Key` records into tombstones and then out, and removes
//! old raw inbound payloads and rejection records, in small batches, pausing between them so it
//! never holds up delivery or ingest.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use tokio_util::sync::CancellationToken;
use vow_store::StoreResult;

use crate::stores::Stores;

/// Rows changed per store call.
const BATCH: usize = 500;

/// The pause between two batches, so other writes get through.
const PAUSE: Duration = Duration::from_millis(50);

/// What the cleaner purges, and how long content is kept.
pub struct Cleaner {
    stores: Stores,
    keep_responses: chrono::Duration,
    keep_inbound: chrono::Duration,
}

impl Cleaner {
    /// A cleaner of `stores` keeping attempt responses for `keep_responses` and raw inbound
    /// payloads for `keep_inbound`.
    pub fn new(
        stores: Stores,
        keep_responses: chrono::Duration,
        keep_inbound: chrono::Duration,
    ) -> Self {
        Self {
            stores,
            keep_responses,
            keep_inbound,
        }
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
    pub async fn sweep(&self, now: DateTime<Utc>) {
        let Stores {
            store,
            queue,
            inbound,
            ..
        } = &self.stores;
        in_batches("expired content", || {
            queue.purge_expired(now, now - self.keep_responses, BATCH)
        })
        .await;
        in_batches("idempotency records", || async {
            let aged = store.purge_idempotent(now, BATCH).await?;
            Ok(aged as u64)
        })
        .await;
        in_batches("inbound payloads", || {
            inbound.purge_inbound(now - self.keep_inbound, BATCH)
        })
        .await;
        in_batches("expired sessions", || async {
            let ended = store.purge_sessions(now, BATCH).await?;
            Ok(ended as u64)
        })
        .await;
    }
}

/// Calls `purge` until it changes fewer than [`BATCH`] rows (or fails), pausing in between.
async fn in_batches<F, Fut>(what: &'static str, mut purge: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<u64>>,
{
    loop {
        match purge().await {
            Ok(n) if (n as usize) < BATCH => return,
            Ok(n) => tracing::debug!(rows = n, what, "purged a batch"),
            Err(e) => {
                tracing::warn!(error = %e, what, "purging failed");
                return;
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
}
