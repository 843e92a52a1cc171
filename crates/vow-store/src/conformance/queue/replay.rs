//! Cases about replaying an endpoint's failed deliveries: spacing, filters, dry runs, and the
//! stats of what one replay requeued.

use crate::Store;
use chrono::Duration;

use super::*;
use crate::queue::{DeliveryStats, ReplayFilter, StatsFilter};
use crate::DeliveryStatus;
use vow_core::ReplayId;

/// Replay makes an endpoint's dead-lettered and held deliveries pending with a fresh run, due
/// from `now` on, `spacing` apart in creation order; other states and other endpoints are left
/// alone, and a second replay finds nothing.
pub async fn replay_makes_failed_deliveries_pending_again_spaced_in_creation_order(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let other = create_endpoint(store, app.id).await.id;
    let mut ms = Vec::new();
    // Written out of creation order.
    for secs in [30, 10, 20, 40, 50] {
        ms.push((secs, message_at(store, app.id, secs).await));
    }
    ms.sort();
    let ms: Vec<MessageId> = ms.into_iter().map(|(_, m)| m).collect();
    let claimed = claim_skipping(store, 100, &[other]).await;
    assert_eq!(claimed_messages(&claimed), ms);
    record_all(
        store,
        vec![
            outcome(&claimed[0], Some(500), dead_letter("exhausted"), 101),
            outcome(&claimed[1], Some(404), dead_letter("4xx"), 101),
            outcome(&claimed[2], None, dead_letter("payload expired"), 101),
            outcome(&claimed[3], None, NextState::Hold, 101),
            outcome(&claimed[4], Some(200), NextState::Delivered, 101),
        ],
    )
    .await;
    let theirs = claim_skipping(store, 100, &[ep]).await;
    record_all(
        store,
        vec![outcome(
            &theirs[0],
            Some(500),
            dead_letter("exhausted"),
            101,
        )],
    )
    .await;
    let pending = message_at(store, app.id, 60).await;
    let before: Vec<Delivery> = {
        let mut v = Vec::new();
        for m in ms.iter().chain([&pending]) {
            v.push(delivery(store, app.id, *m, ep).await);
            v.push(delivery(store, app.id, *m, other).await);
        }
        v
    };

    let spacing = Duration::seconds(10);
    let n = store
        .replay(
            app.id,
            ep,
            ReplayId::new(),
            &ReplayFilter::default(),
            t(1000),
            spacing,
            false,
        )
        .await
        .unwrap();
    assert_eq!(n, 4);
    for (i, m) in ms[..4].iter().enumerate() {
        let d = delivery(store, app.id, *m, ep).await;
        let was = before.iter().find(|b| b.id == d.id).unwrap();
        let expected = Delivery {
            status: DeliveryStatus::Pending,
            attempts: 0,
            client_errors: 0,
            dead_letter_reason: None,
            next_attempt_at: t(1000 + 10 * i as i64),
            manual: true,
            ..was.clone()
        };
        assert_eq!(d, expected, "replayed #{i}, last status kept");
    }
    for was in &before {
        let replayed = was.endpoint_id == ep && ms[..4].contains(&was.msg_id);
        if !replayed {
            let now = delivery(store, app.id, was.msg_id, was.endpoint_id).await;
            assert_eq!(&now, was, "not replayed");
        }
    }
    let again = store
        .replay(
            app.id,
            ep,
            ReplayId::new(),
            &ReplayFilter::default(),
            t(2000),
            spacing,
            false,
        )
        .await
        .unwrap();
    assert_eq!(again, 0, "nothing left to replay");
    let due = claim_skipping(store, 1015, &[other]).await;
    assert_eq!(claimed_messages(&due), vec![pending, ms[0], ms[1]]);

    let missing = EndpointId::new();
    let r = store
        .replay(
            app.id,
            missing,
            ReplayId::new(),
            &ReplayFilter::default(),
            t(1),
            spacing,
            true,
        )
        .await;
    assert_not_found(r, "endpoint");
    let stranger = create_app(store, "Stranger").await;
    let r = store
        .replay(
            stranger.id,
            ep,
            ReplayId::new(),
            &ReplayFilter::default(),
            t(1),
            spacing,
            false,
        )
        .await;
    assert_not_found(r, "endpoint");
}

