//! The replay guard (issue 13, ADR 7 "Replay guard"): for schemes whose signature covers
//! neither a timestamp nor the event id, a captured delivery sent again with a new id header
//! would be a new event. With the guard on, a source remembers the digest of each accepted
//! delivery's signed content (one row per source and digest, `inbound_digests`) and
//! [`crate::inbound::InboundEvents::claim_inbound`] refuses a delivery with a NEW event id whose digest
//! was accepted less than the window ago ([`crate::inbound::Claim::Replayed`]): nothing is
//! stored. A repeat of an id already claimed is still a duplicate (or a quarantine), decided
//! first. A refused replay does not move the window: the digest's time is that of the last
//! accepted delivery. Digests are per source, not per account: the account (GitHub's hook id,
//! Shopify's shop) comes from headers a replay can change too.

use chrono::{DateTime, Utc};

/// A source's replay guard, as applied to one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayGuard {
    /// Lowercase hex SHA-256 of the delivery's signed content
    /// (`vow_signature::provider::content_digest`).
    pub digest: String,
    /// How long an accepted digest refuses a delivery under another id (more than zero).
    pub window: chrono::Duration,
}

impl ReplayGuard {
    /// Whether a digest last accepted at `seen_at` still refuses a delivery at `now`.
    pub fn refuses(&self, seen_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        seen_at > self.cutoff(now)
    }

    /// A digest accepted at or before this time no longer refuses anything.
    pub fn cutoff(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_refuses_only_inside_its_window() {
        let guard = ReplayGuard {
            digest: "ab".into(),
            window: chrono::Duration::seconds(60),
        };
        let seen = DateTime::from_timestamp(1_000, 0).unwrap();
        let at = |s| DateTime::from_timestamp(s, 0).unwrap();
        assert!(guard.refuses(seen, at(1_000)));
        assert!(guard.refuses(seen, at(1_059)));
        assert!(
            !guard.refuses(seen, at(1_060)),
            "the window's end is outside it"
        );
        assert_eq!(guard.cutoff(at(1_060)), seen);
    }
}
