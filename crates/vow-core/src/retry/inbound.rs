//! The inbound forwarding policy: when an inbound event whose forward failed in a retryable way
//! is due again. The schedule is the delivery one ([`RetrySchedule`]), with [`equal_jitter`];
//! once it is spent the event's retryable outcomes are dead-lettered.

use chrono::{DateTime, SubsecRound, Utc};
use rand::Rng;

use super::{equal_jitter, RetrySchedule};

/// When a retryable inbound event is due again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextTry {
    /// At this time.
    At(DateTime<Utc>),
    /// Never: its retryable outcomes are dead-lettered.
    Exhausted,
}

/// When an event after `attempts` attempts is due again: after the schedule's delay with
/// jitter (from `rng`), at microsecond precision, when `retry` is wanted and the schedule has
/// one left; else never.
pub fn next_try<R: Rng + ?Sized>(
    schedule: &RetrySchedule,
    attempts: u32,
    retry: bool,
    now: DateTime<Utc>,
    rng: &mut R,
) -> NextTry {
    match schedule.delay_after(attempts) {
        Some(delay) if retry => {
            let delay = equal_jitter(delay, rng);
            let at = now + chrono::Duration::from_std(delay).unwrap_or_default();
            NextTry::At(at.trunc_subsecs(6))
        }
        _ => NextTry::Exhausted,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    fn schedule() -> RetrySchedule {
        "10s,1m,5m".parse().expect("a valid schedule")
    }

    fn now() -> DateTime<Utc> {
        "2026-01-02T03:04:05.123456Z".parse().unwrap()
    }

    #[test]
    fn a_retryable_event_is_due_after_the_jittered_delay_of_its_attempt() {
        let mut rng = StdRng::seed_from_u64(7);
        let NextTry::At(at) = next_try(&schedule(), 2, true, now(), &mut rng) else {
            panic!("the schedule has a delay after two attempts");
        };
        let waited = (at - now()).to_std().unwrap();
        assert!(waited >= Duration::from_secs(30) && waited <= Duration::from_secs(60));
    }

    #[test]
    fn an_event_that_needs_no_retry_is_never_due_again() {
        let mut rng = StdRng::seed_from_u64(7);
        assert_eq!(
            next_try(&schedule(), 1, false, now(), &mut rng),
            NextTry::Exhausted
        );
    }

    #[test]
    fn an_event_whose_schedule_is_spent_is_exhausted() {
        let mut rng = StdRng::seed_from_u64(7);
        let spent = schedule().max_attempts();
        assert_eq!(
            next_try(&schedule(), spent, true, now(), &mut rng),
            NextTry::Exhausted
        );
        assert_eq!(
            next_try(&RetrySchedule::none(), 1, true, now(), &mut rng),
            NextTry::Exhausted
        );
    }

    proptest! {
        #[test]
        fn the_next_try_keeps_half_the_delay_and_the_stores_precision(
            attempts in 0u32..6,
            seed in any::<u64>(),
        ) {
            let mut rng = StdRng::seed_from_u64(seed);
            let s = schedule();
            match (s.delay_after(attempts), next_try(&s, attempts, true, now(), &mut rng)) {
                (Some(delay), NextTry::At(at)) => {
                    let waited = (at - now()).to_std().unwrap();
                    prop_assert!(waited >= delay / 2 && waited <= delay);
                    prop_assert_eq!(at, at.trunc_subsecs(6));
                }
                (None, NextTry::Exhausted) => {}
                (delay, next) => prop_assert!(false, "{delay:?} but {next:?}"),
            }
        }
    }
}
