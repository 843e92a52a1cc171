//! The delivery queue on PostgreSQL: the main paths of `DeliveryQueue` (until the shared
//! conformance cases cover them) and what only several processes on one database can get wrong:
//! concurrent claims and a stale owner after a takeover.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use vow_core::{AttemptId, DeliveryId, EndpointId, MessageId, RetrySchedule, SignatureStyle};
use vow_store::prelude::*;
use vow_store::queue::{
    AttemptFilter, AttemptOutcome, AttemptTrigger, ClaimRequest, ClaimedDelivery, DeliveryStats,
    EndpointRoom, LeaseToken, NewAttempt, NextState, Recorded, ReplayFilter,
};
use vow_store::{
    AppKey, DeliveryOptions, DeliveryStatus, EndpointKey, MessageKey, Order, Seek, StoreError,
};
use vow_store_postgres::testing::fresh_store;
use vow_store_postgres::PgStore;

use crate::support::{app, endpoint, endpoint_fields, message, now, store};

fn claim_at(now: DateTime<Utc>, limit: usize) -> ClaimRequest {
    ClaimRequest {
        now,
        lease: Duration::seconds(30),
        limit,
        room: EndpointRoom::unlimited(),
    }
}

fn attempt(claimed: &ClaimedDelivery, status: Option<u16>, at: DateTime<Utc>) -> NewAttempt {
    NewAttempt {
        id: AttemptId::new(),
        started_at: at,
        url: claimed.endpoint.url.clone(),
        response_status: status,
        response: format!("body of {status:?}"),
        duration_ms: 12,
        success: status.is_some_and(|s| (200..300).contains(&s)),
        error: status.is_none().then(|| "timed out".to_string()),
        trigger: AttemptTrigger::Scheduled,
    }
}

fn outcome(claimed: &ClaimedDelivery, status: Option<u16>, next: NextState) -> AttemptOutcome {
    let at = claimed.lease_until - Duration::seconds(20);
    AttemptOutcome {
        delivery_id: claimed.delivery.id,
        lease: claimed.lease.clone(),
        attempt: (!matches!(next, NextState::Hold)).then(|| attempt(claimed, status, at)),
        next,
        now: at,
    }
}

fn dead_letter(disable_endpoint: bool) -> NextState {
    NextState::DeadLetter {
        reason: "exhausted".into(),
        disable_endpoint,
    }
}

/// An application with one endpoint and `n` messages to it; returns the store's view.
async fn with_deliveries(store: &PgStore, n: usize) -> (vow_store::Application, EndpointId) {
    let a = app(store, None).await;
    let ep = endpoint(store, a.id, endpoint_fields("https://one.example/hook")).await;
    for _ in 0..n {
        store
            .create_message(message(a.id, "invoice.paid", None))
            .await
            .unwrap();
    }
    (a, ep.id)
}

/// A delivery of `app`, read back through the `Store` trait.
async fn delivery(store: &PgStore, app: vow_core::AppId, id: DeliveryId) -> vow_store::Delivery {
    let mut found = None;
    let msgs = store
        .list_messages(
            app,
            &Default::default(),
            &Seek::for_iterator(None, Order::Ascending, 1000),
        )
        .await
        .unwrap();
    for m in msgs {
        for d in store.list_deliveries(app, m.id).await.unwrap() {
            if d.id == id {
                found = Some(d);
            }
        }
    }
    found.expect("the delivery exists")
}

#[tokio::test]
async fn a_claim_carries_the_message_the_endpoint_and_a_lease_and_excludes_others() {
    let store = store().await;
    let a = app(&store, None).await;
    let mut fields = endpoint_fields("https://one.example/hook");
    fields.headers.insert("X-Team".into(), "billing".into());
    fields.throttle_rate = Some(9);
    fields.delivery = DeliveryOptions {
        signature_style: SignatureStyle::SeedSha256,
        timeout_ms: Some(1_500),
        retry_schedule: Some(RetrySchedule::parse("1s,5m").unwrap()),
    };
    let ep = endpoint(&store, a.id, fields.clone()).await;
    let m = message(a.id, "invoice.paid", None);
    store.create_message(m.clone()).await.unwrap();
    let t = now();

    let claimed = store.claim_deliveries(&claim_at(t, 10)).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let c = &claimed[0];
    assert_eq!(c.delivery.msg_id, m.id);
    assert_eq!(c.delivery.endpoint_id, ep.id);
    assert_eq!(c.delivery.status, DeliveryStatus::Pending);
    assert_eq!(c.event_type, "invoice.paid");
    assert_eq!(c.payload.as_deref(), Some(m.payload.as_str()));
    assert_eq!(c.lease_until, t + Duration::seconds(30));
    assert_eq!(c.endpoint.url, fields.url);
    assert_eq!(c.endpoint.headers, fields.headers);
    assert_eq!(c.endpoint.throttle_rate, Some(9));
    assert_eq!(c.endpoint.options, fields.delivery);
    assert_eq!(c.endpoint.updated_at, ep.updated_at);
    assert!(!c.endpoint.disabled);
    let secrets = store.endpoint_secrets(a.id, ep.id, t).await.unwrap();
    assert_eq!(c.endpoint.secrets, secrets);

    // Leased: nobody else gets it until the lease ends; then a new token.
    assert!(store
        .claim_deliveries(&claim_at(t, 10))
        .await
        .unwrap()
        .is_empty());
    let later = store
        .claim_deliveries(&claim_at(t + Duration::seconds(30), 10))
        .await
        .unwrap();
    assert_eq!(later.len(), 1);
    assert_ne!(later[0].lease, c.lease);
}