/// Replay filters: creation time in `[since, until)`, event types, last status; each filter
/// combines with the others. A dry run only counts.
pub async fn replay_filters_by_time_event_type_and_last_status_and_a_dry_run_changes_nothing(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let a = message_of_type(store, app.id, 10, "invoice.paid").await;
    let b = message_of_type(store, app.id, 20, "user.created").await;
    let c = message_of_type(store, app.id, 30, "invoice.paid").await;
    let d = message_of_type(store, app.id, 40, "user.deleted").await;
    let claimed = claim(store, 100).await;
    assert_eq!(claimed_messages(&claimed), vec![a, b, c, d]);
    record_all(
        store,
        vec![
            outcome(&claimed[0], Some(500), dead_letter("exhausted"), 101),
            outcome(&claimed[1], Some(404), dead_letter("4xx"), 101),
            outcome(&claimed[2], Some(500), dead_letter("exhausted"), 101),
            outcome(&claimed[3], None, dead_letter("payload expired"), 101),
        ],
    )
    .await;
    let snapshot = || async {
        let mut v = Vec::new();
        for m in [a, b, c, d] {
            v.push(delivery(store, app.id, m, ep).await);
        }
        v
    };
    let before = snapshot().await;
    let types = |names: &[&str]| strings(names);
    let f = ReplayFilter::default;
    let cases = [
        (f(), 4),
        (
            ReplayFilter {
                since: Some(t(20)),
                ..f()
            },
            3,
        ),
        (
            ReplayFilter {
                until: Some(t(30)),
                ..f()
            },
            2,
        ),
        (
            ReplayFilter {
                since: Some(t(20)),
                until: Some(t(40)),
                ..f()
            },
            2,
        ),
        (
            ReplayFilter {
                event_types: types(&["invoice.paid"]),
                ..f()
            },
            2,
        ),
        (
            ReplayFilter {
                event_types: types(&["invoice.paid", "user.deleted"]),
                ..f()
            },
            3,
        ),
        (
            ReplayFilter {
                last_status: Some(500),
                ..f()
            },
            2,
        ),
        (
            ReplayFilter {
                last_status: Some(404),
                event_types: types(&["user.created"]),
                ..f()
            },
            1,
        ),
        (
            ReplayFilter {
                since: Some(t(20)),
                event_types: types(&["invoice.paid"]),
                last_status: Some(500),
                ..f()
            },
            1,
        ),
        (
            ReplayFilter {
                event_types: types(&["nothing.here"]),
                ..f()
            },
            0,
        ),
    ];
    let spacing = Duration::seconds(1);
    for (i, (filter, expected)) in cases.iter().enumerate() {
        let n = store
            .replay(app.id, ep, ReplayId::new(), filter, t(1000), spacing, true)
            .await
            .unwrap();
        assert_eq!(n, *expected, "dry run {i}");
    }
    assert_eq!(snapshot().await, before, "dry runs change nothing");

    let paid = ReplayFilter {
        event_types: types(&["invoice.paid"]),
        ..f()
    };
    let n = store
        .replay(app.id, ep, ReplayId::new(), &paid, t(1000), spacing, false)
        .await
        .unwrap();
    assert_eq!(n, 2);
    let after = snapshot().await;
    assert_eq!(after[0].status, DeliveryStatus::Pending);
    assert_eq!(after[0].next_attempt_at, t(1000));
    assert_eq!(after[2].status, DeliveryStatus::Pending);
    assert_eq!(after[2].next_attempt_at, t(1001));
    assert_eq!(
        (&after[1], &after[3]),
        (&before[1], &before[3]),
        "filtered out"
    );
    let rest = store
        .replay(app.id, ep, ReplayId::new(), &f(), t(1000), spacing, true)
        .await
        .unwrap();
    assert_eq!(rest, 2, "b and d are still dead-lettered");
}

/// Replay through an application that does not have the endpoint is `NotFound("endpoint")`,
/// dry run or not, and replays nothing.
pub async fn replay_through_another_application_is_not_found_even_as_a_dry_run(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let m = message_at(store, app.id, 10).await;
    let claimed = claim(store, 50).await;
    let dead = outcome(&claimed[0], Some(500), dead_letter("exhausted"), 51);
    record_all(store, vec![dead]).await;
    let stranger = create_app(store, "Stranger").await;
    let spacing = Duration::seconds(1);
    for dry_run in [true, false] {
        let all = ReplayFilter::default();
        let r = store
            .replay(
                stranger.id,
                ep,
                ReplayId::new(),
                &all,
                t(100),
                spacing,
                dry_run,
            )
            .await;
        assert_not_found(r, "endpoint");
    }
    let d = delivery(store, app.id, m, ep).await;
    assert_eq!(d.status, DeliveryStatus::DeadLettered, "nothing replayed");
}

