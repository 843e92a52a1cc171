//! Cases about recording outcomes: each `NextState`, the counters, and auto-disabling.

use vow_core::AttemptId;

use super::*;
use crate::queue::{AttemptTrigger, ClaimRequest, NextState};
use crate::{DeliveryStatus, EndpointKey, Store};

/// Claims the earliest due delivery at `t(secs)`.
async fn claim_one(store: &dyn Store, secs: i64) -> ClaimedDelivery {
    let claimed = store.claim_deliveries(&claim_at(t(secs), 1)).await.unwrap();
    claimed.into_iter().next().expect("a due delivery")
}

async fn endpoint_disabled(store: &dyn Store, app: AppId, ep: EndpointId) -> bool {
    let endpoint = store.get_endpoint(app, &EndpointKey::Id(ep)).await.unwrap();
    endpoint.expect("the endpoint exists").fields.disabled
}

async fn disabled_reason(store: &dyn Store, app: AppId, ep: EndpointId) -> Option<String> {
    let endpoint = store.get_endpoint(app, &EndpointKey::Id(ep)).await.unwrap();
    endpoint.expect("the endpoint exists").disabled_reason
}

const DISABLED: Recorded = Recorded::Stored {
    endpoint_disabled: true,
};

/// `Delivered` stores the attempt row with every field, counts the attempt, keeps its status
/// and ends the lease; the delivery is never claimed again.
pub async fn a_delivered_outcome_stores_the_attempt_and_finishes_the_delivery(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let m = message_at(store, app.id, 10).await;
    let c = claim_one(store, 50).await;
    let attempt = NewAttempt {
        id: AttemptId::new(),
        started_at: t(51),
        url: "https://example.com/hook?attempt=1".into(),
        response_status: Some(201),
        response: "créé ✓".into(),
        duration_ms: 1_234,
        success: true,
        error: None,
        trigger: AttemptTrigger::Manual,
    };
    let delivered = AttemptOutcome {
        delivery_id: c.delivery.id,
        lease: c.lease.clone(),
        attempt: Some(attempt.clone()),
        next: NextState::Delivered,
        now: t(52),
    };
    assert_eq!(record(store, vec![delivered]).await, vec![STORED]);

    let d = delivery(store, app.id, m, ep).await;
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert_eq!(d.attempts, 1);
    assert_eq!(d.client_errors, 0);
    assert_eq!(d.last_status, Some(201));
    assert_eq!(d.dead_letter_reason, None);
    let expected = Attempt {
        id: attempt.id,
        app_id: app.id,
        msg_id: m,
        endpoint_id: ep,
        delivery_id: d.id,
        attempt,
    };
    let got = store.get_attempt(app.id, m, expected.id).await.unwrap();
    assert_eq!(got.as_ref(), Some(&expected), "every field round-trips");
    assert_eq!(attempts_of(store, app.id, m).await, vec![expected]);
    assert!(claim(store, 100_000).await.is_empty(), "delivered is final");
}

/// `RetryAt` makes the delivery pending again at the given time with the given client-error
/// count; `last_status` follows the attempt (`None` for one without a response).
pub async fn a_retry_outcome_reschedules_the_delivery_with_its_counters(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let m = message_at(store, app.id, 10).await;
    let c = claim_one(store, 50).await;
    let retry = NextState::RetryAt {
        at: t(200),
        client_errors: 1,
    };
    assert_eq!(
        record(store, vec![outcome(&c, Some(404), retry, 51)]).await,
        vec![STORED]
    );
    let d = delivery(store, app.id, m, ep).await;
    assert_eq!(d.status, DeliveryStatus::Pending);
    assert_eq!(d.next_attempt_at, t(200));
    assert_eq!((d.attempts, d.client_errors), (1, 1));
    assert_eq!(d.last_status, Some(404));
    assert_eq!(d.dead_letter_reason, None);

    assert!(claim(store, 199).await.is_empty(), "not due before t(200)");
    let again = claim_one(store, 200).await;
    assert_eq!(again.delivery, d, "claimed with its counters");

    let timeout = attempt(None, 201);
    let retry = NextState::RetryAt {
        at: t(400),
        client_errors: 1,
    };
    let timed_out = AttemptOutcome {
        attempt: Some(timeout.clone()),
        ..outcome(&again, None, retry, 202)
    };
    assert_eq!(record(store, vec![timed_out]).await, vec![STORED]);
    let d = delivery(store, app.id, m, ep).await;
    assert_eq!((d.attempts, d.client_errors), (2, 1));
    assert_eq!(d.last_status, None, "the last attempt got no response");
    assert_eq!(d.next_attempt_at, t(400));
    let stored = store.get_attempt(app.id, m, timeout.id).await.unwrap();
    assert_eq!(stored.map(|a| a.attempt), Some(timeout));
    assert_eq!(attempts_of(store, app.id, m).await.len(), 2);
}

