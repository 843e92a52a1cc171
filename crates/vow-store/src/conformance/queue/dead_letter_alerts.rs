//! Cases about the dead-letter rate alert's memory ([`crate::DeadLetterAlerts`]): dead-letters
//! noted by recording, counted per endpoint in a window, and alerts raised and cleared once.

use super::*;
use crate::dead_letters::{DeadLetterCount, RaisedAlert};
use crate::overview::KEPT;

/// Claims at `t(secs)` and records for each claimed delivery what `next` says of it.
async fn record_all(store: &dyn Store, secs: i64, next: impl Fn(&Delivery) -> NextState) {
    let claimed = claim(store, secs).await;
    let outcomes = claimed
        .iter()
        .map(|c| outcome(c, Some(500), next(&c.delivery), secs))
        .collect();
    record(store, outcomes).await;
}

/// Each dead-letter is noted at its record time and counted for its endpoint from `since` on;
/// deliveries and retries are not; a deleted endpoint drops out; retention takes notes older
/// than [`KEPT`].
pub async fn dead_letters_are_counted_per_endpoint_from_their_record_time(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let (a, b) = (
        create_endpoint(store, app.id).await.id,
        create_endpoint(store, app.id).await.id,
    );
    // Two messages, each to both endpoints: the first one's deliveries dead-letter, the
    // second one's are retried (to `a`) and delivered (to `b`); then a third dead-letters.
    let m1 = message_at(store, app.id, 10).await;
    message_at(store, app.id, 11).await;
    record_all(store, 20, |d| match (d.msg_id == m1, d.endpoint_id == a) {
        (true, _) => dead_letter("x"),
        (false, true) => NextState::RetryAt {
            at: t(1_000),
            client_errors: 0,
        },
        (false, false) => NextState::Delivered,
    })
    .await;
    message_at(store, app.id, 30).await;
    record_all(store, 40, |_| dead_letter("y")).await;

    let counts = store.dead_letters_since(t(20)).await.unwrap();
    let count_of = |counts: &[DeadLetterCount], ep: EndpointId| {
        counts.iter().find(|c| c.endpoint_id == ep).map(|c| c.count)
    };
    assert_eq!(count_of(&counts, a), Some(2), "{counts:?}");
    assert_eq!(count_of(&counts, b), Some(2), "{counts:?}");
    assert!(counts.iter().all(|c| c.app_id == app.id));
    let later = store.dead_letters_since(t(21)).await.unwrap();
    assert_eq!(
        (count_of(&later, a), count_of(&later, b)),
        (Some(1), Some(1))
    );
    assert!(store.dead_letters_since(t(41)).await.unwrap().is_empty());

    store.delete_endpoint(app.id, b).await.unwrap();
    let counts = store.dead_letters_since(t(0)).await.unwrap();
    assert_eq!(
        counts.len(),
        1,
        "a deleted endpoint is left out: {counts:?}"
    );
    assert_eq!(count_of(&counts, a), Some(2));

    // Retention, two days on, takes the first record's notes and keeps the second's.
    let now = t(30) + KEPT;
    while store.purge_expired(now, t(0), 1).await.unwrap() > 0 {}
    let kept = store.dead_letters_since(t(0)).await.unwrap();
    assert_eq!(count_of(&kept, a), Some(1), "{kept:?}");
}

/// An alert is raised once and cleared once, whoever asks; a raise older than the clear is
/// refused, a later one raises it again; one for a gone endpoint is not raised, and deleting
/// an endpoint drops its alert.
pub async fn an_alert_is_raised_and_cleared_once(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let (a, b) = (
        create_endpoint(store, app.id).await.id,
        create_endpoint(store, app.id).await.id,
    );
    assert!(store
        .raise_dead_letter_alert(app.id, a, t(5))
        .await
        .unwrap());
    assert!(!store
        .raise_dead_letter_alert(app.id, a, t(6))
        .await
        .unwrap());
    assert!(store
        .raise_dead_letter_alert(app.id, b, t(7))
        .await
        .unwrap());
    let other = create_app(store, "Other").await;
    assert!(
        !store
            .raise_dead_letter_alert(other.id, EndpointId::new(), t(7))
            .await
            .unwrap(),
        "no such endpoint"
    );
    let mut raised = store.raised_dead_letter_alerts().await.unwrap();
    raised.sort_by_key(|r| r.raised_at);
    assert_eq!(
        raised,
        vec![
            RaisedAlert {
                app_id: app.id,
                endpoint_id: a,
                raised_at: t(5)
            },
            RaisedAlert {
                app_id: app.id,
                endpoint_id: b,
                raised_at: t(7)
            },
        ]
    );
    assert!(store.clear_dead_letter_alert(a, t(10)).await.unwrap());
    assert!(!store.clear_dead_letter_alert(a, t(11)).await.unwrap());
    assert_eq!(store.raised_dead_letter_alerts().await.unwrap().len(), 1);
    // A check that began before the clear counted dead-letters since gone from its window.
    for stale in [t(9), t(10)] {
        assert!(!store
            .raise_dead_letter_alert(app.id, a, stale)
            .await
            .unwrap());
    }
    assert!(store
        .raise_dead_letter_alert(app.id, a, t(12))
        .await
        .unwrap());
    assert!(!store
        .raise_dead_letter_alert(app.id, a, t(13))
        .await
        .unwrap());
    assert!(store.clear_dead_letter_alert(a, t(14)).await.unwrap());
    store.delete_endpoint(app.id, b).await.unwrap();
    assert!(store.raised_dead_letter_alerts().await.unwrap().is_empty());
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_dead_letter_alerts {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            dead_letters_are_counted_per_endpoint_from_their_record_time,
            an_alert_is_raised_and_cleared_once,
        );
    };
}
