//! Cases about one `record_attempts` call carrying several outcomes: they apply one after
//! another, in the batch's order, as if each were recorded on its own.

use super::*;
use crate::queue::{DeliveryStats, LeaseToken, NextState};
use crate::{DeliveryStatus, Endpoint, EndpointKey, Store};

const DISABLED: Recorded = Recorded::Stored {
    endpoint_disabled: true,
};

async fn endpoint_now(store: &dyn Store, app: AppId, ep: EndpointId) -> Endpoint {
    let found = store.get_endpoint(app, &EndpointKey::Id(ep)).await.unwrap();
    found.expect("the endpoint exists")
}

/// A lease records once: the same lease named again later in the batch is `LeaseLost` and
/// writes nothing, and so is an outcome carrying a token that is not the lease's, which leaves
/// the real lease in place.
pub async fn a_batch_records_each_lease_once_and_only_under_its_token(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let m1 = message_at(store, app.id, 10).await;
    let m2 = message_at(store, app.id, 20).await;
    let claimed = claim(store, 50).await;
    assert_eq!(claimed_messages(&claimed), vec![m1, m2]);

    let forged = AttemptOutcome {
        lease: LeaseToken("not-the-token".into()),
        ..outcome(&claimed[1], Some(200), NextState::Delivered, 51)
    };
    let results = record(
        store,
        vec![
            outcome(&claimed[0], Some(200), NextState::Delivered, 51),
            forged,
            // The same lease again: the first outcome ended it.
            outcome(&claimed[0], Some(500), dead_letter("exhausted"), 52),
        ],
    )
    .await;
    assert_eq!(
        results,
        vec![STORED, Recorded::LeaseLost, Recorded::LeaseLost],
        "one per outcome, in order"
    );
    let d1 = delivery(store, app.id, m1, ep).await;
    assert_eq!(
        (d1.status, d1.attempts, d1.last_status),
        (DeliveryStatus::Delivered, 1, Some(200))
    );
    assert_eq!(d1.dead_letter_reason, None);
    assert_eq!(attempts_of(store, app.id, m1).await.len(), 1);
    let d2 = delivery(store, app.id, m2, ep).await;
    assert_eq!(
        (d2.status, d2.attempts, d2.last_status),
        (DeliveryStatus::Pending, 0, None)
    );
    assert!(attempts_of(store, app.id, m2).await.is_empty());

    // The forged outcome left the lease alone: m2 comes back only when it ends.
    assert!(claim(store, 50 + LEASE_SECS - 1).await.is_empty());
    assert_eq!(
        claimed_messages(&claim(store, 50 + LEASE_SECS).await),
        vec![m2]
    );
}

/// Consecutive dead-letters are counted in the batch's order: dead, delivered (a reset), dead,
/// dead is two in a row, under a threshold of 3; the next one disables the endpoint (a change:
/// `updated_at` grows) and holds its waiting delivery.
pub async fn dead_letters_in_one_batch_are_counted_in_its_order(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await;
    let mut ms = Vec::new();
    for i in 0..6 {
        ms.push(message_at(store, app.id, 10 + i).await);
    }
    let claimed = store.claim_deliveries(&claim_at(t(50), 4)).await.unwrap();
    assert_eq!(claimed_messages(&claimed), ms[..4].to_vec());

    let results = record(
        store,
        vec![
            outcome(&claimed[0], Some(500), dead_letter("exhausted"), 51),
            outcome(&claimed[1], Some(200), NextState::Delivered, 51),
            outcome(&claimed[2], Some(500), dead_letter("exhausted"), 51),
            outcome(&claimed[3], Some(500), dead_letter("exhausted"), 51),
        ],
    )
    .await;
    assert_eq!(results, vec![STORED; 4]);
    let after = endpoint_now(store, app.id, ep.id).await;
    assert!(!after.fields.disabled, "the delivered one reset the count");
    let dead = delivery(store, app.id, ms[0], ep.id).await;
    assert_eq!(dead.status, DeliveryStatus::DeadLettered);
    assert_eq!(dead.dead_letter_reason.as_deref(), Some("exhausted"));
    assert_eq!(dead.last_status, Some(500));

    let next = store.claim_deliveries(&claim_at(t(50), 1)).await.unwrap();
    assert_eq!(claimed_messages(&next), vec![ms[4]]);
    let third = outcome(&next[0], Some(500), dead_letter("exhausted"), 52);
    assert_eq!(record(store, vec![third]).await, vec![DISABLED]);
    let after = endpoint_now(store, app.id, ep.id).await;
    assert!(after.fields.disabled);
    assert!(after.updated_at > ep.updated_at, "disabling is a change");
    assert_eq!(
        delivery(store, app.id, ms[5], ep.id).await.status,
        DeliveryStatus::Held
    );
    let stats = store
        .endpoint_stats(app.id, ep.id, &Default::default(), t(53))
        .await
        .unwrap();
    let expected = DeliveryStats {
        success: 1,
        pending: 1,
        sending: 0,
        fail: 4,
    };
    assert_eq!(stats, expected, "the held one counts as pending");
    assert!(claim(store, 100_000).await.is_empty());
    assert_eq!(store.next_due().await.unwrap(), None);
}

/// A dead-letter that disables the endpoint by itself (410 Gone) does so with auto-disabling off
/// (`disable_after` 0); a second one in the same batch is stored and reports nothing.
pub async fn a_gone_endpoint_is_disabled_with_auto_disabling_off_and_reported_once_per_batch(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let m1 = message_at(store, app.id, 10).await;
    let m2 = message_at(store, app.id, 11).await;
    let claimed = claim(store, 50).await;
    assert_eq!(claimed_messages(&claimed), vec![m1, m2]);
    let gone = || NextState::DeadLetter {
        reason: "410 Gone".into(),
        disable_endpoint: true,
    };
    let outcomes = vec![
        outcome(&claimed[0], Some(410), gone(), 51),
        outcome(&claimed[1], Some(410), gone(), 51),
    ];
    let results = store.record_attempts(outcomes, 0).await.unwrap();
    assert_eq!(results, vec![DISABLED, STORED], "reported on the flip only");
    assert!(endpoint_now(store, app.id, ep).await.fields.disabled);
    for m in [m1, m2] {
        let d = delivery(store, app.id, m, ep).await;
        assert_eq!(
            (d.status, d.last_status),
            (DeliveryStatus::DeadLettered, Some(410))
        );
    }
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_batches {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_batch_records_each_lease_once_and_only_under_its_token,
            dead_letters_in_one_batch_are_counted_in_its_order,
            a_gone_endpoint_is_disabled_with_auto_disabling_off_and_reported_once_per_batch,
        );
    };
}
