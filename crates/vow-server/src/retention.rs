//! Retention: a background cleaner that deletes expired message payloads and old attempt
//! response bodies, and ages `Idempotency-Key` records into tombstones and then out, in small
//! batches, pausing between them so it never holds up delivery.

use std::sync::Arc;
use std::time::Duration;

use chrono::{SubsecRound, Utc};
use tokio_util::sync::CancellationToken;
use vow_store::{DeliveryQueue, Store};

/// Rows changed per store call.
const BATCH: usize = 500;

/// Runs until `shutdown`: every `every`, purges in batches until a batch comes back short.
pub async fn run(
    store: Arc<dyn Store>,
    queue: Arc<dyn DeliveryQueue>,
    keep_responses: chrono::Duration,
    every: Duration,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {},
            _ = shutdown.cancelled() => return,
        }
        loop {
            let now = Utc::now().trunc_subsecs(6);
            match queue.purge_expired(now, now - keep_responses, BATCH).await {
                Ok(n) if (n as usize) < BATCH => break,
                Ok(n) => tracing::debug!(rows = n, "purged expired content"),
                Err(e) => {
                    tracing::warn!(error = %e, "purging expired content failed");
                    break;
                }
            }
            // Let deliveries through between batches.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        loop {
            match store
                .purge_idempotent(Utc::now().trunc_subsecs(6), BATCH)
                .await
            {
                Ok(n) if n < BATCH => break,
                Ok(n) => tracing::debug!(rows = n, "aged idempotency records"),
                Err(e) => {
                    tracing::warn!(error = %e, "ageing idempotency records failed");
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
