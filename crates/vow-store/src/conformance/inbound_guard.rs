//! Cases about the replay guard ([`crate::inbound::replay_guard`]) and operators' decisions
//! per destination ([`crate::inbound::decisions`]).

use super::inbound::{claim_new, create_source, delivery, events};
use super::inbound_work::{claim, destination, record, result, source_with};
use super::support::*;
use crate::inbound::processing::{Consumer, NextTry, Outcome, Resolution};
use crate::inbound::{Claim, InboundState, NewInboundEvent, ReplayGuard};
use crate::Store;
use crate::StoreError;

/// A delivery of `payload` under `id` at `t(secs)`, guarded with a 60 s window.
fn guarded(source: crate::inbound::Source, id: &str, secs: i64) -> NewInboundEvent {
    NewInboundEvent {
        replay_guard: Some(ReplayGuard {
            digest: "d1g35t".into(),
            window: chrono::Duration::seconds(60),
        }),
        now: t(secs),
        ..delivery(source.id, Some(id), b"{\"same\":\"content\"}")
    }
}

/// Within the window a new id with accepted content stores nothing and names the event it
/// was accepted as; a repeated id is still a duplicate; refusals do not move the window; at
/// its end the content is accepted again; another source, or no guard, accepts it.
pub async fn a_replay_guard_refuses_seen_content_under_a_new_id_within_its_window(
    store: &dyn Store,
) {
    let source = create_source(store).await;
    let first = claim_new(store, guarded(source.clone(), "g-1", 10)).await;
    for (id, secs) in [("g-2", 20), ("g-3", 69)] {
        match store.claim_inbound(guarded(source.clone(), id, secs)).await {
            Ok(Claim::Replayed(earlier)) => assert_eq!(earlier.id, first.id),
            other => panic!("a replay at t({secs}) must be refused: {other:?}"),
        }
    }
    assert!(matches!(
        store
            .claim_inbound(guarded(source.clone(), "g-1", 30))
            .await,
        Ok(Claim::Duplicate(_))
    ));
    assert_eq!(events(store, source.id, None).await, 1, "nothing stored");
    let later = claim_new(store, guarded(source.clone(), "g-4", 70)).await;
    match store
        .claim_inbound(guarded(source.clone(), "g-5", 100))
        .await
    {
        Ok(Claim::Replayed(earlier)) => assert_eq!(earlier.id, later.id, "the window moved"),
        other => panic!("{other:?}"),
    }
    let off = NewInboundEvent {
        replay_guard: None,
        ..guarded(source.clone(), "g-6", 101)
    };
    claim_new(store, off).await;
    let elsewhere = create_source(store).await;
    claim_new(store, guarded(elsewhere, "g-7", 102)).await;
    assert_eq!(events(store, source.id, None).await, 3);
}

/// Fifty concurrent deliveries of one content under fifty ids: one event.
pub async fn concurrent_replays_under_new_ids_store_one_event(store: &dyn Store) {
    let source = create_source(store).await;
    let claims = (0..50)
        .map(|i| store.claim_inbound(guarded(source.clone(), &format!("c-{i}"), 10)))
        .collect::<Vec<_>>();
    let mut received = 0;
    for outcome in join_all(claims).await {
        match outcome.expect("every claim succeeds") {
            Claim::Received(_) => received += 1,
            Claim::Replayed(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(received, 1, "one delivery of the content wins");
    assert_eq!(events(store, source.id, None).await, 1, "one stored row");
}

/// An event dead-lettered at one destination and uncertain at another: replay requeues the
/// first only (the event is due, owed only there), resolve settles the second only; naming
/// a destination in another state, or deciding while the event is processed, is a conflict.
pub async fn replay_and_resolve_act_on_each_destination_on_its_own(store: &dyn Store) {
    let (dead, unsure) = (
        destination("https://a.example", false),
        destination("https://b.example", false),
    );
    let source = source_with(store, vec![dead.clone(), unsure.clone()]).await;
    let event = claim_new(store, delivery(source.id, Some("e-1"), b"{}")).await;
    let c = claim(store, Consumer::Push, 20).await.claimed.remove(0);
    let results = vec![
        result(Some(dead.id), Outcome::Retryable),
        result(Some(unsure.id), Outcome::Uncertain),
    ];
    let stored = record(store, &c, results, NextTry::Exhausted, 21).await;
    assert_eq!(stored.state, InboundState::Uncertain, "the heavier outcome");

    let r = store
        .replay_inbound(source.id, event.id, Some(unsure.id), t(30))
        .await;
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
    let replayed = store
        .replay_inbound(source.id, event.id, None, t(30))
        .await
        .expect("the dead-lettered destination replays");
    assert_eq!(
        (
            replayed.event.state,
            replayed.event.next_attempt_at,
            replayed.event.attempts
        ),
        (InboundState::Retryable, Some(t(30)), 0)
    );
    let changed: Vec<_> = replayed
        .changed
        .iter()
        .map(|f| (f.destination, f.outcome))
        .collect();
    assert_eq!(changed, [(Some(dead.id), Outcome::Retryable)]);

    let again = claim(store, Consumer::Push, 30).await.claimed.remove(0);
    assert_eq!(
        again.pending,
        vec![dead.clone()],
        "the uncertain one is not owed"
    );
    let r = store
        .resolve_uncertain(source.id, event.id, Resolution::Completed, None, t(31))
        .await;
    assert!(
        matches!(r, Err(StoreError::Conflict(_))),
        "processing: {r:?}"
    );
    let results = vec![result(Some(dead.id), Outcome::Completed)];
    let stored = record(store, &again, results, NextTry::Exhausted, 32).await;
    assert_eq!(stored.state, InboundState::Uncertain);

    let resolved = store
        .resolve_uncertain(
            source.id,
            event.id,
            Resolution::Completed,
            Some(unsure.id),
            t(40),
        )
        .await
        .expect("the uncertain destination resolves");
    assert_eq!(resolved.event.state, InboundState::Completed);
    let changed: Vec<_> = resolved
        .changed
        .iter()
        .map(|f| (f.destination, f.outcome))
        .collect();
    assert_eq!(changed, [(Some(unsure.id), Outcome::Completed)]);
    let full = store
        .get_inbound_event(source.id, event.id)
        .await
        .unwrap()
        .unwrap();
    let mut outcomes: Vec<_> = full
        .forwards
        .iter()
        .map(|f| (f.destination, f.outcome))
        .collect();
    outcomes.sort_by_key(|(d, _)| d.map(|d| d.to_string()));
    let mut want = vec![
        (Some(dead.id), Outcome::Completed),
        (Some(unsure.id), Outcome::Completed),
    ];
    want.sort_by_key(|(d, _)| d.map(|d| d.to_string()));
    assert_eq!(outcomes, want);
    let r = store.replay_inbound(source.id, event.id, None, t(50)).await;
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_inbound_guard {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_replay_guard_refuses_seen_content_under_a_new_id_within_its_window,
            concurrent_replays_under_new_ids_store_one_event,
            replay_and_resolve_act_on_each_destination_on_its_own,
        );
    };
}