/// Stats of a replay count exactly the deliveries it requeued, by state, however many other
/// deliveries of the endpoint match its filter (a delivered one of the same type, another
/// endpoint's); a later replay or a resend takes a delivery over; another application's replay
/// id or endpoint counts nothing.
pub async fn replay_stats_count_only_the_deliveries_the_replay_requeued(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let ep = create_endpoint(store, app.id).await.id;
    let other = create_endpoint(store, app.id).await.id;
    let a = message_of_type(store, app.id, 10, "invoice.paid").await;
    let b = message_of_type(store, app.id, 20, "user.created").await;
    let c = message_of_type(store, app.id, 30, "invoice.paid").await;
    let d = message_of_type(store, app.id, 40, "invoice.paid").await;
    let claimed = claim_skipping(store, 100, &[other]).await;
    assert_eq!(claimed_messages(&claimed), vec![a, b, c, d]);
    record_all(
        store,
        vec![
            outcome(&claimed[0], Some(500), dead_letter("exhausted"), 101),
            outcome(&claimed[1], Some(500), dead_letter("exhausted"), 101),
            outcome(&claimed[2], Some(200), NextState::Delivered, 101),
            outcome(&claimed[3], Some(500), dead_letter("exhausted"), 101),
        ],
    )
    .await;
    let theirs = claim_skipping(store, 100, &[ep]).await;
    let dead = |c| outcome(c, Some(500), dead_letter("exhausted"), 101);
    record_all(store, theirs.iter().map(dead).collect()).await;

    let paid = ReplayFilter {
        event_types: strings(&["invoice.paid"]),
        ..ReplayFilter::default()
    };
    let first = ReplayId::new();
    let spacing = Duration::seconds(1);
    let n = store
        .replay(app.id, ep, first, &paid, t(1000), spacing, false)
        .await
        .unwrap();
    assert_eq!(n, 2, "a and d");
    let stats = |id: ReplayId, at: i64| {
        let filter = StatsFilter {
            replay: Some(id),
            ..StatsFilter::default()
        };
        async move { store.endpoint_stats(app.id, ep, &filter, t(at)).await }
    };
    let counts = |success, pending, sending, fail| DeliveryStats {
        success,
        pending,
        sending,
        fail,
    };
    assert_eq!(stats(first, 1000).await.unwrap(), counts(0, 2, 0, 0));
    let everything = store
        .endpoint_stats(app.id, ep, &StatsFilter::default(), t(1000))
        .await
        .unwrap();
    assert_eq!(everything, counts(1, 2, 0, 1), "c delivered, b dead");

    let due = claim_skipping(store, 1001, &[other]).await;
    assert_eq!(claimed_messages(&due), vec![a, d]);
    assert_eq!(stats(first, 1001).await.unwrap(), counts(0, 0, 2, 0));
    record_all(
        store,
        vec![
            outcome(&due[0], Some(200), NextState::Delivered, 1002),
            outcome(&due[1], Some(500), dead_letter("exhausted"), 1002),
        ],
    )
    .await;
    assert_eq!(stats(first, 1002).await.unwrap(), counts(1, 0, 0, 1));

    let (second, all) = (ReplayId::new(), ReplayFilter::default());
    let n = store
        .replay(app.id, ep, second, &all, t(2000), spacing, false)
        .await
        .unwrap();
    assert_eq!(n, 2, "b and d");
    assert_eq!(stats(first, 2000).await.unwrap(), counts(1, 0, 0, 0));
    assert_eq!(stats(second, 2000).await.unwrap(), counts(0, 2, 0, 0));
    store.resend(app.id, a, ep, t(2000)).await.unwrap();
    assert_eq!(stats(first, 2000).await.unwrap(), counts(0, 0, 0, 0));

    let on_other = StatsFilter {
        replay: Some(second),
        ..StatsFilter::default()
    };
    let r = store
        .endpoint_stats(app.id, other, &on_other, t(2000))
        .await;
    assert_eq!(
        r.unwrap(),
        DeliveryStats::default(),
        "not the other endpoint's"
    );
    let stranger = create_app(store, "Stranger").await;
    let r = store
        .endpoint_stats(stranger.id, ep, &on_other, t(2000))
        .await;
    assert_not_found(r, "endpoint");
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_replay {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            replay_makes_failed_deliveries_pending_again_spaced_in_creation_order,
            replay_filters_by_time_event_type_and_last_status_and_a_dry_run_changes_nothing,
            replay_through_another_application_is_not_found_even_as_a_dry_run,
            replay_stats_count_only_the_deliveries_the_replay_requeued,
        );
    };
}
