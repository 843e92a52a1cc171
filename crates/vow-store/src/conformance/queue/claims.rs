//! Cases about claiming: which deliveries a claim takes and in what order, and what it carries.

use crate::Store;
use std::collections::{HashMap, HashSet};

use super::*;
use crate::queue::{ClaimRequest, EndpointRoom, NextState};
use crate::{
    DeliveryOptions, DeliveryStatus, EndpointFields, EndpointKey, EndpointSecret, NewMessage,
};

/// A claim takes pending deliveries that are due (`next_attempt_at <= now`) and not leased,
/// earliest first, at most `limit`; held, leased, finished and future ones stay where they are.
pub async fn a_claim_takes_only_due_pending_unleased_deliveries_earliest_first(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await;
    let off = EndpointFields {
        disabled: true,
        ..endpoint_fields("https://example.com/off")
    };
    let off = create_endpoint_with(store, app.id, off).await;
    // Created out of order, so "earliest first" is not "first written".
    let m30 = message_at(store, app.id, 30).await;
    let m10 = message_at(store, app.id, 10).await;
    let m40 = message_at(store, app.id, 40).await;
    let m20 = message_at(store, app.id, 20).await;
    let m100 = message_at(store, app.id, 100).await;

    let first = store.claim_deliveries(&claim_at(t(50), 2)).await.unwrap();
    assert_eq!(claimed_messages(&first), vec![m10, m20], "the two earliest");
    for c in &first {
        assert_eq!(
            c.delivery.endpoint_id, ep.id,
            "held deliveries are not claimed"
        );
        assert_eq!(c.delivery.status, DeliveryStatus::Pending);
        assert_eq!((c.delivery.attempts, c.delivery.client_errors), (0, 0));
        assert_eq!(c.lease_until, t(50 + LEASE_SECS));
    }
    assert_eq!(
        first[0].delivery,
        delivery(store, app.id, m10, ep.id).await,
        "the claimed delivery is the stored row"
    );

    let rest = claim(store, 50).await;
    assert_eq!(
        claimed_messages(&rest),
        vec![m30, m40],
        "leased deliveries are not claimed again and m100 is not due"
    );
    assert!(
        rest.iter().all(|c| c.lease != first[0].lease),
        "another claim, another token"
    );
    assert!(claim(store, 50).await.is_empty());
    // Due exactly at `now` is due; the others stay leased until t(110).
    assert_eq!(claimed_messages(&claim(store, 100).await), vec![m100]);

    let done = vec![
        outcome(&first[0], Some(200), NextState::Delivered, 60),
        outcome(&first[1], Some(500), dead_letter("gave up"), 60),
    ];
    assert_eq!(record(store, done).await, vec![STORED, STORED]);
    // Long after every lease expired: the unfinished ones are claimable again, in order.
    assert_eq!(
        claimed_messages(&claim(store, 1000).await),
        vec![m30, m40, m100]
    );
    for m in [m10, m20, m30, m40, m100] {
        let held = delivery(store, app.id, m, off.id).await;
        assert_eq!(held.status, DeliveryStatus::Held, "never claimed");
    }
}

/// `EndpointRoom::skipping` leaves those endpoints' deliveries for a later claim.
pub async fn a_claim_skips_the_endpoints_it_is_told_to_skip(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let a = create_endpoint(store, app.id).await.id;
    let b = create_endpoint(store, app.id).await.id;
    let c = create_endpoint(store, app.id).await.id;
    let m1 = message_at(store, app.id, 10).await;
    let m2 = message_at(store, app.id, 20).await;

    let req = ClaimRequest {
        room: EndpointRoom::skipping([a, c]),
        ..claim_at(t(50), 100)
    };
    let only_b = store.claim_deliveries(&req).await.unwrap();
    assert_eq!(claimed_messages(&only_b), vec![m1, m2]);
    assert!(only_b.iter().all(|d| d.delivery.endpoint_id == b));

    let rest = claim(store, 50).await;
    assert_eq!(rest.len(), 4);
    let endpoints: HashSet<_> = rest.iter().map(|d| d.delivery.endpoint_id).collect();
    assert_eq!(endpoints, HashSet::from([a, c]));
}

