//! Recording an inbound event's attempt, whether a worker or pull consumer reports it
//! ([`record`]) or its lease ran out and the next claim settles it ([`expire`]): what each
//! destination's outcome becomes, and the event's state, due time and last error.
//!
//! - One attempt per destination reported: a destination reported twice counts once, with its
//!   last report.
//! - Out of attempts ([`NextTry::Exhausted`]) nothing stays `retryable`: a retryable report is
//!   dead-lettered, and so is a retryable outcome stored for a destination not reported this
//!   time (one removed from the source, say), which would otherwise keep the event due forever.
//! - A final outcome is final: settling an expired lease writes only the destinations still
//!   owed the event (no final outcome), a pull consumer's included.
//! - The event's state is the [`aggregate`] of its outcomes; it is due again only when
//!   `retryable`, at the time the worker chose (at once after an expired lease).
//! - Its last error is the error of a destination whose outcome names that state, this time's
//!   reports first: a dead-lettered event names the error that dead-lettered it, not that of a
//!   rejection reported beside it. A completed event has none.
//!
//! A backend reads the event's stored outcomes under its lease, calls [`record`] or
//! [`expire`], and writes the [`Recording`]: keys of destinations are whatever the backend
//! stores (`K`).

use chrono::{DateTime, Utc};
use vow_core::DestinationId;

use crate::inbound::processing::{
    aggregate, DestinationResult, Forward, NextTry, Outcome, LEASE_EXPIRED,
};
use crate::inbound::InboundState;
use crate::rules::lease::expired_outcome;

/// A destination's outcome as stored before this recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored<K> {
    /// The destination.
    pub destination: K,
    /// Its outcome.
    pub outcome: Outcome,
    /// Its last error.
    pub error: Option<String>,
}

/// One attempt at a destination, as reported, or as it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt<K> {
    /// The destination.
    pub destination: K,
    /// What became of it.
    pub outcome: Outcome,
    /// The response status, if a response came.
    pub status: Option<u16>,
    /// What went wrong.
    pub error: Option<String>,
}

impl From<Forward> for Stored<Option<DestinationId>> {
    fn from(forward: Forward) -> Self {
        Self {
            destination: forward.destination,
            outcome: forward.outcome,
            error: forward.error,
        }
    }
}

impl<K> Attempt<K> {
    /// A worker's or consumer's `result`, its destination keyed by `key`.
    pub fn reported(
        result: DestinationResult,
        key: impl FnOnce(Option<DestinationId>) -> K,
    ) -> Self {
        Self {
            destination: key(result.destination),
            outcome: result.outcome,
            status: result.status,
            error: result.error,
        }
    }
}

/// What to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording<K> {
    /// One more attempt at each of these destinations (outcome, status and error replaced).
    pub attempts: Vec<Attempt<K>>,
    /// Destinations not attempted whose `retryable` outcome becomes `dead_lettered` (attempts,
    /// status and error kept).
    pub dead_lettered: Vec<K>,
    /// The event's new state.
    pub state: InboundState,
    /// When it is due again (only when `retryable`).
    pub due: Option<DateTime<Utc>>,
    /// Its last error.
    pub last_error: Option<String>,
}

/// What recording `reports` under `next` does to an event whose outcomes were `stored` (see
/// the module docs).
pub fn record<K: PartialEq + Clone>(
    stored: &[Stored<K>],
    reports: Vec<Attempt<K>>,
    next: NextTry,
) -> Recording<K> {
    let exhausted = next == NextTry::Exhausted;
    let settle = |outcome| match outcome {
        Outcome::Retryable if exhausted => Outcome::DeadLettered,
        other => other,
    };
    let mut attempts: Vec<Attempt<K>> = Vec::with_capacity(reports.len());
    for mut report in reports {
        report.outcome = settle(report.outcome);
        match attempts
            .iter_mut()
            .find(|a| a.destination == report.destination)
        {
            Some(earlier) => *earlier = report,
            None => attempts.push(report),
        }
    }
    let unreported: Vec<&Stored<K>> = stored
        .iter()
        .filter(|s| !attempts.iter().any(|a| a.destination == s.destination))
        .collect();
    let dead_lettered = unreported
        .iter()
        .filter(|s| settle(s.outcome) != s.outcome)
        .map(|s| s.destination.clone())
        .collect();
    // Every outcome as it will stand, this time's first, each with its error.
    let standing: Vec<(Outcome, Option<&String>)> = attempts
        .iter()
        .map(|a| (a.outcome, a.error.as_ref()))
        .chain(
            unreported
                .iter()
                .map(|s| (settle(s.outcome), s.error.as_ref())),
        )
        .collect();
    let state = aggregate(standing.iter().map(|(o, _)| *o));
    let last_error = match state {
        InboundState::Completed => None,
        _ => standing
            .iter()
            .filter(|(o, _)| o.state() == state)
            .find_map(|(_, error)| error.cloned()),
    };
    let due = match (state, next) {
        (InboundState::Retryable, NextTry::At(at)) => Some(at),
        _ => None,
    };
    Recording {
        attempts,
        dead_lettered,
        state,
        due,
        last_error,
    }
}

