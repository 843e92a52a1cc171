//! Operators' decisions on an inbound event's destinations (issue 13): each destination's
//! outcome is its own. A replay requeues the destinations that are `dead_lettered` or
//! `rejected`; a resolution settles those that are `uncertain`; either may name one
//! destination. The others are untouched, whatever the event's aggregate state says: an event
//! with one destination dead-lettered and one uncertain is `uncertain`, and still replays the
//! first. [`targets`] is the rule both backends apply inside the transaction that then
//! rewrites those forwards and moves the event to the aggregate of its outcomes.

use vow_core::DestinationId;

use super::processing::{Forward, Outcome, Resolution};
use super::{InboundEvent, InboundState};
use crate::StoreError;

/// The event states a decision may act in: those with destination outcomes, and no worker
/// holding the event (`processing` is decided once its lease ends).
pub const DECIDABLE: [InboundState; 5] = [
    InboundState::Completed,
    InboundState::Rejected,
    InboundState::Retryable,
    InboundState::Uncertain,
    InboundState::DeadLettered,
];

/// What an operator decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Forward again to the dead-lettered and rejected destinations.
    Replay,
    /// Settle the uncertain destinations.
    Resolve(Resolution),
}

impl Decision {
    /// The outcomes of the forwards this decision acts on.
    pub fn acts_on(self) -> &'static [Outcome] {
        match self {
            Self::Replay => &[Outcome::DeadLettered, Outcome::Rejected],
            Self::Resolve(_) => &[Outcome::Uncertain],
        }
    }

    /// Whether a forward with `outcome` is one this decision acts on.
    pub fn applies_to(self, outcome: Outcome) -> bool {
        self.acts_on().contains(&outcome)
    }

    /// The outcome the forwards it acts on get.
    pub fn outcome(self) -> Outcome {
        match self {
            Self::Replay | Self::Resolve(Resolution::Retry) => Outcome::Retryable,
            Self::Resolve(Resolution::Completed) => Outcome::Completed,
        }
    }

    /// Whether the event's attempts start again (it is forwarded again).
    pub fn resets_attempts(self) -> bool {
        self.outcome() == Outcome::Retryable
    }

    /// The outcomes it acts on, in words.
    fn wanted(self) -> &'static str {
        match self {
            Self::Replay => "dead-lettered or rejected",
            Self::Resolve(_) => "uncertain",
        }
    }
}

/// What a decision did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The event, in the aggregate state of its outcomes.
    pub event: InboundEvent,
    /// The forwards the decision changed, as they now stand, by destination.
    pub changed: Vec<Forward>,
}

/// The destinations of an event in `state` with these `forwards` that `decision` acts on
/// (only `only` when it names one), or the conflict that says why there are none: the event
/// is being processed (its worker will record the outcomes: decide once its lease ends), it
/// is in a state that has no outcomes, or no destination (or not the one named) is in a state
/// the decision acts on.
pub fn targets(
    state: InboundState,
    decision: Decision,
    forwards: &[Forward],
    only: Option<DestinationId>,
) -> Result<Vec<Option<DestinationId>>, StoreError> {
    if state == InboundState::Processing {
        return Err(StoreError::Conflict(
            "this inbound event is being processed; decide once its worker has recorded \
             the outcome or its lease has run out"
                .into(),
        ));
    }
    if !DECIDABLE.contains(&state) {
        return Err(StoreError::Conflict(format!(
            "this inbound event is {}: it has no destination outcomes to decide on",
            state.as_str()
        )));
    }
    let found: Vec<_> = forwards
        .iter()
        .filter(|f| decision.applies_to(f.outcome))
        .filter(|f| only.is_none() || f.destination == only)
        .map(|f| f.destination)
        .collect();
    if found.is_empty() {
        let what = match only {
            Some(d) => format!("destination {d} of this inbound event is not"),
            None => "no destination of this inbound event is".to_owned(),
        };
        return Err(StoreError::Conflict(format!(
            "{what} {}",
            decision.wanted()
        )));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn forward(destination: DestinationId, outcome: Outcome) -> Forward {
        Forward {
            destination: Some(destination),
            outcome,
            attempts: 1,
            status: None,
            error: None,
            updated_at: Utc::now(),
        }
    }

    #[test]
    fn each_decision_takes_only_the_destinations_in_its_states() {
        let (dead, unsure, done) = (
            DestinationId::new(),
            DestinationId::new(),
            DestinationId::new(),
        );
        let forwards = [
            forward(dead, Outcome::DeadLettered),
            forward(unsure, Outcome::Uncertain),
            forward(done, Outcome::Completed),
        ];
        let state = InboundState::Uncertain;
        assert_eq!(
            targets(state, Decision::Replay, &forwards, None).unwrap(),
            [Some(dead)]
        );
        let resolve = Decision::Resolve(Resolution::Completed);
        assert_eq!(
            targets(state, resolve, &forwards, None).unwrap(),
            [Some(unsure)]
        );
        assert_eq!(
            targets(state, resolve, &forwards, Some(unsure)).unwrap(),
            [Some(unsure)]
        );
        let named = targets(state, resolve, &forwards, Some(dead)).unwrap_err();
        assert!(named.to_string().contains(&dead.to_string()), "{named}");
    }

    #[test]
    fn nothing_is_decided_while_processing_or_without_a_matching_outcome() {
        let forwards = [forward(DestinationId::new(), Outcome::DeadLettered)];
        for state in [InboundState::Processing, InboundState::Quarantined] {
            let err = targets(state, Decision::Replay, &forwards, None).unwrap_err();
            assert!(matches!(err, StoreError::Conflict(_)), "{state:?}");
        }
        let err = targets(
            InboundState::DeadLettered,
            Decision::Resolve(Resolution::Retry),
            &forwards,
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("uncertain"), "{err}");
    }

    #[test]
    fn replays_and_retries_forward_again_with_fresh_attempts() {
        assert_eq!(Decision::Replay.outcome(), Outcome::Retryable);
        assert!(Decision::Resolve(Resolution::Retry).resets_attempts());
        let completed = Decision::Resolve(Resolution::Completed);
        assert_eq!(completed.outcome(), Outcome::Completed);
        assert!(!completed.resets_attempts());
    }
}