#[tokio::test]
async fn claims_respect_due_times_limits_skipped_endpoints_and_expired_payloads() {
    let store = store().await;
    let a = app(&store, None).await;
    let one = endpoint(&store, a.id, endpoint_fields("https://one.example")).await;
    let two = endpoint(&store, a.id, endpoint_fields("https://two.example")).await;
    let t = now();
    let mut expired = message(a.id, "t", None);
    expired.now = t;
    expired.payload_expires_at = t - Duration::seconds(1);
    store.create_message(expired.clone()).await.unwrap();
    let mut future = message(a.id, "t", None);
    future.now = t + Duration::hours(1);
    store.create_message(future).await.unwrap();

    let mut req = claim_at(t, 10);
    req.room = EndpointRoom::skipping([two.id]);
    let claimed = store.claim_deliveries(&req).await.unwrap();
    assert_eq!(claimed.len(), 1, "only the due delivery to `one`");
    assert_eq!(claimed[0].delivery.endpoint_id, one.id);
    assert_eq!(claimed[0].payload, None);
    assert_eq!(claimed[0].event_type, "t");

    let claimed = store.claim_deliveries(&claim_at(t, 0)).await.unwrap();
    assert!(claimed.is_empty());
    let claimed = store.claim_deliveries(&claim_at(t, 1)).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].delivery.endpoint_id, two.id);
}

#[tokio::test]
async fn recording_moves_the_delivery_and_stores_the_attempt_only_under_the_lease() {
    let store = store().await;
    let (a, _) = with_deliveries(&store, 3).await;
    let t = now();
    let claimed = store.claim_deliveries(&claim_at(t, 10)).await.unwrap();
    assert_eq!(claimed.len(), 3);
    let retry_at = t + Duration::minutes(2);
    let mut stale = outcome(&claimed[2], Some(200), NextState::Delivered);
    stale.lease = LeaseToken("not-ours".into());
    let results = store
        .record_attempts(
            vec![
                outcome(&claimed[0], Some(200), NextState::Delivered),
                outcome(
                    &claimed[1],
                    Some(404),
                    NextState::RetryAt {
                        at: retry_at,
                        client_errors: 1,
                    },
                ),
                stale,
                // The same lease twice: the second finds it gone.
                outcome(&claimed[0], Some(200), NextState::Delivered),
            ],
            3,
        )
        .await
        .unwrap();
    let stored = Recorded::Stored {
        endpoint_disabled: false,
    };
    assert_eq!(
        results,
        [
            stored.clone(),
            stored,
            Recorded::LeaseLost,
            Recorded::LeaseLost
        ]
    );

    let d0 = delivery(&store, a.id, claimed[0].delivery.id).await;
    assert_eq!(
        (d0.status, d0.attempts, d0.last_status),
        (DeliveryStatus::Delivered, 1, Some(200))
    );
    let d1 = delivery(&store, a.id, claimed[1].delivery.id).await;
    assert_eq!(d1.status, DeliveryStatus::Pending);
    assert_eq!(
        (d1.attempts, d1.client_errors, d1.last_status),
        (1, 1, Some(404))
    );
    assert_eq!(d1.next_attempt_at, retry_at);
    let d2 = delivery(&store, a.id, claimed[2].delivery.id).await;
    assert_eq!(d2.attempts, 0);

    let attempts = store
        .list_attempts(
            a.id,
            &AttemptFilter::default(),
            &Seek::for_iterator(None, Order::Descending, 10),
        )
        .await
        .unwrap();
    assert_eq!(attempts.len(), 2);
    // The recorded lease is cleared: due again at the retry time, not after the lease (the
    // delivery of the stale record is still leased, until t + 30 s).
    let early = store
        .claim_deliveries(&claim_at(t + Duration::seconds(29), 10))
        .await
        .unwrap();
    assert!(early.is_empty(), "{early:?}");
    let again = store
        .claim_deliveries(&claim_at(retry_at, 10))
        .await
        .unwrap();
    assert_eq!(again.len(), 2);
    let again: Vec<_> = again
        .into_iter()
        .filter(|c| c.delivery.id == claimed[1].delivery.id)
        .collect();
    assert_eq!(again[0].delivery.client_errors, 1);
    // The old token no longer renews or records.
    assert_eq!(
        store
            .renew_leases(
                &[(claimed[1].delivery.id, claimed[1].lease.clone())],
                t + Duration::hours(1)
            )
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .renew_leases(
                &[(again[0].delivery.id, again[0].lease.clone())],
                t + Duration::hours(1)
            )
            .await
            .unwrap(),
        1
    );
}

