//! Where the claim of an inbound event lands, the same on every backend: the first row of an
//! event id is `received` and due at once; another payload under a claimed id is a `quarantined`
//! row, due never (until an operator releases it). Each has its own partial unique index, named
//! here by its columns and predicate, which both backends' migrations create alike.

use chrono::{DateTime, Utc};

use super::InboundState;

/// Which unique index an insert of an inbound event may conflict on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimTarget {
    /// `inbound_events_claim`: the first row of an event id.
    Claim,
    /// `inbound_events_quarantine`: another payload under a claimed id.
    Quarantine,
}

impl ClaimTarget {
    /// The columns of its unique index (an `ON CONFLICT` target).
    pub fn columns(self) -> &'static str {
        match self {
            Self::Claim => "source_id, account, event_id",
            Self::Quarantine => "source_id, account, event_id, sha256",
        }
    }

    /// Which rows its index holds (its partial-index predicate).
    pub fn rows(self) -> &'static str {
        match self {
            Self::Claim => "conflicts_with IS NULL",
            Self::Quarantine => "conflicts_with IS NOT NULL",
        }
    }

    /// The state of a row inserted under it.
    pub fn state(self) -> InboundState {
        match self {
            Self::Claim => InboundState::Received,
            Self::Quarantine => InboundState::Quarantined,
        }
    }

    /// When a row inserted under it at `now` is due to be processed.
    pub fn due(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Self::Claim => Some(now),
            Self::Quarantine => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_received_and_due_and_a_quarantined_row_is_never_due() {
        let now = Utc::now();
        assert_eq!(ClaimTarget::Claim.state(), InboundState::Received);
        assert_eq!(ClaimTarget::Claim.due(now), Some(now));
        assert_eq!(ClaimTarget::Quarantine.state(), InboundState::Quarantined);
        assert_eq!(ClaimTarget::Quarantine.due(now), None);
        assert!(ClaimTarget::Quarantine
            .columns()
            .starts_with(ClaimTarget::Claim.columns()));
    }
}
