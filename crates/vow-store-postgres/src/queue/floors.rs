//! Where a claim's walk over an endpoint's pending rows starts: its floor.
//!
//! The pending index, `(endpoint_id, next_attempt_at) WHERE status = 'pending'`, keeps the
//! entries of the rows delivered since the last vacuum at the front of each endpoint's range,
//! and autovacuum visits a database at most once a minute. A walk from the front reads them all:
//! measured at 2,000 deliveries/s, about 230 index pages per walk, two walks per claim. So a
//! claim walks an endpoint from its floor: the earliest due time it claimed from that endpoint
//! before, less [`SLACK`]. Below it that claim found only rows that were leased (in flight),
//! which leave the pending set as they finish.
//!
//! What a floor can hide: a lease that expires (its worker crashed) on a row below it, and a row
//! that commits more than [`SLACK`] after its due time. So a floor lasts [`LIFETIME`] of claim
//! time from the walk from the front that set it; then the endpoint's next claim walks from the
//! front again. Such a row is claimed at most that much later than without floors.
//!
//! Floors are the claiming process's own (each process walks its own way); a process that has
//! none walks from the front, which is always right.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use vow_core::EndpointId;

/// How far below the earliest row it claimed an endpoint's floor stays: room for rows that
/// commit a little after their due time (a create waits for its group commit).
pub(crate) const SLACK: chrono::Duration = chrono::Duration::seconds(1);

/// How long (in claim time) a floor lasts before the endpoint is walked from the front again.
pub(crate) const LIFETIME: chrono::Duration = chrono::Duration::seconds(1);

/// One process's floors, by endpoint.
#[derive(Debug, Default)]
pub(crate) struct ClaimFloors(Mutex<HashMap<EndpointId, Floor>>);

#[derive(Debug, Clone, Copy)]
struct Floor {
    /// The walk starts at `next_attempt_at >= at`.
    at: DateTime<Utc>,
    /// The claim time of the walk from the front this floor was first set by.
    since: DateTime<Utc>,
}

impl Floor {
    fn lasts_at(&self, now: DateTime<Utc>) -> bool {
        self.since <= now && now - self.since < LIFETIME
    }
}

/// The floors a claim walks from: endpoints and their floors, as two arrays (an endpoint not
/// named is walked from the front).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Floors {
    pub endpoints: Vec<String>,
    pub at: Vec<DateTime<Utc>>,
}

impl ClaimFloors {
    /// The floors that still last for a claim at `now`; drops the others.
    pub(crate) fn for_claim(&self, now: DateTime<Utc>) -> Floors {
        let mut floors = self.lock();
        floors.retain(|_, floor| floor.lasts_at(now));
        let (endpoints, at) = floors
            .iter()
            .map(|(ep, floor)| (ep.to_string(), floor.at))
            .unzip();
        Floors { endpoints, at }
    }

    /// After a claim at `now` took `claimed` (endpoint and due time of each row): raises the
    /// floors of the endpoints it took rows from. An endpoint without one (walked from the
    /// front) gets one that lasts from `now`.
    pub(crate) fn raise(
        &self,
        now: DateTime<Utc>,
        claimed: impl IntoIterator<Item = (EndpointId, DateTime<Utc>)>,
    ) {
        let mut earliest: HashMap<EndpointId, DateTime<Utc>> = HashMap::new();
        for (ep, due) in claimed {
            earliest
                .entry(ep)
                .and_modify(|e| *e = (*e).min(due))
                .or_insert(due);
        }
        let mut floors = self.lock();
        for (ep, due) in earliest {
            let at = due - SLACK;
            floors
                .entry(ep)
                .and_modify(|floor| floor.at = floor.at.max(at))
                .or_insert(Floor { at, since: now });
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<EndpointId, Floor>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn a_floor_is_set_by_a_walk_from_the_front_and_raised_by_later_claims() {
        let floors = ClaimFloors::default();
        let ep = EndpointId::new();
        assert_eq!(floors.for_claim(at(0)), Floors::default());

        floors.raise(at(0), [(ep, at(-5)), (ep, at(-7))]);
        let walked = floors.for_claim(at(0));
        assert_eq!(walked.endpoints, [ep.to_string()]);
        assert_eq!(walked.at, [at(-7) - SLACK]);

        // A claim from the floor raises it, never lowers it.
        floors.raise(at(0), [(ep, at(-3))]);
        assert_eq!(floors.for_claim(at(0)).at, [at(-3) - SLACK]);
        floors.raise(at(0), [(ep, at(-9))]);
        assert_eq!(floors.for_claim(at(0)).at, [at(-3) - SLACK]);
    }

    #[test]
    fn a_floor_lasts_its_lifetime_from_the_walk_that_set_it() {
        let floors = ClaimFloors::default();
        let ep = EndpointId::new();
        floors.raise(at(0), [(ep, at(0))]);
        // Raising it later does not extend it.
        let almost = at(0) + LIFETIME - chrono::Duration::milliseconds(1);
        floors.raise(almost, [(ep, at(0))]);
        assert_eq!(floors.for_claim(almost).endpoints.len(), 1);
        assert_eq!(floors.for_claim(at(0) + LIFETIME), Floors::default());
        // Nor does claim time that went backwards keep it.
        floors.raise(at(10), [(ep, at(10))]);
        assert_eq!(floors.for_claim(at(9)), Floors::default());
    }

    #[test]
    fn an_endpoint_walked_from_the_front_gets_a_fresh_floor() {
        let floors = ClaimFloors::default();
        let (a, b) = (EndpointId::new(), EndpointId::new());
        floors.raise(at(0), [(a, at(0))]);
        // `b` had no floor; `a` had one. The claim took rows of both.
        floors.raise(at(0), [(a, at(2)), (b, at(1))]);
        let now = floors.for_claim(at(0));
        let mut got: Vec<_> = now.endpoints.iter().cloned().zip(now.at).collect();
        got.sort();
        let mut want = vec![
            (a.to_string(), at(2) - SLACK),
            (b.to_string(), at(1) - SLACK),
        ];
        want.sort();
        assert_eq!(got, want);
    }
}
