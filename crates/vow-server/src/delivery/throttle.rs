//! Per-endpoint pacing for `throttleRate` (messages per second): before each send to a
//! throttled endpoint, the store reserves its slot
//! ([`reserve_send_slot`](vow_store::queue::DeliveryClaims::reserve_send_slot)), so every
//! process delivering from one database shares the endpoint's pace; the send then waits for it.
//!
//! The wait runs inside the attempt, after the claim registered its lease, so the heartbeat
//! keeps renewing the lease however long the wait (a backlog of `max_per_endpoint` sends at
//! 1/s waits longer than a lease). When the store cannot answer, this process paces the
//! endpoint alone ([`LocalPace`]) rather than sending unpaced.

use std::time::Duration;

use vow_core::EndpointId;
use vow_store::rules::pace::LocalPace;
use vow_store::DeliveryQueue;

/// Reserves send slots in the store, and in this process when the store fails.
#[derive(Default)]
pub struct Throttle {
    fallback: LocalPace,
}

impl Throttle {
    /// Waits until `endpoint` may send again at `rate` messages per second.
    pub async fn wait(&self, store: &dyn DeliveryQueue, endpoint: EndpointId, rate: u16) {
        tokio::time::sleep(self.reserve(store, endpoint, rate).await).await;
    }

    async fn reserve(
        &self,
        store: &dyn DeliveryQueue,
        endpoint: EndpointId,
        rate: u16,
    ) -> Duration {
        match store.reserve_send_slot(endpoint, rate).await {
            Ok(wait) => wait,
            Err(e) => {
                tracing::warn!(error = %e, %endpoint, "reserving a send slot failed; pacing in this process");
                self.fallback.reserve(endpoint, rate)
            }
        }
    }
}
