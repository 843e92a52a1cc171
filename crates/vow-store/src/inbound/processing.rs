//! Processing inbound events (issue 5, items 6–8): what the forwarding workers and pull
//! consumers claim, what they record, and the operators' decisions afterwards.
//!
//! An event in `received` or `retryable` whose time has come is claimed with an expiring lease
//! ([`WorkRequest`]; a conditional update, `SKIP LOCKED` on PostgreSQL) and becomes
//! `processing`. A [`Consumer::Push`] claim takes events of sources that have destinations
//! (vow's workers forward them); a [`Consumer::Pull`] claim takes one source's events for a
//! consumer that fetches its own work through the API.
//!
//! Each destination's outcome is kept ([`Forward`]); the event's state is their [`aggregate`]:
//! any `retryable` → `retryable` (due again at the time the worker chose), else any `uncertain`
//! → `uncertain`, else any `dead_lettered`, else any `rejected`, else `completed`. A destination
//! whose outcome is final is never forwarded to again, so a retry reaches only the
//! destinations still owed the event. A pull consumer's outcome is kept the same way, under
//! destination `None`.
//!
//! A lease that runs out means a worker stopped between forwarding and recording: the next
//! claim records every destination still owed the event as `uncertain` (it may have received
//! it), or `retryable` when the destination is idempotent.
//!
//! **Ordering.** An event with a version and an entity (the source's pointers) is claimed only
//! when no other event of its entity with a version is being processed (an event without a
//! version neither waits nor holds one back), and only when its version is newer
//! than the last one claimed for that entity ([`supersedes`]); else it becomes `superseded`. The
//! mark stays after the entity's deletion (a versioned tombstone), so an older update arriving
//! late is superseded too.

use chrono::{DateTime, Utc};
use vow_core::version::Version;
use vow_core::{DestinationId, InboundEventId, SourceId};

use super::{Destination, InboundContent, InboundEvent, InboundState};
pub use crate::queue::LeaseToken;

/// Who claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumer {
    /// vow's forwarding workers: events of every source that has destinations.
    Push,
    /// A pull consumer of this source (which must have no destinations).
    Pull(SourceId),
}

impl Consumer {
    /// The stored name (`push`, `pull`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Push => "push",
            Self::Pull(_) => "pull",
        }
    }
}

/// A claim of work.
#[derive(Debug, Clone)]
pub struct WorkRequest {
    /// Claim what is due at `now`; leases run out before `now` are settled first.
    pub now: DateTime<Utc>,
    /// The lease lasts until `now + lease`.
    pub lease: chrono::Duration,
    /// At most this many events.
    pub limit: usize,
    /// Who claims.
    pub consumer: Consumer,
    /// Attempts after which a retryable outcome is dead-lettered (an expired lease of an
    /// idempotent destination is retried until then).
    pub max_attempts: u32,
}

/// One claimed event.
#[derive(Debug, Clone)]
pub struct ClaimedEvent {
    /// The event, now `processing` (its `attempts` counts this one).
    pub event: InboundEvent,
    /// Its exact bytes and headers; `None` when retention removed them.
    pub content: Option<InboundContent>,
    /// The lease.
    pub lease: LeaseToken,
    /// When the lease runs out.
    pub lease_until: DateTime<Utc>,
    /// For a push claim: the destinations still owed the event (no final outcome yet).
    pub pending: Vec<Destination>,
}

/// What a claim did.
#[derive(Debug, Clone, Default)]
pub struct WorkClaim {
    /// The events claimed, oldest due first.
    pub claimed: Vec<ClaimedEvent>,
    /// Events found not newer than their entity's mark, now `superseded`.
    pub superseded: Vec<InboundEvent>,
    /// Events whose lease had run out, settled (uncertain or retryable) before claiming.
    pub expired: Vec<InboundEvent>,
}

