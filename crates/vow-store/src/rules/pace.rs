//! Pacing an endpoint's sends to its `throttleRate` (messages per second): each send reserves
//! the next free slot, [`gap`] after the one before it and never in the past, and waits until
//! it.
//!
//! A backend whose workers may run in several processes keeps the slots in the database
//! (PostgreSQL: `endpoint_pace`), so all of them share one pace; [`LocalPace`] keeps them in
//! this process, for a backend whose workers are all in one (SQLite) and for a worker whose
//! store cannot answer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use vow_core::EndpointId;

/// The time between two sends at `rate` messages per second (a rate of 0 counts as 1).
pub fn gap(rate: u16) -> Duration {
    Duration::from_secs(1) / u32::from(rate.max(1))
}

/// Next free send slot of each endpoint paced in this process.
///
/// Only slots still ahead are kept: a slot in the past reserves like no slot at all, so
/// endpoints that are idle (or deleted) are dropped at the next reservation.
#[derive(Debug, Default)]
pub struct LocalPace {
    next_slot: Mutex<HashMap<EndpointId, Instant>>,
}

impl LocalPace {
    /// Reserves `endpoint`'s next slot at `rate`; returns how long to wait until it.
    pub fn reserve(&self, endpoint: EndpointId, rate: u16) -> Duration {
        self.reserve_at(endpoint, rate, Instant::now())
    }

    fn reserve_at(&self, endpoint: EndpointId, rate: u16, now: Instant) -> Duration {
        let mut slots = self.next_slot.lock().unwrap_or_else(|p| p.into_inner());
        slots.retain(|_, slot| *slot > now);
        let at = slots.get(&endpoint).copied().unwrap_or(now).max(now);
        slots.insert(endpoint, at + gap(rate));
        at - now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_are_spaced_by_the_rate_and_other_endpoints_are_not_held_back() {
        let pace = LocalPace::default();
        let ep = EndpointId::new();
        let now = Instant::now();
        let waits: Vec<_> = (0..4).map(|_| pace.reserve_at(ep, 10, now)).collect();
        assert_eq!(waits, [0, 100, 200, 300].map(Duration::from_millis));
        assert_eq!(pace.reserve_at(EndpointId::new(), 10, now), Duration::ZERO);
        // Later, the waits are what is left of the reserved slots.
        let later = now + Duration::from_millis(250);
        assert_eq!(pace.reserve_at(ep, 10, later), Duration::from_millis(150));
    }

    #[test]
    fn an_idle_endpoint_sends_at_once_and_is_forgotten() {
        let pace = LocalPace::default();
        let (busy, idle) = (EndpointId::new(), EndpointId::new());
        let now = Instant::now();
        pace.reserve_at(idle, 1, now);
        let later = now + Duration::from_secs(2);
        assert_eq!(pace.reserve_at(busy, 1, later), Duration::ZERO);
        assert!(!pace.next_slot.lock().unwrap().contains_key(&idle));
        assert_eq!(pace.reserve_at(idle, 1, later), Duration::ZERO);
    }

    #[test]
    fn a_rate_of_zero_counts_as_one() {
        assert_eq!(gap(0), Duration::from_secs(1));
        assert_eq!(gap(4), Duration::from_millis(250));
    }
}
