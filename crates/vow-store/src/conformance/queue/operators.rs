//! Cases about what operators do besides replay: resend one delivery, count an endpoint's
//! deliveries by state.

use crate::Store;
use chrono::Duration;

use super::*;
use crate::queue::{ClaimRequest, DeliveryStats, StatsFilter};
use crate::DeliveryStatus;

/// Resending a dead-lettered delivery makes it pending, due now, with a fresh run (attempts and
/// client errors 0, no reason) and ends any lease; resending to an endpoint the message never
/// went to writes a new pending delivery.
pub async fn resend_resets_an_existing_delivery_and_creates_a_missing_one(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let m = message_at(store, app.id, 10).await;
    let c = claim(store, 50).await.remove(0);
    let retry = NextState::RetryAt {
        at: t(100),
        client_errors: 2,
    };
    record_all(store, vec![outcome(&c, Some(404), retry, 51)]).await;
    let c = claim(store, 100).await.remove(0);
    record_all(store, vec![outcome(&c, Some(404), dead_letter("4xx"), 101)]).await;
    let dead = delivery(store, app.id, m, ep).await;
    assert_eq!((dead.attempts, dead.client_errors), (2, 2));

    let resent = store.resend(app.id, m, ep, t(500)).await.unwrap();
    let expected = Delivery {
        status: DeliveryStatus::Pending,
        attempts: 0,
        client_errors: 0,
        dead_letter_reason: None,
        next_attempt_at: t(500),
        manual: true,
        ..dead.clone()
    };
    assert!(!dead.manual, "scheduled attempts so far");
    assert_eq!(resent, expected, "same row, fresh run; last status kept");
    assert_eq!(delivery(store, app.id, m, ep).await, expected);
    assert!(claim(store, 499).await.is_empty());
    let leased = claim(store, 500).await;
    assert_eq!(claimed_messages(&leased), vec![m]);
    assert!(
        leased[0].delivery.manual,
        "the claim says the attempt is manual"
    );

    // Resending a leased delivery ends the lease: its worker's record is lost.
    store.resend(app.id, m, ep, t(600)).await.unwrap();
    let lost = outcome(&leased[0], Some(200), NextState::Delivered, 601);
    assert_eq!(record(store, vec![lost]).await, vec![Recorded::LeaseLost]);
    assert_eq!(claimed_messages(&claim(store, 600).await), vec![m]);

    // An endpoint created after the message has no delivery of it until resent.
    let late = create_endpoint(store, app.id).await.id;
    assert_eq!(store.list_deliveries(app.id, m).await.unwrap().len(), 1);
    let created = store.resend(app.id, m, late, t(700)).await.unwrap();
    assert_eq!(created.app_id, app.id);
    assert_eq!((created.msg_id, created.endpoint_id), (m, late));
    assert_eq!(created.status, DeliveryStatus::Pending);
    assert_eq!((created.attempts, created.client_errors), (0, 0));
    assert_eq!(created.next_attempt_at, t(700));
    assert_eq!(created.created_at, t(700));
    assert!(created.manual);
    assert_eq!(delivery(store, app.id, m, late).await, created);
    assert_eq!(store.list_deliveries(app.id, m).await.unwrap().len(), 2);
    let claimed = claim(store, 700).await;
    assert!(claimed.iter().any(|c| c.delivery.id == created.id));

    // Recording an attempt ends the manual run: its retries are scheduled ones.
    let manual = claimed
        .iter()
        .find(|c| c.delivery.id == created.id)
        .unwrap();
    let retry = NextState::RetryAt {
        at: t(800),
        client_errors: 0,
    };
    record_all(store, vec![outcome(manual, Some(503), retry, 701)]).await;
    assert!(!delivery(store, app.id, m, late).await.manual);
}

/// Resend checks the message, then the endpoint, within the application, and writes nothing
/// when either is missing.
pub async fn resend_of_a_missing_message_or_endpoint_is_not_found(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let other = create_app(store, "Other").await;
    let ep = create_endpoint(store, app.id).await.id;
    let other_ep = create_endpoint(store, other.id).await.id;
    let m = message_at(store, app.id, 10).await;
    let other_m = message_at(store, other.id, 10).await;
    let now = t(100);

    let r = store.resend(app.id, MessageId::new(), ep, now).await;
    assert_not_found(r, "message");
    assert_not_found(store.resend(app.id, other_m, ep, now).await, "message");
    let r = store.resend(app.id, m, EndpointId::new(), now).await;
    assert_not_found(r, "endpoint");
    assert_not_found(store.resend(app.id, m, other_ep, now).await, "endpoint");

    let mine = store.list_deliveries(app.id, m).await.unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].next_attempt_at, t(10), "untouched");
    let theirs = store.list_deliveries(other.id, other_m).await.unwrap();
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0].next_attempt_at, t(10), "untouched");
}

/// Stats count an endpoint's deliveries created in `[since, until)` by state at `now`:
/// delivered, pending (held and expired leases included), sending (leased now), failed.
pub async fn endpoint_stats_count_deliveries_by_state_within_the_window(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let other = create_endpoint(store, app.id).await.id;
    for i in 1..=7 {
        message_at(store, app.id, 10 * i).await;
    }
    let first = store
        .claim_deliveries(&ClaimRequest {
            room: EndpointRoom::skipping([other]),
            ..claim_at(t(100), 4)
        })
        .await
        .unwrap();
    record_all(
        store,
        vec![
            outcome(&first[0], Some(200), NextState::Delivered, 101),
            outcome(&first[1], Some(200), NextState::Delivered, 101),
            outcome(&first[2], Some(500), dead_letter("exhausted"), 101),
            outcome(&first[3], None, NextState::Hold, 101),
        ],
    )
    .await;
    let lease = |secs: i64| ClaimRequest {
        room: EndpointRoom::skipping([other]),
        lease: Duration::seconds(secs),
        ..claim_at(t(100), 1)
    };
    assert_eq!(store.claim_deliveries(&lease(1000)).await.unwrap().len(), 1);
    assert_eq!(store.claim_deliveries(&lease(10)).await.unwrap().len(), 1);

    let stats = |since: Option<i64>, until: Option<i64>, ep: EndpointId| {
        let filter = StatsFilter {
            since: since.map(t),
            until: until.map(t),
            replay: None,
        };
        async move { store.endpoint_stats(app.id, ep, &filter, t(200)).await }
    };
    let all = DeliveryStats {
        success: 2,
        pending: 3,
        sending: 1,
        fail: 1,
    };
    assert_eq!(stats(None, None, ep).await.unwrap(), all);
    let window = DeliveryStats {
        success: 1,
        pending: 1,
        sending: 1,
        fail: 1,
    };
    assert_eq!(stats(Some(20), Some(60), ep).await.unwrap(), window);
    let untouched = DeliveryStats {
        pending: 7,
        ..DeliveryStats::default()
    };
    assert_eq!(stats(None, None, other).await.unwrap(), untouched);
    assert_eq!(
        stats(Some(1000), None, ep).await.unwrap(),
        DeliveryStats::default()
    );
    assert_not_found(stats(None, None, EndpointId::new()).await, "endpoint");
    let stranger = create_app(store, "Stranger").await;
    let r = store
        .endpoint_stats(stranger.id, ep, &StatsFilter::default(), t(200))
        .await;
    assert_not_found(r, "endpoint");
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_operators {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            resend_resets_an_existing_delivery_and_creates_a_missing_one,
            resend_of_a_missing_message_or_endpoint_is_not_found,
            endpoint_stats_count_deliveries_by_state_within_the_window,
        );
    };
}
