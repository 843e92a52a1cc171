//! Cases about leases: claims in flight at once, take-over after expiry and fencing by token,
//! renewal, and `next_due`.

use crate::Store;
use std::collections::HashSet;

use chrono::Duration;

use super::*;
use crate::queue::{ClaimRequest, LeaseToken, NextState};
use crate::{DeliveryStatus, EndpointFields};

/// Many claims in flight at once: no delivery is handed out twice, and every one is handed out.
pub async fn concurrent_claims_never_return_the_same_delivery(store: &dyn Store) {
    let app = create_app(store, "App").await;
    for _ in 0..4 {
        create_endpoint(store, app.id).await;
    }
    for i in 0..50 {
        message_at(store, app.id, 10 + i).await;
    }
    let requests: Vec<ClaimRequest> = (0..16).map(|_| claim_at(t(100), 20)).collect();
    let results = join_all(
        requests
            .iter()
            .map(|req| store.claim_deliveries(req))
            .collect(),
    )
    .await;

    let mut seen = HashSet::new();
    let mut tokens = HashSet::new();
    for result in results {
        let claimed = result.expect("a concurrent claim succeeds");
        assert!(claimed.len() <= 20);
        for c in claimed {
            assert!(
                seen.insert(c.delivery.id),
                "{} claimed twice",
                c.delivery.id
            );
            tokens.insert(c.lease.0);
        }
    }
    // A backend may hand a concurrent claim fewer rows than are left; the rest come now.
    loop {
        let more = claim(store, 100).await;
        if more.is_empty() {
            break;
        }
        for c in more {
            assert!(
                seen.insert(c.delivery.id),
                "{} claimed twice",
                c.delivery.id
            );
        }
    }
    assert_eq!(seen.len(), 200, "every delivery was claimed exactly once");
    assert!(tokens.len() > 1, "each claim makes its own token");
}

/// Once a lease expires, a new claim takes the delivery with a new token; a record under the old
/// token is then `LeaseLost` and writes nothing, while the new owner's record lands. Fencing is
/// by token: a record whose lease expired but was not taken over still lands.
pub async fn an_expired_lease_is_taken_over_and_the_old_owner_can_no_longer_record(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let m = message_at(store, app.id, 10).await;
    let late = message_at(store, app.id, 20).await;
    let short = ClaimRequest {
        lease: Duration::seconds(30),
        ..claim_at(t(50), 10)
    };
    let old = store.claim_deliveries(&short).await.unwrap();
    assert_eq!(claimed_messages(&old), vec![m, late]);
    assert_eq!(old[0].lease_until, t(80));
    assert!(claim(store, 79).await.is_empty(), "still leased at t(79)");

    let new = store.claim_deliveries(&claim_at(t(80), 1)).await.unwrap();
    assert_eq!(
        claimed_messages(&new),
        vec![m],
        "an expired lease is taken over"
    );
    assert_ne!(new[0].lease, old[0].lease);

    let retry = NextState::RetryAt {
        at: t(500),
        client_errors: 0,
    };
    let results = record(
        store,
        vec![
            outcome(&old[0], Some(200), NextState::Delivered, 85),
            outcome(&new[0], Some(503), retry, 86),
        ],
    )
    .await;
    assert_eq!(
        results,
        vec![Recorded::LeaseLost, STORED],
        "one per outcome, in order"
    );
    let stored = delivery(store, app.id, m, ep).await;
    assert_eq!(stored.status, DeliveryStatus::Pending);
    assert_eq!(stored.attempts, 1, "only the new owner's attempt counted");
    assert_eq!(stored.last_status, Some(503));
    assert_eq!(stored.next_attempt_at, t(500));
    let attempts = attempts_of(store, app.id, m).await;
    assert_eq!(attempts.len(), 1, "the lost record wrote no attempt");
    assert_eq!(attempts[0].attempt.response_status, Some(503));

    // The record ended the new lease too: its token is spent.
    let again = record(
        store,
        vec![outcome(&new[0], Some(200), NextState::Delivered, 87)],
    );
    assert_eq!(again.await, vec![Recorded::LeaseLost]);
    assert_eq!(delivery(store, app.id, m, ep).await, stored);

    // Nobody took `late` over, so its owner's token still holds after the lease's end.
    let results = record(
        store,
        vec![outcome(&old[1], Some(204), NextState::Delivered, 90)],
    );
    assert_eq!(results.await, vec![STORED]);
    let late = delivery(store, app.id, late, ep).await;
    assert_eq!(late.status, DeliveryStatus::Delivered);
}