/// Each endpoint gets at most its room (`default`, or its own in `except`); an endpoint without
/// room and with a long backlog holds no one else back; the endpoint that has waited longest is
/// served first.
pub async fn a_claim_gives_each_endpoint_at_most_its_room(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let busy = create_endpoint(store, app.id).await.id;
    let a = create_endpoint(store, app.id).await.id;
    let b = create_endpoint(store, app.id).await.id;
    let mut messages = Vec::new();
    for secs in 1..=6 {
        messages.push(message_at(store, app.id, secs).await);
    }

    let req = ClaimRequest {
        room: EndpointRoom {
            default: 2,
            except: HashMap::from([(busy, 0), (b, 1)]),
        },
        ..claim_at(t(50), 100)
    };
    let first = store.claim_deliveries(&req).await.unwrap();
    let got: Vec<_> = first
        .iter()
        .map(|c| (c.delivery.endpoint_id, c.delivery.msg_id))
        .collect();
    let wanted = [(a, messages[0]), (b, messages[0]), (a, messages[1])];
    assert_eq!(got.len(), 3, "a: 2 (default), b: 1, busy: none; {got:?}");
    for w in &wanted {
        assert!(got.contains(w), "{w:?} in {got:?}");
    }
    assert_eq!(
        claimed_messages(&first),
        vec![messages[0], messages[0], messages[1]],
        "earliest due first"
    );

    // `limit` bounds the total. `busy` has waited longest (since t(1)), then `b` (t(2)),
    // then `a` (t(3)).
    let req = ClaimRequest {
        room: EndpointRoom {
            default: 3,
            except: HashMap::new(),
        },
        ..claim_at(t(50), 5)
    };
    let next = store.claim_deliveries(&req).await.unwrap();
    let got: Vec<_> = next
        .iter()
        .map(|c| (c.delivery.endpoint_id, c.delivery.msg_id))
        .collect();
    assert_eq!(got.len(), 5, "{got:?}");
    for w in [
        (busy, messages[0]),
        (busy, messages[1]),
        (busy, messages[2]),
        (b, messages[1]),
        (b, messages[2]),
    ] {
        assert!(got.contains(&w), "{w:?} in {got:?}");
    }
}

