//! Failed logins, per client address: after [`FREE_FAILURES`] failures in a row, each further
//! attempt must wait twice as long as the last (1 s, 2 s, 4 s, ... up to [`MAX_WAIT`]), and an
//! attempt made before its wait is over is refused without checking the token. A success
//! clears the address. The table is bounded: past [`MAX_ADDRESSES`] the oldest entry goes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures allowed before waits begin.
pub const FREE_FAILURES: u32 = 3;
/// The longest wait.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// Addresses remembered at most.
const MAX_ADDRESSES: usize = 10_000;

/// One address's failures in a row and when it may try again.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    next_try: Instant,
}

/// Failed logins by client address.
#[derive(Debug, Default)]
pub struct Throttle {
    by_address: Mutex<HashMap<Option<IpAddr>, Failures>>,
}

impl Throttle {
    /// How long `address` must still wait before its next attempt, if at all.
    pub fn wait(&self, address: Option<IpAddr>, now: Instant) -> Option<Duration> {
        let table = self.by_address.lock().unwrap_or_else(|e| e.into_inner());
        let failures = table.get(&address)?;
        failures
            .next_try
            .checked_duration_since(now)
            .filter(|w| !w.is_zero())
    }

    /// Records a failed attempt from `address`; returns the wait before its next one.
    pub fn failed(&self, address: Option<IpAddr>, now: Instant) -> Duration {
        let mut table = self.by_address.lock().unwrap_or_else(|e| e.into_inner());
        if table.len() >= MAX_ADDRESSES && !table.contains_key(&address) {
            if let Some(oldest) = table
                .iter()
                .min_by_key(|(_, f)| f.next_try)
                .map(|(a, _)| *a)
            {
                table.remove(&oldest);
            }
        }
        let entry = table.entry(address).or_insert(Failures {
            count: 0,
            next_try: now,
        });
        entry.count = entry.count.saturating_add(1);
        let wait = wait_after(entry.count);
        entry.next_try = now + wait;
        wait
    }

    /// Forgets `address`'s failures (it logged in).
    pub fn succeeded(&self, address: Option<IpAddr>) {
        let mut table = self.by_address.lock().unwrap_or_else(|e| e.into_inner());
        table.remove(&address);
    }
}

/// The wait after `count` failures in a row.
pub fn wait_after(count: u32) -> Duration {
    match count.checked_sub(FREE_FAILURES) {
        None | Some(0) => Duration::ZERO,
        Some(n) => Duration::from_secs(1u64 << (n - 1).min(6)).min(MAX_WAIT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_begin_after_the_free_failures_and_double_up_to_the_cap() {
        let waits: Vec<u64> = (1..=12).map(|n| wait_after(n).as_secs()).collect();
        assert_eq!(waits, [0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn an_address_waits_after_repeated_failures_and_a_success_clears_it() {
        let throttle = Throttle::default();
        let me = Some(IpAddr::from([192, 0, 2, 1]));
        let other = Some(IpAddr::from([192, 0, 2, 2]));
        let now = Instant::now();
        for _ in 0..FREE_FAILURES {
            assert_eq!(throttle.failed(me, now), Duration::ZERO);
        }
        assert_eq!(throttle.wait(me, now), None);
        assert_eq!(throttle.failed(me, now), Duration::from_secs(1));
        assert_eq!(throttle.wait(me, now), Some(Duration::from_secs(1)));
        assert_eq!(
            throttle.wait(other, now),
            None,
            "another address is not slowed"
        );
        assert_eq!(throttle.wait(me, now + Duration::from_secs(1)), None);
        throttle.succeeded(me);
        assert_eq!(
            throttle.failed(me, now),
            Duration::ZERO,
            "counting starts again"
        );
    }
}