/// What became of one forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Confirmed (a 2xx, or an operator said so).
    Completed,
    /// Refused for good (a 4xx other than 408/429, or the destination said so).
    Rejected,
    /// Failed before it could have had an effect; tried again later.
    Retryable,
    /// May have had an effect (a timeout after sending, a lost lease): an operator decides.
    Uncertain,
    /// Retryable, but out of attempts: kept for review and replay.
    DeadLettered,
}

impl Outcome {
    /// Every outcome, for parsing.
    pub const ALL: [Outcome; 5] = [
        Self::Completed,
        Self::Rejected,
        Self::Retryable,
        Self::Uncertain,
        Self::DeadLettered,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Rejected => "rejected",
            Self::Retryable => "retryable",
            Self::Uncertain => "uncertain",
            Self::DeadLettered => "dead_lettered",
        }
    }

    /// The outcome called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// Whether nothing will forward to that destination again without an operator.
    pub fn is_final(self) -> bool {
        self != Self::Retryable
    }

    /// The event state this outcome stands for.
    pub fn state(self) -> InboundState {
        match self {
            Self::Completed => InboundState::Completed,
            Self::Rejected => InboundState::Rejected,
            Self::Retryable => InboundState::Retryable,
            Self::Uncertain => InboundState::Uncertain,
            Self::DeadLettered => InboundState::DeadLettered,
        }
    }

    /// How much it weighs in [`aggregate`]: the heaviest outcome names the event's state.
    fn weight(self) -> u8 {
        match self {
            Self::Completed => 0,
            Self::Rejected => 1,
            Self::DeadLettered => 2,
            Self::Uncertain => 3,
            Self::Retryable => 4,
        }
    }
}

/// An event's state given its destinations' outcomes (see the module docs); `completed` for
/// none.
pub fn aggregate(outcomes: impl IntoIterator<Item = Outcome>) -> InboundState {
    outcomes
        .into_iter()
        .max_by_key(|o| o.weight())
        .map_or(InboundState::Completed, Outcome::state)
}

/// Why an event at `version` must be superseded given its entity's `mark` (the version last
/// claimed), or `None` when it is newer and may be claimed. Versions compare by what they mean
/// ([`vow_core::version`]: numbers exactly, RFC 3339 times as instants); a version that cannot
/// be ordered against the mark (not a number or a time, or of the other kind) is superseded
/// too, with a note saying so: ordering is never guessed.
pub fn supersedes(version: &str, mark: &str) -> Option<String> {
    let (parsed, marked) = match (Version::parse(version), Version::parse(mark)) {
        (Ok(parsed), Ok(marked)) => (parsed, marked),
        (Err(e), _) | (_, Err(e)) => {
            return Some(format!(
                "version {version} cannot be ordered against version {mark}, already processed for its entity: {e}"
            ))
        }
    };
    match parsed.partial_cmp(&marked) {
        Some(std::cmp::Ordering::Greater) => None,
        Some(_) => Some(format!(
            "version {version} is not newer than version {mark}, already processed for its entity"
        )),
        None => Some(format!(
            "version {version} (a {}) cannot be ordered against version {mark} (a {}), already processed for its entity",
            parsed.kind(),
            marked.kind()
        )),
    }
}

/// The outcome at one destination, as a worker or consumer reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationResult {
    /// The destination; `None` for a pull consumer.
    pub destination: Option<DestinationId>,
    /// What became of it: not [`Outcome::DeadLettered`] (the store decides that from
    /// [`NextTry::Exhausted`]).
    pub outcome: Outcome,
    /// The response status, if a response came.
    pub status: Option<u16>,
    /// What went wrong, for operators (never a secret).
    pub error: Option<String>,
}

pub use vow_core::retry::NextTry;

/// A claimed event's outcome, to record under its lease.
#[derive(Debug, Clone)]
pub struct WorkOutcome {
    /// The event.
    pub event: InboundEventId,
    /// The lease it was claimed with.
    pub lease: LeaseToken,
    /// One result per destination forwarded to (or one for a pull consumer).
    pub results: Vec<DestinationResult>,
    /// When it is due again, if any result is retryable.
    pub next: NextTry,
    /// Record time.
    pub now: DateTime<Utc>,
}