/// A claimed delivery carries the event type, the payload verbatim, and the endpoint as it is
/// at claim time: URL, headers, throttle, `DeliveryOptions`, `updated_at`, and every secret
/// valid then (two during a rotation's grace period, current first).
pub async fn a_claim_carries_the_payload_the_event_type_and_the_endpoint_target(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let options = DeliveryOptions {
        signature_style: vow_core::SignatureStyle::SeedSha256,
        timeout_ms: Some(1_500),
        retry_schedule: Some("5s,1m,2h".parse().expect("a valid schedule")),
    };
    let fields = EndpointFields {
        headers: map(&[("X-Tenant", "42")]),
        throttle_rate: Some(9),
        delivery: options.clone(),
        ..endpoint_fields("https://example.com/target")
    };
    let ep = create_endpoint_with(store, app.id, fields).await;
    let plain = create_endpoint(store, app.id).await;
    store
        .rotate_endpoint_secret(app.id, ep.id, "whsec_bmV3LXNlY3JldA==".into(), t(1000))
        .await
        .unwrap();
    let stored = store.get_endpoint(app.id, &EndpointKey::Id(ep.id)).await;
    let stored = stored.unwrap().expect("the endpoint exists");

    let new = NewMessage {
        now: t(10),
        payload: r#"{"b": 1,  "a":[true, null, "é"]}"#.into(),
        ..new_message(app.id, "invoice.paid")
    };
    store.create_message(new.clone()).await.unwrap();
    let claimed = claim(store, 50).await;
    assert_eq!(claimed.len(), 2);
    let to_ep = claimed.iter().find(|c| c.delivery.endpoint_id == ep.id);
    let to_ep = to_ep.expect("a delivery to the endpoint");
    assert_eq!(to_ep.event_type, "invoice.paid");
    assert_eq!(to_ep.payload.as_deref(), Some(new.payload.as_str()));
    let target = &to_ep.endpoint;
    assert_eq!(target.url, "https://example.com/target");
    assert_eq!(target.headers, map(&[("X-Tenant", "42")]));
    assert!(!target.disabled);
    assert_eq!(target.throttle_rate, Some(9));
    assert_eq!(target.options, options);
    assert_eq!(target.updated_at, stored.updated_at);
    let rotated = vec![
        EndpointSecret {
            key: "whsec_bmV3LXNlY3JldA==".into(),
            valid_until: None,
        },
        EndpointSecret {
            key: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            valid_until: Some(t(1000)),
        },
    ];
    assert_eq!(target.secrets, rotated);
    let to_plain = claimed.iter().find(|c| c.delivery.endpoint_id == plain.id);
    let to_plain = to_plain.expect("a delivery to the plain endpoint");
    assert_eq!(to_plain.endpoint.options, DeliveryOptions::default());
    assert_eq!(to_plain.endpoint.secrets.len(), 1);

    // After the grace period, only the new secret.
    message_at(store, app.id, 1000).await;
    let after = claim(store, 1000).await;
    let to_ep = after
        .iter()
        .find(|c| c.delivery.endpoint_id == ep.id)
        .unwrap();
    assert_eq!(to_ep.endpoint.secrets, rotated[..1].to_vec());

    // A pending delivery to a disabled endpoint is claimed with `disabled: true`.
    let disabled = EndpointFields {
        disabled: true,
        ..stored.fields.clone()
    };
    let disabled = store
        .update_endpoint(app.id, ep.id, disabled)
        .await
        .unwrap();
    store.resend(app.id, new.id, ep.id, t(2000)).await.unwrap();
    let claimed = claim(store, 2000).await;
    let resent = claimed
        .iter()
        .find(|c| c.delivery.msg_id == new.id && c.delivery.endpoint_id == ep.id)
        .expect("the resent delivery is claimed");
    assert!(resent.endpoint.disabled);
    assert_eq!(resent.endpoint.updated_at, disabled.updated_at);
}

/// A payload whose `payload_expires_at` has come (`<= now`) or that was expunged is claimed as
/// `None`; the event type is still there.
pub async fn an_expired_or_expunged_payload_is_claimed_as_none(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let at = |expires: i64| NewMessage {
        now: t(10),
        payload_expires_at: t(expires),
        ..new_message(app.id, "user.created")
    };
    let expiring = at(30);
    let lasting = at(31);
    let expunged = at(1000);
    for m in [&expiring, &lasting, &expunged] {
        store.create_message(m.clone()).await.unwrap();
    }
    store
        .expunge_message_content(app.id, expunged.id)
        .await
        .unwrap();

    let claimed = claim(store, 30).await;
    assert_eq!(claimed.len(), 3);
    for c in &claimed {
        assert_eq!(c.event_type, "user.created");
        let expected = (c.delivery.msg_id == lasting.id).then(|| lasting.payload.clone());
        assert_eq!(c.payload, expected, "message {}", c.delivery.msg_id);
    }
}

/// A claim with a `limit` of 0 takes nothing and leases nothing, even with deliveries due.
pub async fn a_claim_with_a_limit_of_zero_takes_nothing(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let m = message_at(store, app.id, 10).await;
    let none = store.claim_deliveries(&claim_at(t(50), 0)).await.unwrap();
    assert!(none.is_empty(), "{none:?}");
    assert_eq!(
        claimed_messages(&claim(store, 50).await),
        vec![m],
        "still due and unleased"
    );
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_claims {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_claim_takes_only_due_pending_unleased_deliveries_earliest_first,
            a_claim_skips_the_endpoints_it_is_told_to_skip,
            a_claim_gives_each_endpoint_at_most_its_room,
            a_claim_carries_the_payload_the_event_type_and_the_endpoint_target,
            an_expired_or_expunged_payload_is_claimed_as_none,
            a_claim_with_a_limit_of_zero_takes_nothing,
        );
    };
}