/// What settling an event whose lease ran out at `now` does, after `attempts` of
/// `max_attempts`: each of the `owed` destinations (with whether it is idempotent; a pull
/// consumer is not) that has no final outcome in `stored` gets [`expired_outcome`] with
/// [`LEASE_EXPIRED`]; out of attempts nothing stays retryable; a retryable event is due at once.
pub fn expire<K: PartialEq + Clone>(
    stored: &[Stored<K>],
    owed: impl IntoIterator<Item = (K, bool)>,
    attempts: u32,
    max_attempts: u32,
    now: DateTime<Utc>,
) -> Recording<K> {
    let is_final = |d: &K| {
        stored
            .iter()
            .any(|s| s.destination == *d && s.outcome.is_final())
    };
    let reports = owed
        .into_iter()
        .filter(|(d, _)| !is_final(d))
        .map(|(destination, idempotent)| Attempt {
            destination,
            outcome: expired_outcome(idempotent, attempts, max_attempts),
            status: None,
            error: Some(LEASE_EXPIRED.to_owned()),
        })
        .collect();
    let next = if attempts >= max_attempts {
        NextTry::Exhausted
    } else {
        NextTry::At(now)
    };
    record(stored, reports, next)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use Outcome::*;

    fn stored(destination: u8, outcome: Outcome, error: &str) -> Stored<u8> {
        Stored {
            destination,
            outcome,
            error: Some(error.to_owned()),
        }
    }

    fn report(destination: u8, outcome: Outcome, error: &str) -> Attempt<u8> {
        Attempt {
            destination,
            outcome,
            status: None,
            error: (!error.is_empty()).then(|| error.to_owned()),
        }
    }

    fn at() -> DateTime<Utc> {
        DateTime::UNIX_EPOCH + chrono::Duration::seconds(100)
    }

    #[test]
    fn out_of_attempts_every_retryable_outcome_is_dead_lettered() {
        let before = [stored(1, Retryable, "503 at 1"), stored(2, Completed, "")];
        let r = record(
            &before,
            vec![report(3, Retryable, "503 at 3")],
            NextTry::Exhausted,
        );
        assert_eq!(r.attempts[0].outcome, DeadLettered);
        assert_eq!(r.dead_lettered, [1]);
        assert_eq!((r.state, r.due), (InboundState::DeadLettered, None));
        let r = record(&before, vec![report(3, Retryable, "")], NextTry::At(at()));
        assert!(r.dead_lettered.is_empty());
        assert_eq!((r.state, r.due), (InboundState::Retryable, Some(at())));
    }

    #[test]
    fn the_last_error_is_that_of_an_outcome_naming_the_state() {
        let reports = vec![
            report(1, Rejected, "HTTP 400"),
            report(2, Retryable, ""),
            report(3, Retryable, "HTTP 503"),
        ];
        let r = record(&[], reports, NextTry::Exhausted);
        assert_eq!(r.state, InboundState::DeadLettered);
        assert_eq!(r.last_error.as_deref(), Some("HTTP 503"));
        // A stored outcome names the state when no report does.
        let r = record(
            &[stored(9, Uncertain, "timed out")],
            vec![report(1, Completed, "")],
            NextTry::Exhausted,
        );
        assert_eq!(r.state, InboundState::Uncertain);
        assert_eq!(r.last_error.as_deref(), Some("timed out"));
        let r = record(&[], vec![report(1, Completed, "")], NextTry::Exhausted);
        assert_eq!((r.state, r.last_error), (InboundState::Completed, None));
    }

    #[test]
    fn a_destination_reported_twice_counts_one_attempt_with_its_last_report() {
        let reports = vec![report(1, Retryable, "first"), report(1, Completed, "")];
        let r = record(&[], reports, NextTry::At(at()));
        assert_eq!(r.attempts, [report(1, Completed, "")]);
        assert_eq!(r.state, InboundState::Completed);
    }

    #[test]
    fn an_expired_lease_leaves_final_outcomes_alone() {
        let before = [stored(1, Rejected, "HTTP 400"), stored(2, Retryable, "503")];
        let r = expire(&before, [(1, false), (2, false), (3, true)], 1, 5, at());
        let written: Vec<_> = r
            .attempts
            .iter()
            .map(|a| (a.destination, a.outcome))
            .collect();
        assert_eq!(written, [(2, Uncertain), (3, Retryable)]);
        assert_eq!((r.state, r.due), (InboundState::Retryable, Some(at())));
        assert_eq!(r.last_error.as_deref(), Some(LEASE_EXPIRED));
        // Out of attempts: nothing is retried.
        let r = expire(&before, [(2, true)], 5, 5, at());
        assert_eq!(r.attempts[0].outcome, DeadLettered);
        assert_eq!((r.state, r.due), (InboundState::DeadLettered, None));
        // A pull consumer's final outcome stays.
        let r = expire(&[stored(0, Completed, "")], [(0, false)], 1, 5, at());
        assert!(r.attempts.is_empty());
        assert_eq!(r.state, InboundState::Completed);
    }

    fn outcome() -> impl Strategy<Value = Outcome> {
        prop::sample::select(Outcome::ALL.to_vec())
    }

    fn reports() -> impl Strategy<Value = Vec<Attempt<u8>>> {
        prop::collection::vec(
            (0u8..5, outcome(), any::<bool>())
                .prop_map(|(d, o, e)| report(d, o, if e { "error" } else { "" })),
            0..8,
        )
    }

    fn stored_outcomes() -> impl Strategy<Value = Vec<Stored<u8>>> {
        prop::collection::btree_map(0u8..5, outcome(), 0..5)
            .prop_map(|m| m.into_iter().map(|(d, o)| stored(d, o, "stored")).collect())
    }

    proptest! {
        #[test]
        fn recording_keeps_its_promises(
            before in stored_outcomes(),
            reports in reports(),
            exhausted: bool,
        ) {
            let next = if exhausted { NextTry::Exhausted } else { NextTry::At(at()) };
            let r = record(&before, reports.clone(), next);
            // One attempt per reported destination, with its last report.
            for a in &r.attempts {
                prop_assert_eq!(r.attempts.iter().filter(|b| b.destination == a.destination).count(), 1);
                let last = reports.iter().rev().find(|p| p.destination == a.destination).unwrap();
                prop_assert_eq!(&a.error, &last.error);
            }
            prop_assert_eq!(r.attempts.len(), {
                let mut d: Vec<_> = reports.iter().map(|p| p.destination).collect();
                d.sort();
                d.dedup();
                d.len()
            });
            // Only retryable outcomes of destinations not reported are dead-lettered, and only
            // when out of attempts.
            for d in &r.dead_lettered {
                prop_assert!(exhausted);
                prop_assert!(!r.attempts.iter().any(|a| a.destination == *d));
                prop_assert!(before.iter().any(|s| s.destination == *d && s.outcome == Retryable));
            }
            // Out of attempts nothing stays retryable, and the event is due only when retryable.
            if exhausted {
                prop_assert!(r.attempts.iter().all(|a| a.outcome != Retryable));
                prop_assert_ne!(r.state, InboundState::Retryable);
            }
            prop_assert_eq!(r.due.is_some(), r.state == InboundState::Retryable);
            prop_assert_eq!(r.last_error.is_some() && r.state == InboundState::Completed, false);
        }

        #[test]
        fn an_expired_lease_never_rewrites_a_final_outcome(
            before in stored_outcomes(),
            owed in prop::collection::btree_map(0u8..5, any::<bool>(), 0..5),
            attempts in 0u32..8,
            max_attempts in 1u32..6,
        ) {
            let r = expire(&before, owed.clone(), attempts, max_attempts, at());
            for a in &r.attempts {
                prop_assert!(owed.contains_key(&a.destination));
                prop_assert!(!before.iter().any(|s| s.destination == a.destination && s.outcome.is_final()));
                prop_assert_eq!(a.error.as_deref(), Some(LEASE_EXPIRED));
                prop_assert_eq!(
                    a.outcome,
                    expired_outcome(owed[&a.destination], attempts, max_attempts)
                );
            }
            let owed_open = owed.keys().filter(|d| {
                !before.iter().any(|s| s.destination == **d && s.outcome.is_final())
            }).count();
            prop_assert_eq!(r.attempts.len(), owed_open);
            if attempts >= max_attempts {
                prop_assert_ne!(r.state, InboundState::Retryable);
            }
        }
    }
}
