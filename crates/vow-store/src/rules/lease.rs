//! Leases on claimed work, delivery claims and inbound work claims alike: a fresh token per
//! claim ([`LeaseToken::fresh`]), when the lease ends ([`lease_until`]), and what settling an
//! inbound event whose lease ran out records at each destination still owed it
//! ([`expired_outcome`]).
//!
//! An expired delivery lease needs no settling: the row simply becomes claimable again (that
//! part is the claim's SQL).

use chrono::{DateTime, Duration, Utc};

use crate::inbound::processing::Outcome;
use crate::queue::LeaseToken;

impl LeaseToken {
    /// A fresh token: 128 random bits, in hex.
    pub fn fresh() -> Self {
        Self(format!("{:032x}", rand::random::<u128>()))
    }
}

/// How many inbound events whose lease ran out one claim settles at most, oldest lease end
/// first (the next claim settles more): a claim after an outage does not hold its transaction
/// for the whole backlog.
pub const SETTLED_PER_CLAIM: usize = 100;

/// When a lease of `lease` taken at `now` runs out (the end of time when that overflows).
pub fn lease_until(now: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    now.checked_add_signed(lease)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// What settling an expired lease records at a destination still owed the event after
/// `attempts` of `max_attempts`: the worker stopped between forwarding and recording, so the
/// destination may have received it (`uncertain`), unless it is `idempotent` and may simply get
/// it again (`retryable`, or `dead_lettered` once out of attempts). A pull consumer counts as not
/// idempotent.
pub fn expired_outcome(idempotent: bool, attempts: u32, max_attempts: u32) -> Outcome {
    match (idempotent, attempts >= max_attempts) {
        (false, _) => Outcome::Uncertain,
        (true, false) => Outcome::Retryable,
        (true, true) => Outcome::DeadLettered,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn tokens_are_fresh_hex() {
        let (a, b) = (LeaseToken::fresh(), LeaseToken::fresh());
        assert_ne!(a, b);
        assert_eq!(a.0.len(), 32);
        assert!(a.0.bytes().all(|c| c.is_ascii_hexdigit()), "{a:?}");
    }

    #[test]
    fn an_overflowing_lease_ends_at_the_end_of_time() {
        let now = DateTime::<Utc>::MAX_UTC - Duration::seconds(1);
        assert_eq!(
            lease_until(now, Duration::hours(1)),
            DateTime::<Utc>::MAX_UTC
        );
        let epoch = DateTime::<Utc>::UNIX_EPOCH;
        assert_eq!(
            lease_until(epoch, Duration::seconds(30)),
            epoch + Duration::seconds(30)
        );
    }

    #[test]
    fn an_expired_lease_leaves_uncertainty_unless_the_destination_is_idempotent() {
        assert_eq!(expired_outcome(false, 1, 5), Outcome::Uncertain);
        assert_eq!(expired_outcome(false, 5, 5), Outcome::Uncertain);
        assert_eq!(expired_outcome(true, 4, 5), Outcome::Retryable);
        assert_eq!(expired_outcome(true, 5, 5), Outcome::DeadLettered);
    }

    proptest! {
        #[test]
        fn a_lease_ends_after_it_starts(secs in -10_000_000_000i64..10_000_000_000, lease in 0i64..100_000_000) {
            let now = DateTime::from_timestamp(secs, 0).unwrap();
            let until = lease_until(now, Duration::seconds(lease));
            prop_assert!(until >= now);
            prop_assert_eq!(until - now, Duration::seconds(lease));
        }

        #[test]
        fn only_an_idempotent_destination_is_retried_and_never_past_its_attempts(
            idempotent: bool, attempts: u32, max_attempts: u32,
        ) {
            let outcome = expired_outcome(idempotent, attempts, max_attempts);
            prop_assert_eq!(outcome == Outcome::Uncertain, !idempotent);
            prop_assert_eq!(outcome == Outcome::Retryable, idempotent && attempts < max_attempts);
            prop_assert_ne!(outcome, Outcome::Completed);
            prop_assert_ne!(outcome, Outcome::Rejected);
        }
    }
}