#[tokio::test]
async fn dead_letters_disable_the_endpoint_at_the_threshold_and_hold_its_backlog() {
    let store = store().await;
    let (a, ep) = with_deliveries(&store, 6).await;
    let t = now();
    let claimed = store.claim_deliveries(&claim_at(t, 4)).await.unwrap();
    assert_eq!(claimed.len(), 4);

    // dead, delivered (reset), dead, dead: 2 consecutive, under a threshold of 3.
    let results = store
        .record_attempts(
            vec![
                outcome(&claimed[0], Some(500), dead_letter(false)),
                outcome(&claimed[1], Some(200), NextState::Delivered),
                outcome(&claimed[2], Some(500), dead_letter(false)),
                outcome(&claimed[3], Some(500), dead_letter(false)),
            ],
            3,
        )
        .await
        .unwrap();
    assert!(
        results.iter().all(|r| *r
            == Recorded::Stored {
                endpoint_disabled: false
            }),
        "{results:?}"
    );
    let ep_now = store
        .get_endpoint(a.id, &EndpointKey::Id(ep))
        .await
        .unwrap()
        .unwrap();
    assert!(!ep_now.fields.disabled);
    let dl = delivery(&store, a.id, claimed[0].delivery.id).await;
    assert_eq!(dl.status, DeliveryStatus::DeadLettered);
    assert_eq!(dl.dead_letter_reason.as_deref(), Some("exhausted"));
    assert_eq!(dl.last_status, Some(500));

    // The third in a row disables it and holds the two still pending.
    let next = store.claim_deliveries(&claim_at(t, 1)).await.unwrap();
    let results = store
        .record_attempts(vec![outcome(&next[0], None, dead_letter(false))], 3)
        .await
        .unwrap();
    assert_eq!(
        results,
        [Recorded::Stored {
            endpoint_disabled: true
        }]
    );
    let ep_now = store
        .get_endpoint(a.id, &EndpointKey::Id(ep))
        .await
        .unwrap()
        .unwrap();
    assert!(ep_now.fields.disabled);
    assert!(ep_now.updated_at >= ep_now.created_at);
    let stats = store.endpoint_stats(a.id, ep, None, None, t).await.unwrap();
    assert_eq!(
        stats,
        DeliveryStats {
            success: 1,
            pending: 1,
            sending: 0,
            fail: 4
        }
    );
    assert!(store
        .claim_deliveries(&claim_at(t + Duration::days(1), 10))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(store.next_due().await.unwrap(), None);
}

#[tokio::test]
async fn a_gone_endpoint_is_disabled_at_once_and_reported_once() {
    let store = store().await;
    let (a, ep) = with_deliveries(&store, 2).await;
    let claimed = store.claim_deliveries(&claim_at(now(), 2)).await.unwrap();
    let results = store
        .record_attempts(
            vec![
                outcome(&claimed[0], Some(410), dead_letter(true)),
                outcome(&claimed[1], Some(410), dead_letter(true)),
            ],
            0,
        )
        .await
        .unwrap();
    assert_eq!(
        results,
        [
            Recorded::Stored {
                endpoint_disabled: true
            },
            Recorded::Stored {
                endpoint_disabled: false
            }
        ]
    );
    let e = store
        .get_endpoint(a.id, &EndpointKey::Id(ep))
        .await
        .unwrap()
        .unwrap();
    assert!(e.fields.disabled);
}

#[tokio::test]
async fn a_hold_returns_the_delivery_to_held_without_an_attempt() {
    let store = store().await;
    let (a, _) = with_deliveries(&store, 1).await;
    let claimed = store.claim_deliveries(&claim_at(now(), 1)).await.unwrap();
    let r = store
        .record_attempts(vec![outcome(&claimed[0], None, NextState::Hold)], 3)
        .await
        .unwrap();
    assert_eq!(
        r,
        [Recorded::Stored {
            endpoint_disabled: false
        }]
    );
    let d = delivery(&store, a.id, claimed[0].delivery.id).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Held, 0));
}