/// A renewed lease keeps the delivery from other claims until the new end; only the current
/// token renews.
pub async fn renewing_a_lease_keeps_the_delivery_from_being_claimed(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let m1 = message_at(store, app.id, 10).await;
    let m2 = message_at(store, app.id, 20).await;
    let claimed = claim(store, 50).await;
    assert_eq!(claimed_messages(&claimed), vec![m1, m2]);
    let (c1, c2) = (&claimed[0], &claimed[1]);

    let bogus = LeaseToken("not-the-token".into());
    let renewed = store
        .renew_leases(
            &[
                (c1.delivery.id, c1.lease.clone()),
                (c2.delivery.id, bogus.clone()),
            ],
            t(300),
        )
        .await
        .unwrap();
    assert_eq!(renewed, 1, "only the lease held with its token");
    let m2_again = claim(store, 200).await;
    assert_eq!(
        claimed_messages(&m2_again),
        vec![m2],
        "m1 renewed until t(300); m2 expired at t(110)"
    );
    let done = outcome(&m2_again[0], Some(200), NextState::Delivered, 201);
    assert_eq!(record(store, vec![done]).await, vec![STORED]);
    assert!(claim(store, 299).await.is_empty());
    let taken = claim(store, 300).await;
    assert_eq!(claimed_messages(&taken), vec![m1]);

    let stale = store
        .renew_leases(&[(c1.delivery.id, c1.lease.clone())], t(5000))
        .await
        .unwrap();
    assert_eq!(stale, 0, "the old owner no longer holds it");
    assert_eq!(
        claimed_messages(&claim(store, 360).await),
        vec![m1],
        "the new lease ends at t(360), untouched by the stale renewal"
    );
    let none = store.renew_leases(&[], t(5000)).await.unwrap();
    assert_eq!(none, 0);
}

/// `next_due` is when a claim could next take something: the earliest `next_attempt_at` of an
/// unleased pending delivery, or the end of a lease; held and finished deliveries do not count.
pub async fn next_due_is_the_earliest_time_a_claim_can_take_something(store: &dyn Store) {
    assert_eq!(store.next_due().await.unwrap(), None, "an empty store");
    let app = create_app(store, "App").await;
    let off = EndpointFields {
        disabled: true,
        ..endpoint_fields("https://example.com/off")
    };
    create_endpoint_with(store, app.id, off).await;
    message_at(store, app.id, 5).await;
    assert_eq!(
        store.next_due().await.unwrap(),
        None,
        "held deliveries wait"
    );

    create_endpoint(store, app.id).await;
    let m20 = message_at(store, app.id, 20).await;
    let m10 = message_at(store, app.id, 10).await;
    assert_eq!(store.next_due().await.unwrap(), Some(t(10)));

    let first = store.claim_deliveries(&claim_at(t(15), 1)).await.unwrap();
    assert_eq!(claimed_messages(&first), vec![m10]);
    assert_eq!(store.next_due().await.unwrap(), Some(t(20)));
    let second = store.claim_deliveries(&claim_at(t(25), 1)).await.unwrap();
    assert_eq!(claimed_messages(&second), vec![m20]);
    assert_eq!(
        store.next_due().await.unwrap(),
        Some(t(15 + LEASE_SECS)),
        "the first lease to end"
    );

    let delivered = outcome(&first[0], Some(200), NextState::Delivered, 30);
    record(store, vec![delivered]).await;
    assert_eq!(store.next_due().await.unwrap(), Some(t(25 + LEASE_SECS)));
    let retry = NextState::RetryAt {
        at: t(400),
        client_errors: 0,
    };
    record(store, vec![outcome(&second[0], Some(500), retry, 31)]).await;
    assert_eq!(store.next_due().await.unwrap(), Some(t(400)));
    message_at(store, app.id, 300).await;
    assert_eq!(store.next_due().await.unwrap(), Some(t(300)));
}

/// A lease that ends before the next pending delivery is due is what `next_due` reports; once
/// it is taken over under a longer lease, the pending delivery's due time is.
pub async fn next_due_is_a_lease_end_that_comes_before_the_next_due_delivery(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let first = message_at(store, app.id, 10).await;
    message_at(store, app.id, 300).await;
    assert_eq!(store.next_due().await.unwrap(), Some(t(10)));

    let leased = store.claim_deliveries(&claim_at(t(10), 1)).await.unwrap();
    assert_eq!(claimed_messages(&leased), vec![first]);
    assert_eq!(
        store.next_due().await.unwrap(),
        Some(t(10 + LEASE_SECS)),
        "the lease ends before t(300)"
    );
    let long = ClaimRequest {
        lease: Duration::hours(1),
        ..claim_at(t(10 + LEASE_SECS), 1)
    };
    let taken = store.claim_deliveries(&long).await.unwrap();
    assert_eq!(claimed_messages(&taken), vec![first], "the expired lease");
    assert_eq!(store.next_due().await.unwrap(), Some(t(300)));
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_leases {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            concurrent_claims_never_return_the_same_delivery,
            an_expired_lease_is_taken_over_and_the_old_owner_can_no_longer_record,
            renewing_a_lease_keeps_the_delivery_from_being_claimed,
            next_due_is_the_earliest_time_a_claim_can_take_something,
            next_due_is_a_lease_end_that_comes_before_the_next_due_delivery,
        );
    };
}