/// What recording an outcome did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkRecorded {
    /// Stored; the event as it now stands.
    Stored(Box<InboundEvent>),
    /// The lease was no longer held (it ran out and the event was settled or claimed again):
    /// nothing changed.
    LeaseLost,
}

impl WorkRecorded {
    /// The event as it now stands; a lost lease as [`lease_lost`] (what the API's write of a
    /// pull consumer's outcome answers, so that a keyed one rolls back and stores the refusal).
    pub fn into_event(self) -> crate::StoreResult<InboundEvent> {
        match self {
            Self::Stored(event) => Ok(*event),
            Self::LeaseLost => Err(lease_lost()),
        }
    }
}

/// The error of a pull consumer's outcome recorded under a lease no longer held (every backend
/// says the same).
pub fn lease_lost() -> crate::StoreError {
    crate::StoreError::Conflict(
        "this lease is no longer held: the event was settled or claimed again".into(),
    )
}

/// One destination's recorded outcome for an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// The destination; `None` for a pull consumer.
    pub destination: Option<DestinationId>,
    /// Its outcome.
    pub outcome: Outcome,
    /// Attempts made there.
    pub attempts: u32,
    /// The last response status.
    pub status: Option<u16>,
    /// The last problem.
    pub error: Option<String>,
    /// When it was recorded.
    pub updated_at: DateTime<Utc>,
}

/// An operator's decision on an `uncertain` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// It did take effect: the uncertain outcomes become `completed`.
    Completed,
    /// It did not: forward again (the uncertain outcomes become `retryable`, due now).
    Retry,
}

/// The text kept on a forward whose lease ran out.
pub const LEASE_EXPIRED: &str =
    "the worker's lease ran out before it recorded an outcome (it may have been delivered)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heaviest_outcome_names_the_state() {
        use Outcome::*;
        assert_eq!(aggregate([]), InboundState::Completed);
        assert_eq!(aggregate([Completed, Completed]), InboundState::Completed);
        assert_eq!(aggregate([Completed, Rejected]), InboundState::Rejected);
        assert_eq!(
            aggregate([Rejected, DeadLettered]),
            InboundState::DeadLettered
        );
        assert_eq!(
            aggregate([DeadLettered, Uncertain]),
            InboundState::Uncertain
        );
        assert_eq!(
            aggregate([Uncertain, Retryable, Completed]),
            InboundState::Retryable
        );
    }

    #[test]
    fn versions_compare_by_what_they_mean() {
        assert_eq!(supersedes("10", "9"), None);
        assert!(supersedes("9", "10").unwrap().contains("not newer"));
        assert!(supersedes("7", "7.0").unwrap().contains("not newer"));
        assert_eq!(
            supersedes("2024-05-02T00:00:00Z", "2024-05-01T23:59:59Z"),
            None
        );
        assert_eq!(
            supersedes("2026-01-01T09:00:00Z", "2026-01-01T10:00:00+02:00"),
            None,
            "09:00Z is after 08:00Z"
        );
        assert!(supersedes("2026-01-01T10:00:00+02:00", "2026-01-01T09:00:00Z").is_some());
        assert_eq!(
            supersedes("2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00Z"),
            None
        );
        let mixed = supersedes("2026-01-01T00:00:00Z", "5").unwrap();
        assert!(mixed.contains("cannot be ordered"), "{mixed}");
        let text = supersedes("v2", "v1").unwrap();
        assert!(
            text.contains("neither a number nor an RFC 3339 time"),
            "{text}"
        );
    }

    #[test]
    fn outcomes_round_trip_through_their_names() {
        for outcome in Outcome::ALL {
            assert_eq!(Outcome::parse(outcome.as_str()), Some(outcome));
            assert_eq!(outcome.state().as_str(), outcome.as_str());
        }
        assert!(Outcome::Completed.is_final() && !Outcome::Retryable.is_final());
    }
}