#[tokio::test]
async fn next_due_is_the_earliest_due_time_or_lease_end() {
    let store = store().await;
    assert_eq!(store.next_due().await.unwrap(), None);
    let a = app(&store, None).await;
    endpoint(&store, a.id, endpoint_fields("https://one.example")).await;
    let t = now();
    let mut first = message(a.id, "t", None);
    first.now = t;
    store.create_message(first).await.unwrap();
    let mut second = message(a.id, "t", None);
    second.now = t + Duration::minutes(5);
    store.create_message(second).await.unwrap();
    assert_eq!(store.next_due().await.unwrap(), Some(t));
    // Leased until t + 30 s: the lease's end comes before the other one.
    store.claim_deliveries(&claim_at(t, 1)).await.unwrap();
    assert_eq!(
        store.next_due().await.unwrap(),
        Some(t + Duration::seconds(30))
    );
    let mut long = claim_at(t + Duration::seconds(30), 1);
    long.lease = Duration::hours(1);
    assert_eq!(store.claim_deliveries(&long).await.unwrap().len(), 1);
    assert_eq!(
        store.next_due().await.unwrap(),
        Some(t + Duration::minutes(5))
    );
}

#[tokio::test]
async fn attempts_are_listed_filtered_paged_and_read_within_their_application() {
    let store = store().await;
    let a = app(&store, None).await;
    let one = endpoint(&store, a.id, endpoint_fields("https://one.example")).await;
    let two = endpoint(&store, a.id, endpoint_fields("https://two.example")).await;
    let m = message(a.id, "t", None);
    store.create_message(m.clone()).await.unwrap();
    let t = now();
    let claimed = store.claim_deliveries(&claim_at(t, 10)).await.unwrap();
    let outcomes: Vec<_> = claimed
        .iter()
        .map(|c| {
            let ok = c.delivery.endpoint_id == one.id;
            outcome(
                c,
                Some(if ok { 200 } else { 503 }),
                if ok {
                    NextState::Delivered
                } else {
                    NextState::RetryAt {
                        at: t,
                        client_errors: 0,
                    }
                },
            )
        })
        .collect();
    store.record_attempts(outcomes.clone(), 3).await.unwrap();

    let all = |filter: AttemptFilter| {
        let store = store.clone();
        async move {
            store
                .list_attempts(
                    a.id,
                    &filter,
                    &Seek::for_iterator(None, Order::Descending, 10),
                )
                .await
                .unwrap()
        }
    };
    assert_eq!(all(AttemptFilter::default()).await.len(), 2);
    let ok = all(AttemptFilter {
        success: Some(true),
        ..Default::default()
    })
    .await;
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0].endpoint_id, one.id);
    assert_eq!(ok[0].msg_id, m.id);
    let failed = all(AttemptFilter {
        status_code: Some(503),
        ..Default::default()
    })
    .await;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].endpoint_id, two.id);
    assert_eq!(
        all(AttemptFilter {
            endpoint_id: Some(two.id),
            ..Default::default()
        })
        .await
        .len(),
        1
    );
    assert_eq!(
        all(AttemptFilter {
            msg_id: Some(MessageId::new()),
            ..Default::default()
        })
        .await
        .len(),
        0
    );
    let started = outcomes[0].attempt.as_ref().unwrap().started_at;
    assert_eq!(
        all(AttemptFilter {
            before: Some(started),
            ..Default::default()
        })
        .await
        .len(),
        0
    );
    assert_eq!(
        all(AttemptFilter {
            after: Some(started - Duration::seconds(1)),
            ..Default::default()
        })
        .await
        .len(),
        2
    );

    // Paging by id, newest first.
    let page = store
        .list_attempts(
            a.id,
            &AttemptFilter::default(),
            &Seek::for_iterator(None, Order::Descending, 1),
        )
        .await
        .unwrap();
    assert_eq!(page.len(), 2, "limit + 1");
    assert!(page[0].id > page[1].id);
    let rest = store
        .list_attempts(
            a.id,
            &AttemptFilter::default(),
            &Seek::for_iterator(Some(&page[0].id.to_string()), Order::Descending, 1),
        )
        .await
        .unwrap();
    assert_eq!(rest.iter().map(|x| x.id).collect::<Vec<_>>(), [page[1].id]);

    let got = store
        .get_attempt(a.id, m.id, ok[0].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, ok[0]);
    let expected = outcomes
        .iter()
        .find_map(|o| o.attempt.clone().filter(|x| x.id == ok[0].id))
        .unwrap();
    assert_eq!(got.attempt, expected);
    let other = app(&store, None).await;
    assert_eq!(
        store.get_attempt(other.id, m.id, ok[0].id).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .get_attempt(a.id, MessageId::new(), ok[0].id)
            .await
            .unwrap(),
        None
    );
    assert!(store
        .list_attempts(
            other.id,
            &AttemptFilter::default(),
            &Seek::for_iterator(None, Order::Descending, 10)
        )
        .await
        .unwrap()
        .is_empty());

    // Expunging.
    store
        .expunge_attempt_content(a.id, m.id, ok[0].id)
        .await
        .unwrap();
    let got = store
        .get_attempt(a.id, m.id, ok[0].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.attempt.response, "");
    assert!(matches!(
        store
            .expunge_attempt_content(other.id, m.id, ok[0].id)
            .await,
        Err(StoreError::NotFound(_))
    ));
    store.expunge_message_content(a.id, m.id).await.unwrap();
    let stored = store
        .get_message(a.id, &MessageKey::Id(m.id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.payload, None);
    assert!(all(AttemptFilter::default())
        .await
        .iter()
        .all(|x| x.attempt.response.is_empty()));
    assert!(matches!(
        store.expunge_message_content(other.id, m.id).await,
        Err(StoreError::NotFound(_))
    ));
}