/// `DeadLetter` keeps the reason and the last status; without an attempt row (an expired
/// payload) the attempts counter and last status stay as they were.
pub async fn a_dead_letter_keeps_its_reason_and_last_status(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let m1 = message_at(store, app.id, 10).await;
    let m2 = message_at(store, app.id, 20).await;
    let claimed = claim(store, 50).await;
    assert_eq!(claimed_messages(&claimed), vec![m1, m2]);
    let results = record(
        store,
        vec![
            outcome(
                &claimed[0],
                Some(500),
                dead_letter("exhausted; last: 500"),
                51,
            ),
            outcome(&claimed[1], None, dead_letter("payload expired"), 51),
        ],
    )
    .await;
    assert_eq!(results, vec![STORED, STORED]);

    let d1 = delivery(store, app.id, m1, ep).await;
    assert_eq!(d1.status, DeliveryStatus::DeadLettered);
    assert_eq!(
        d1.dead_letter_reason.as_deref(),
        Some("exhausted; last: 500")
    );
    assert_eq!((d1.attempts, d1.last_status), (1, Some(500)));
    let d2 = delivery(store, app.id, m2, ep).await;
    assert_eq!(d2.status, DeliveryStatus::DeadLettered);
    assert_eq!(d2.dead_letter_reason.as_deref(), Some("payload expired"));
    assert_eq!((d2.attempts, d2.last_status), (0, None));
    assert!(attempts_of(store, app.id, m2).await.is_empty());
    assert!(
        claim(store, 100_000).await.is_empty(),
        "dead-lettered is final"
    );
    assert!(
        !endpoint_disabled(store, app.id, ep).await,
        "2 < disable_after"
    );
}

/// `Hold` (the endpoint was disabled when the worker got to it) puts the delivery back to held
/// with no attempt row and no attempt counted.
pub async fn a_hold_puts_the_delivery_back_to_held_without_an_attempt(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let m = message_at(store, app.id, 10).await;
    let c = claim_one(store, 50).await;
    assert_eq!(
        record(store, vec![outcome(&c, None, NextState::Hold, 51)]).await,
        vec![STORED]
    );
    let d = delivery(store, app.id, m, ep).await;
    assert_eq!(d.status, DeliveryStatus::Held);
    assert_eq!(d.attempts, 0);
    assert!(attempts_of(store, app.id, m).await.is_empty());
    assert!(claim(store, 100_000).await.is_empty());
    assert_eq!(store.next_due().await.unwrap(), None);
}

/// The `disable_after`th consecutive dead-letter disables the endpoint (reported once, on the
/// flip), a delivered one in between resets the count, its waiting deliveries go to held while
/// leased ones stay with their worker, re-enabling starts a fresh count, and 0 never disables.
pub async fn an_endpoint_is_disabled_at_the_threshold_of_consecutive_dead_letters(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await;
    let mut ms = Vec::new();
    for i in 0..8 {
        ms.push(message_at(store, app.id, 10 + i).await);
    }
    let fail = |c: &ClaimedDelivery| vec![outcome(c, Some(500), dead_letter("exhausted"), 60)];
    for _ in 0..2 {
        let c = claim_one(store, 50).await;
        assert_eq!(record(store, fail(&c)).await, vec![STORED]);
    }
    assert!(!endpoint_disabled(store, app.id, ep.id).await);
    let c = claim_one(store, 50).await;
    let ok = outcome(&c, Some(200), NextState::Delivered, 60);
    assert_eq!(
        record(store, vec![ok]).await,
        vec![STORED],
        "resets the count"
    );
    for _ in 0..2 {
        let c = claim_one(store, 50).await;
        assert_eq!(record(store, fail(&c)).await, vec![STORED]);
    }
    assert!(
        !endpoint_disabled(store, app.id, ep.id).await,
        "2 since the reset"
    );

    // ms[5] and ms[6] leased; ms[7] waiting.
    let leased = store.claim_deliveries(&claim_at(t(50), 2)).await.unwrap();
    assert_eq!(claimed_messages(&leased), ms[5..7].to_vec());
    assert_eq!(record(store, fail(&leased[0])).await, vec![DISABLED]);
    assert!(endpoint_disabled(store, app.id, ep.id).await);
    assert_eq!(
        disabled_reason(store, app.id, ep.id).await.as_deref(),
        Some("3 deliveries in a row were dead-lettered"),
        "why vow disabled it"
    );
    let waiting = delivery(store, app.id, ms[7], ep.id).await;
    assert_eq!(
        waiting.status,
        DeliveryStatus::Held,
        "waiting deliveries are held"
    );
    let in_flight = delivery(store, app.id, ms[6], ep.id).await;
    assert_eq!(
        in_flight.status,
        DeliveryStatus::Pending,
        "a leased one stays"
    );
    assert_eq!(
        record(store, fail(&leased[1])).await,
        vec![STORED],
        "already disabled: nothing to report, nothing counted"
    );

    // Re-enabled by an operator: a fresh budget of `disable_after`.
    let enabled = crate::EndpointFields {
        disabled: false,
        ..ep.fields.clone()
    };
    store.update_endpoint(app.id, ep.id, enabled).await.unwrap();
    assert_eq!(
        disabled_reason(store, app.id, ep.id).await,
        None,
        "enabled: no reason"
    );
    for i in 0..3 {
        message_at(store, app.id, 100 + i).await;
    }
    for expected in [STORED, STORED, DISABLED] {
        let c = claim_one(store, 200).await;
        assert_eq!(record(store, fail(&c)).await, vec![expected]);
    }
    assert!(disabled_reason(store, app.id, ep.id).await.is_some());

    // disable_after = 0 never disables.
    let other = create_app(store, "Other").await;
    let never = create_endpoint(store, other.id).await.id;
    for i in 0..4 {
        message_at(store, other.id, 10 + i).await;
    }
    let req = ClaimRequest {
        room: EndpointRoom::skipping([ep.id]),
        ..claim_at(t(50), 10)
    };
    let claimed = store.claim_deliveries(&req).await.unwrap();
    assert_eq!(claimed.len(), 4);
    let outcomes = claimed
        .iter()
        .map(|c| outcome(c, Some(500), dead_letter("exhausted"), 60))
        .collect();
    let results = store.record_attempts(outcomes, 0).await.unwrap();
    assert_eq!(results, vec![STORED; 4]);
    assert!(!endpoint_disabled(store, other.id, never).await);
}

