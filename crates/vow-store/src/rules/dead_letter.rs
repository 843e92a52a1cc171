//! Dead-letter counting and auto-disabling: an endpoint's count of consecutive dead-lettered
//! deliveries ([`EndpointHealth`]), moved by each recorded outcome ([`CountEvent`]).
//!
//! - A delivered outcome restarts the count at 0.
//! - A dead-letter counts only against an enabled endpoint: one that was in flight when the
//!   endpoint got disabled does not.
//! - At the threshold ([`vow_core::should_disable`]), or at once for a 410, the endpoint is
//!   disabled and its count restarts, so an operator who re-enables it gives it a fresh budget.
//! - A retry or a hold leaves the count alone.
//!
//! A backend reads the endpoint's count and flag, runs the outcomes of one batch through
//! [`EndpointHealth::record`] in order, and writes back what changed (disabling also holds the
//! endpoint's waiting deliveries: that part is SQL).

use vow_core::should_disable;

use crate::queue::NextState;

/// What a recorded outcome means for its endpoint's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountEvent {
    /// Delivered: the count restarts at 0.
    Delivered,
    /// Dead-lettered: the count goes up, and the endpoint may be disabled.
    DeadLetter {
        /// Disable whatever the count (the endpoint answered 410 Gone).
        disable_now: bool,
    },
}

impl CountEvent {
    /// The event of an outcome that moves to `next`; `None` for a retry or a hold, which leave
    /// the count alone.
    pub fn of(next: &NextState) -> Option<Self> {
        match next {
            NextState::Delivered => Some(Self::Delivered),
            NextState::DeadLetter {
                disable_endpoint, ..
            } => Some(Self::DeadLetter {
                disable_now: *disable_endpoint,
            }),
            NextState::RetryAt { .. } | NextState::Hold => None,
        }
    }

    /// Why an endpoint this event disabled was disabled, as the console shows it.
    pub fn disable_reason(self, disable_after: u32) -> String {
        match self {
            Self::DeadLetter { disable_now: true } => "the endpoint answered 410 Gone".to_string(),
            _ => format!("{disable_after} deliveries in a row were dead-lettered"),
        }
    }

    /// Whether `events` only reset the count, whatever it was: then a backend may write 0
    /// without reading the endpoint (a delivered outcome restarts the count on any endpoint).
    pub fn only_resets(events: impl IntoIterator<Item = Self>) -> bool {
        events.into_iter().all(|e| e == Self::Delivered)
    }
}

/// An endpoint's dead-letter bookkeeping, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointHealth {
    /// Dead-letters in a row since the last delivery (or since it was last disabled).
    pub consecutive_dead_letters: u32,
    /// Whether the endpoint is disabled.
    pub disabled: bool,
}

impl EndpointHealth {
    /// Counts `event` (see the module docs); whether this disabled the endpoint.
    pub fn record(&mut self, event: CountEvent, disable_after: u32) -> bool {
        match event {
            CountEvent::Delivered => {
                self.consecutive_dead_letters = 0;
                false
            }
            CountEvent::DeadLetter { .. } if self.disabled => false,
            CountEvent::DeadLetter { disable_now } => {
                self.consecutive_dead_letters = self.consecutive_dead_letters.saturating_add(1);
                if !(disable_now || should_disable(self.consecutive_dead_letters, disable_after)) {
                    return false;
                }
                self.consecutive_dead_letters = 0;
                self.disabled = true;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const DEAD: CountEvent = CountEvent::DeadLetter { disable_now: false };
    const GONE: CountEvent = CountEvent::DeadLetter { disable_now: true };

    fn enabled(count: u32) -> EndpointHealth {
        EndpointHealth {
            consecutive_dead_letters: count,
            disabled: false,
        }
    }

    #[test]
    fn the_threshold_disables_and_restarts_the_count() {
        let mut health = enabled(0);
        assert!(!health.record(DEAD, 3));
        assert!(!health.record(DEAD, 3));
        assert_eq!(health, enabled(2));
        assert!(health.record(DEAD, 3));
        assert_eq!(
            health,
            EndpointHealth {
                consecutive_dead_letters: 0,
                disabled: true
            }
        );
        // In flight when it got disabled: not counted, not disabled again.
        assert!(!health.record(GONE, 3));
        assert_eq!(health.consecutive_dead_letters, 0);
    }

    #[test]
    fn a_delivery_restarts_the_count_and_a_gone_disables_at_once() {
        let mut health = enabled(2);
        assert!(!health.record(CountEvent::Delivered, 3));
        assert_eq!(health, enabled(0));
        assert!(health.record(GONE, 3));
        assert!(health.disabled);
        let mut never = enabled(u32::MAX);
        assert!(!never.record(DEAD, 0), "a threshold of 0 never disables");
        assert_eq!(never, enabled(u32::MAX));
    }

    #[test]
    fn retries_and_holds_leave_the_count_alone() {
        let retry = NextState::RetryAt {
            at: chrono::DateTime::UNIX_EPOCH,
            client_errors: 0,
        };
        assert_eq!(CountEvent::of(&retry), None);
        assert_eq!(CountEvent::of(&NextState::Hold), None);
        assert_eq!(
            CountEvent::of(&NextState::Delivered),
            Some(CountEvent::Delivered)
        );
        assert!(CountEvent::only_resets([CountEvent::Delivered; 2]));
        assert!(!CountEvent::only_resets([CountEvent::Delivered, DEAD]));
    }

    fn event() -> impl Strategy<Value = CountEvent> {
        prop_oneof![
            Just(CountEvent::Delivered),
            any::<bool>().prop_map(|disable_now| CountEvent::DeadLetter { disable_now }),
        ]
    }

    proptest! {
        #[test]
        fn recording_follows_the_rules(
            count in 0u32..10,
            disabled: bool,
            events in proptest::collection::vec(event(), 0..20),
            disable_after in 0u32..6,
        ) {
            let mut health = EndpointHealth { consecutive_dead_letters: count, disabled };
            let only_resets = CountEvent::only_resets(events.iter().copied());
            for event in &events {
                let before = health;
                let disabled_now = health.record(*event, disable_after);
                // Only an enabled endpoint is disabled, and only by a dead-letter.
                prop_assert_eq!(
                    disabled_now,
                    !before.disabled && health.disabled
                );
                prop_assert!(!before.disabled || health.disabled, "nothing here re-enables");
                match *event {
                    CountEvent::Delivered => prop_assert_eq!(health.consecutive_dead_letters, 0),
                    CountEvent::DeadLetter { .. } if before.disabled => prop_assert_eq!(health, before),
                    CountEvent::DeadLetter { disable_now } if disabled_now => {
                        prop_assert_eq!(health.consecutive_dead_letters, 0);
                        prop_assert!(
                            disable_now
                                || should_disable(before.consecutive_dead_letters + 1, disable_after)
                        );
                    }
                    CountEvent::DeadLetter { .. } => prop_assert_eq!(
                        health.consecutive_dead_letters,
                        before.consecutive_dead_letters + 1
                    ),
                }
                // An enabled endpoint's count stays below the threshold, whatever it started at.
                if disable_after > 0 && !health.disabled {
                    prop_assert!(health.consecutive_dead_letters < disable_after);
                }
            }
            if only_resets && !events.is_empty() {
                prop_assert_eq!(health, EndpointHealth { consecutive_dead_letters: 0, disabled });
            }
        }
    }
}