#[tokio::test]
async fn resend_restarts_a_delivery_or_creates_one() {
    let store = store().await;
    let (a, ep) = with_deliveries(&store, 1).await;
    let t = now();
    let claimed = store.claim_deliveries(&claim_at(t, 1)).await.unwrap();
    store
        .record_attempts(
            vec![outcome(
                &claimed[0],
                Some(400),
                NextState::RetryAt {
                    at: t + Duration::hours(1),
                    client_errors: 1,
                },
            )],
            3,
        )
        .await
        .unwrap();
    let later = t + Duration::minutes(1);
    let d = store
        .resend(a.id, claimed[0].delivery.msg_id, ep, later)
        .await
        .unwrap();
    assert_eq!(d.id, claimed[0].delivery.id);
    assert_eq!(
        (d.status, d.attempts, d.client_errors),
        (DeliveryStatus::Pending, 0, 0)
    );
    assert_eq!(d.next_attempt_at, later);

    // A new endpoint never got the message: resend creates the delivery.
    let fresh = endpoint(&store, a.id, endpoint_fields("https://new.example")).await;
    let d = store
        .resend(a.id, claimed[0].delivery.msg_id, fresh.id, later)
        .await
        .unwrap();
    assert_eq!(
        (d.endpoint_id, d.status, d.created_at),
        (fresh.id, DeliveryStatus::Pending, later)
    );
    assert_eq!(
        store.list_deliveries(a.id, d.msg_id).await.unwrap().len(),
        2
    );

    let other = app(&store, None).await;
    for err in [
        store
            .resend(other.id, d.msg_id, ep, later)
            .await
            .unwrap_err(),
        store
            .resend(a.id, MessageId::new(), ep, later)
            .await
            .unwrap_err(),
        store
            .resend(a.id, d.msg_id, EndpointId::new(), later)
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    }
    assert!(matches!(
        store.resend(a.id, d.msg_id, EndpointId::new(), later).await,
        Err(StoreError::NotFound("endpoint"))
    ));
}