/// A dead-letter with `disable_endpoint` (410 Gone) disables the endpoint on the first one and
/// moves its waiting deliveries to held; other endpoints are untouched. A leased delivery comes
/// back through its worker: retried, claimed with `disabled: true`, recorded as `Hold`.
pub async fn a_gone_endpoint_is_disabled_at_once_and_its_waiting_deliveries_are_held(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await;
    let other = create_endpoint(store, app.id).await.id;
    let ms = [
        message_at(store, app.id, 10).await,
        message_at(store, app.id, 11).await,
        message_at(store, app.id, 12).await,
    ];
    let only_ep = |secs: i64, limit: usize| ClaimRequest {
        room: EndpointRoom::skipping([other]),
        ..claim_at(t(secs), limit)
    };
    let leased = store.claim_deliveries(&only_ep(50, 2)).await.unwrap();
    assert_eq!(claimed_messages(&leased), ms[..2].to_vec());

    let gone = NextState::DeadLetter {
        reason: "410 Gone".into(),
        disable_endpoint: true,
    };
    let results = record(store, vec![outcome(&leased[0], Some(410), gone, 51)]).await;
    assert_eq!(results, vec![DISABLED]);
    let after = store.get_endpoint(app.id, &EndpointKey::Id(ep.id)).await;
    let after = after.unwrap().expect("the endpoint exists");
    assert!(after.fields.disabled);
    assert_eq!(
        after.disabled_reason.as_deref(),
        Some("the endpoint answered 410 Gone")
    );
    assert!(after.updated_at > ep.updated_at, "disabling is a change");
    let dead = delivery(store, app.id, ms[0], ep.id).await;
    assert_eq!(dead.status, DeliveryStatus::DeadLettered);
    assert_eq!(dead.last_status, Some(410));
    assert_eq!(
        delivery(store, app.id, ms[2], ep.id).await.status,
        DeliveryStatus::Held
    );
    for m in ms {
        let untouched = delivery(store, app.id, m, other).await;
        assert_eq!(untouched.status, DeliveryStatus::Pending, "other endpoints");
    }

    // The in-flight one: its worker retries it, then finds the endpoint disabled.
    let retry = NextState::RetryAt {
        at: t(100),
        client_errors: 0,
    };
    let results = record(store, vec![outcome(&leased[1], Some(503), retry, 52)]).await;
    assert_eq!(results, vec![STORED]);
    let back = store.claim_deliveries(&only_ep(100, 10)).await.unwrap();
    assert_eq!(claimed_messages(&back), vec![ms[1]]);
    assert!(back[0].endpoint.disabled);
    let held = record(store, vec![outcome(&back[0], None, NextState::Hold, 101)]).await;
    assert_eq!(held, vec![STORED]);
    let d = delivery(store, app.id, ms[1], ep.id).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Held, 1));
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_outcomes {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_delivered_outcome_stores_the_attempt_and_finishes_the_delivery,
            a_retry_outcome_reschedules_the_delivery_with_its_counters,
            a_dead_letter_keeps_its_reason_and_last_status,
            a_hold_puts_the_delivery_back_to_held_without_an_attempt,
            an_endpoint_is_disabled_at_the_threshold_of_consecutive_dead_letters,
            a_gone_endpoint_is_disabled_at_once_and_its_waiting_deliveries_are_held,
        );
    };
}
