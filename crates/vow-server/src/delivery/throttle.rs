//! Per-endpoint pacing for `throttleRate` (messages per second): each send reserves the next
//! free slot, `1 / rate` after the previous one, and waits for it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use vow_core::EndpointId;

/// Next free send slot per throttled endpoint.
#[derive(Default)]
pub struct Throttle {
    next_slot: Mutex<HashMap<EndpointId, Instant>>,
}

impl Throttle {
    /// Waits until `endpoint` may send again at `rate` messages per second.
    pub async fn wait(&self, endpoint: EndpointId, rate: u16) {
        let at = self.reserve(endpoint, rate, Instant::now());
        tokio::time::sleep_until(at).await;
    }

    fn reserve(&self, endpoint: EndpointId, rate: u16, now: Instant) -> Instant {
        let gap = Duration::from_secs(1) / u32::from(rate.max(1));
        let mut slots = self.next_slot.lock().unwrap_or_else(|p| p.into_inner());
        let slot = slots.entry(endpoint).or_insert(now);
        let at = (*slot).max(now);
        *slot = at + gap;
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_are_spaced_by_the_rate() {
        let t = Throttle::default();
        let ep = EndpointId::new();
        let now = Instant::now();
        let slots: Vec<_> = (0..4).map(|_| t.reserve(ep, 10, now) - now).collect();
        assert_eq!(
            slots,
            [0, 100, 200, 300].map(Duration::from_millis).to_vec()
        );
        // Another endpoint is not held back.
        assert_eq!(t.reserve(EndpointId::new(), 10, now), now);
    }
}