#[tokio::test]
async fn replay_spaces_out_failed_and_held_deliveries_in_creation_order() {
    let store = store().await;
    let (a, ep) = with_deliveries(&store, 4).await;
    let t = now();
    let claimed = store.claim_deliveries(&claim_at(t, 4)).await.unwrap();
    let mut sorted = claimed.clone();
    sorted.sort_by_key(|c| (c.delivery.created_at, c.delivery.id));
    store
        .record_attempts(
            vec![
                outcome(&sorted[0], Some(500), dead_letter(false)),
                outcome(&sorted[1], Some(404), dead_letter(false)),
                outcome(&sorted[2], None, NextState::Hold),
                outcome(&sorted[3], Some(200), NextState::Delivered),
            ],
            0,
        )
        .await
        .unwrap();
    let all = ReplayFilter::default();
    let spacing = Duration::seconds(2);
    assert_eq!(
        store
            .replay(a.id, ep, &all, t, spacing, true)
            .await
            .unwrap(),
        3
    );
    let only_404 = ReplayFilter {
        last_status: Some(404),
        ..Default::default()
    };
    assert_eq!(
        store
            .replay(a.id, ep, &only_404, t, spacing, true)
            .await
            .unwrap(),
        1
    );
    let wrong_type = ReplayFilter {
        event_types: vec!["nope".into()],
        ..Default::default()
    };
    assert_eq!(
        store
            .replay(a.id, ep, &wrong_type, t, spacing, true)
            .await
            .unwrap(),
        0
    );
    let right_type = ReplayFilter {
        event_types: vec!["invoice.paid".into()],
        ..Default::default()
    };
    assert_eq!(
        store
            .replay(a.id, ep, &right_type, t, spacing, true)
            .await
            .unwrap(),
        3
    );
    let other = app(&store, None).await;
    for dry_run in [true, false] {
        assert!(matches!(
            store.replay(other.id, ep, &all, t, spacing, dry_run).await,
            Err(StoreError::NotFound("endpoint"))
        ));
    }
    // Dry runs changed nothing.
    assert_eq!(
        delivery(&store, a.id, sorted[0].delivery.id).await.status,
        DeliveryStatus::DeadLettered
    );

    assert_eq!(
        store
            .replay(a.id, ep, &all, t, spacing, false)
            .await
            .unwrap(),
        3
    );
    for (i, c) in sorted[..3].iter().enumerate() {
        let d = delivery(&store, a.id, c.delivery.id).await;
        assert_eq!(
            (d.status, d.attempts, d.client_errors),
            (DeliveryStatus::Pending, 0, 0),
            "{i}"
        );
        assert_eq!(d.next_attempt_at, t + spacing * i as i32, "{i}");
        assert_eq!(d.dead_letter_reason, None);
    }
    assert_eq!(
        delivery(&store, a.id, sorted[3].delivery.id).await.status,
        DeliveryStatus::Delivered
    );
    assert_eq!(
        store
            .replay(a.id, ep, &all, t, spacing, false)
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn stats_count_by_state_within_the_window() {
    let store = store().await;
    let (a, ep) = with_deliveries(&store, 3).await;
    let t = now();
    let claimed = store.claim_deliveries(&claim_at(t, 2)).await.unwrap();
    store
        .record_attempts(
            vec![outcome(&claimed[0], Some(200), NextState::Delivered)],
            3,
        )
        .await
        .unwrap();
    let stats = store.endpoint_stats(a.id, ep, None, None, t).await.unwrap();
    assert_eq!(
        stats,
        DeliveryStats {
            success: 1,
            pending: 1,
            sending: 1,
            fail: 0
        }
    );
    // After the lease ends, the claimed one counts as pending again.
    let stats = store
        .endpoint_stats(a.id, ep, None, None, t + Duration::minutes(1))
        .await
        .unwrap();
    assert_eq!(
        stats,
        DeliveryStats {
            success: 1,
            pending: 2,
            sending: 0,
            fail: 0
        }
    );
    let stats = store
        .endpoint_stats(a.id, ep, Some(t + Duration::hours(1)), None, t)
        .await
        .unwrap();
    assert_eq!(stats, DeliveryStats::default());
    assert!(matches!(
        store
            .endpoint_stats(a.id, EndpointId::new(), None, None, t)
            .await,
        Err(StoreError::NotFound("endpoint"))
    ));
    let stats = store
        .endpoint_stats(
            a.id,
            ep,
            Some(t - Duration::hours(1)),
            Some(t + Duration::hours(1)),
            t,
        )
        .await
        .unwrap();
    assert_eq!(stats.success + stats.pending + stats.sending, 3);
}

#[tokio::test]
async fn purging_clears_expired_payloads_and_old_responses_in_batches() {
    let store = store().await;
    let a = app(&store, None).await;
    endpoint(&store, a.id, endpoint_fields("https://one.example")).await;
    let t = now();
    let mut ids = Vec::new();
    for i in 0..3 {
        let mut m = message(a.id, "t", None);
        m.now = t;
        m.payload_expires_at = t + Duration::days(i);
        ids.push(m.id);
        store.create_message(m).await.unwrap();
    }
    let claimed = store.claim_deliveries(&claim_at(t, 10)).await.unwrap();
    let outcomes: Vec<_> = claimed
        .iter()
        .map(|c| outcome(c, Some(200), NextState::Delivered))
        .collect();
    store.record_attempts(outcomes, 3).await.unwrap();

    // Payloads expired at t + 1 day: two; responses started before t: none.
    assert_eq!(
        store
            .purge_expired(t + Duration::days(1), t - Duration::days(1), 1)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .purge_expired(t + Duration::days(1), t - Duration::days(1), 10)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .purge_expired(t + Duration::days(1), t - Duration::days(1), 10)
            .await
            .unwrap(),
        0
    );
    let payloads: Vec<_> = {
        let mut v = Vec::new();
        for id in &ids {
            v.push(
                store
                    .get_message(a.id, &MessageKey::Id(*id))
                    .await
                    .unwrap()
                    .unwrap()
                    .payload
                    .is_some(),
            );
        }
        v
    };
    assert_eq!(payloads, [false, false, true]);
    // Now every response is old: 3 response bodies.
    assert_eq!(
        store
            .purge_expired(t, t + Duration::days(1), 10)
            .await
            .unwrap(),
        3
    );
    let attempts = store
        .list_attempts(
            a.id,
            &AttemptFilter::default(),
            &Seek::for_iterator(None, Order::Descending, 10),
        )
        .await
        .unwrap();
    assert!(attempts.iter().all(|x| x.attempt.response.is_empty()));
    assert_eq!(
        store
            .purge_expired(t, t + Duration::days(1), 0)
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn deleting_the_application_takes_the_attempts_with_it() {
    let (store, url) = fresh_store().await;
    let (a, _) = with_deliveries(&store, 1).await;
    let claimed = store.claim_deliveries(&claim_at(now(), 1)).await.unwrap();
    store
        .record_attempts(
            vec![outcome(&claimed[0], Some(200), NextState::Delivered)],
            3,
        )
        .await
        .unwrap();
    store.delete_application(a.id).await.unwrap();
    assert!(store
        .get_application(&AppKey::Id(a.id))
        .await
        .unwrap()
        .is_none());
    let mut conn = crate::support::raw(&url).await;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM attempts")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

/// A create of `new` with `Idempotency-Key` `key` claimed in its own transaction, its response
/// rendered before the write (as vow's message route does: the claim is folded into the read of
/// the endpoints).
async fn keyed_create(
    store: &PgStore,
    new: vow_store::NewMessage,
    key: &str,
) -> Result<vow_store::CreatedMessage, StoreError> {
    use vow_store::idempotency::{
        Completion, Fingerprint, FreshClaim, Render, Scope, Settings, StoredResponse, Write,
        Written,
    };
    let body = format!(r#"{{"eventType":"{}"}}"#, new.event_type);
    let (fingerprint, canonical_body) =
        Fingerprint::with_canonical_body("POST", "/api/v1/app/{app_id}/msg", body.as_bytes());
    let completion = Completion {
        scope: Scope {
            principal: "admin".into(),
            application: Some(new.app_id.to_string()),
            method: "POST".into(),
            route: "/api/v1/app/{app_id}/msg".into(),
            key: vow_idempotency::IdempotencyKey::parse(key).unwrap(),
        },
        token: vow_store::idempotency::LeaseToken::generate(),
        fresh: Some(FreshClaim {
            fingerprint,
            canonical_body,
            on_takeover: None,
        }),
        now: now(),
        settings: Settings::default(),
        render: Render::Ready(StoredResponse {
            status: 202,
            headers: Vec::new(),
            body: Vec::new(),
            resource: Some(new.id.to_string()),
        }),
    };
    let write = Write::CreateMessage {
        new,
        only: None,
        app: None,
    };
    match store.apply(write, Some(completion)).await? {
        (Written::Message(created), Some(_)) => Ok(created),
        other => panic!("expected a message and its response, got {other:?}"),
    }
}

/// Message creates lock the application before its endpoints, as the application's delete does
/// (then cascades to them): racing it they wait, never deadlock, with or without a key (a keyed
/// create also claims its key in that first statement; here pairs race for each key). Each
/// create either lands before the delete (and goes with it), finds no application, or, keyed,
/// lost its key to the other of its pair.
#[tokio::test]
async fn message_creates_racing_the_applications_delete_never_deadlock() {
    let (store, url) = fresh_store().await;
    for _ in 0..15 {
        let a = app(&store, None).await;
        for n in 0..3 {
            endpoint(
                &store,
                a.id,
                endpoint_fields(&format!("https://{n}.example/hook")),
            )
            .await;
        }
        let mut creates = Vec::new();
        for n in 0..8 {
            let store = store.clone();
            creates.push(tokio::spawn(async move {
                let new = message(a.id, "invoice.paid", None);
                let created = match n % 2 {
                    0 => store.create_message(new).await,
                    _ => keyed_create(&store, new, &format!("race-{}", n % 4)).await,
                };
                (n, created)
            }));
        }
        let deleting = store.clone();
        let delete = tokio::spawn(async move { deleting.delete_application(a.id).await });
        let mut keyed_landed = [0; 4];
        for create in creates {
            match create.await.unwrap() {
                (n, Ok(created)) => {
                    assert_eq!(created.deliveries, 3);
                    keyed_landed[n % 4] += n % 2;
                }
                (_, Err(StoreError::NotFound(what))) => assert_eq!(what, "application"),
                (n, Err(StoreError::Fenced)) if n % 2 == 1 => {}
                (n, Err(other)) => panic!("create {n} racing the delete failed: {other:?}"),
            }
        }
        assert!(keyed_landed.iter().all(|&n| n <= 1), "{keyed_landed:?}");
        delete.await.unwrap().unwrap();
        let mut conn = crate::support::raw(&url).await;
        let left: i64 = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM messages WHERE app_id = $1) \
             + (SELECT count(*) FROM deliveries WHERE app_id = $1)",
        )
        .bind(a.id.to_string())
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(
            left, 0,
            "the delete took every message and delivery with it"
        );
    }
}

/// Claims until a claim comes back empty, recording every claimed delivery as delivered.
async fn drain(store: PgStore, t: DateTime<Utc>) -> Vec<DeliveryId> {
    let mut got = Vec::new();
    loop {
        let claimed = store.claim_deliveries(&claim_at(t, 7)).await.unwrap();
        if claimed.is_empty() {
            return got;
        }
        let outcomes = claimed
            .iter()
            .map(|c| outcome(c, Some(200), NextState::Delivered))
            .collect();
        let results = store.record_attempts(outcomes, 3).await.unwrap();
        assert!(results.iter().all(|r| matches!(r, Recorded::Stored { .. })));
        got.extend(claimed.iter().map(|c| c.delivery.id));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_claiming_at_once_never_share_a_delivery_and_get_them_all() {
    let (first, url) = fresh_store().await;
    let second = PgStore::connect(&url, 4).await.unwrap();
    let a = app(&first, None).await;
    for i in 0..5 {
        endpoint(
            &first,
            a.id,
            endpoint_fields(&format!("https://{i}.example")),
        )
        .await;
    }
    for _ in 0..100 {
        first
            .create_message(message(a.id, "t", None))
            .await
            .unwrap();
    }
    let t = now();
    let (one, two) = tokio::join!(
        tokio::spawn(drain(first.clone(), t)),
        tokio::spawn(drain(second.clone(), t))
    );
    let (one, two) = (one.unwrap(), two.unwrap());
    assert!(
        !one.is_empty() && !two.is_empty(),
        "{} / {}",
        one.len(),
        two.len()
    );
    let mut seen = HashSet::new();
    for id in one.iter().chain(&two) {
        assert!(seen.insert(*id), "{id} was claimed twice");
    }
    assert_eq!(seen.len(), 500);
    let attempts = first
        .list_attempts(
            a.id,
            &AttemptFilter::default(),
            &Seek::for_iterator(None, Order::Ascending, 1000),
        )
        .await
        .unwrap();
    assert_eq!(attempts.len(), 500);
}

#[tokio::test]
async fn a_stale_owner_cannot_record_after_a_takeover() {
    let (first, url) = fresh_store().await;
    let second = PgStore::connect(&url, 4).await.unwrap();
    let (a, _) = with_deliveries(&first, 1).await;
    let t = now();
    let mut short = claim_at(t, 1);
    short.lease = Duration::seconds(1);
    let old = first.claim_deliveries(&short).await.unwrap();
    assert_eq!(old.len(), 1);
    // The first worker stalls; its lease runs out and another process takes over.
    let new = second
        .claim_deliveries(&claim_at(t + Duration::seconds(2), 1))
        .await
        .unwrap();
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].delivery.id, old[0].delivery.id);

    let stale = first
        .record_attempts(vec![outcome(&old[0], Some(200), NextState::Delivered)], 3)
        .await
        .unwrap();
    assert_eq!(stale, [Recorded::LeaseLost]);
    assert_eq!(
        first
            .renew_leases(
                &[(old[0].delivery.id, old[0].lease.clone())],
                t + Duration::hours(1)
            )
            .await
            .unwrap(),
        0
    );
    let d = delivery(&first, a.id, old[0].delivery.id).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Pending, 0));

    let fresh = second
        .record_attempts(vec![outcome(&new[0], Some(503), dead_letter(false))], 0)
        .await
        .unwrap();
    assert_eq!(
        fresh,
        [Recorded::Stored {
            endpoint_disabled: false
        }]
    );
    let attempts = first
        .list_attempts(
            a.id,
            &AttemptFilter::default(),
            &Seek::for_iterator(None, Order::Descending, 10),
        )
        .await
        .unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].attempt.response_status, Some(503));
}
