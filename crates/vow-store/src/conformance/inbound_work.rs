//! Cases about processing inbound events ([`crate::inbound::processing`]): push and pull
//! claims under leases, outcomes per destination and their aggregate, retries, dead letters
//! and replay, expired leases (uncertain, or retried for an idempotent destination), operators'
//! resolutions, and ordering by version with superseded events.

use crate::Store;
use vow_core::{DestinationId, InboundEventId, SourceId};

use super::inbound::{claim_new, delivery, fields};
use super::support::*;
use crate::inbound::processing::{
    ClaimedEvent, Consumer, DestinationResult, LeaseToken, NextTry, Outcome, Resolution, WorkClaim,
    WorkOutcome, WorkRecorded, WorkRequest,
};
use crate::inbound::{Destination, InboundEvent, InboundState, NewSource, Source, SourceFields};
use crate::{InboundStore, StoreError};

/// A destination of `url`, idempotent or not.
pub(super) fn destination(url: &str, idempotent: bool) -> Destination {
    Destination {
        id: DestinationId::new(),
        url: url.into(),
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
        idempotent,
    }
}

/// A source with these destinations (none: a pull source).
pub(super) async fn source_with(
    store: &dyn InboundStore,
    destinations: Vec<Destination>,
) -> Source {
    let new = NewSource {
        id: SourceId::new(),
        token: format!("token-{}", SourceId::new()),
        fields: SourceFields {
            destinations,
            ..fields("work")
        },
        now: t(0),
    };
    store.create_source(new).await.expect("create a source")
}

/// A source with two destinations that are not idempotent, and an event of it received at
/// `t(10)`.
pub(super) async fn two_destinations(
    store: &dyn InboundStore,
) -> (Source, [Destination; 2], InboundEvent) {
    let (a, b) = (
        destination("https://a.example", false),
        destination("https://b.example", false),
    );
    let source = source_with(store, vec![a.clone(), b.clone()]).await;
    let event = claim_new(store, delivery(source.id, Some("e-1"), b"{}")).await;
    (source, [a, b], event)
}

/// A claim at `t(secs)` with a 30 s lease and 5 attempts.
fn request(consumer: Consumer, secs: i64, limit: usize) -> WorkRequest {
    WorkRequest {
        now: t(secs),
        lease: chrono::Duration::seconds(30),
        limit,
        consumer,
        max_attempts: 5,
    }
}

pub(super) async fn claim(store: &dyn InboundStore, consumer: Consumer, secs: i64) -> WorkClaim {
    store
        .claim_inbound_work(&request(consumer, secs, 100))
        .await
        .expect("claim work")
}

fn ids(claimed: &[ClaimedEvent]) -> Vec<InboundEventId> {
    claimed.iter().map(|c| c.event.id).collect()
}

pub(super) fn result(destination: Option<DestinationId>, outcome: Outcome) -> DestinationResult {
    DestinationResult {
        destination,
        outcome,
        status: (outcome == Outcome::Completed).then_some(200),
        error: (outcome != Outcome::Completed).then(|| format!("{} there", outcome.as_str())),
    }
}

/// Records `results` for `claimed` at `t(secs)`; the event as stored.
pub(super) async fn record(
    store: &dyn InboundStore,
    claimed: &ClaimedEvent,
    results: Vec<DestinationResult>,
    next: NextTry,
    secs: i64,
) -> InboundEvent {
    let outcome = WorkOutcome {
        event: claimed.event.id,
        lease: claimed.lease.clone(),
        results,
        next,
        now: t(secs),
    };
    match store.record_inbound_work(outcome).await.expect("record") {
        WorkRecorded::Stored(event) => *event,
        WorkRecorded::LeaseLost => panic!("the lease of {} was lost", claimed.event.id),
    }
}

async fn state_of(store: &dyn InboundStore, source: SourceId, id: InboundEventId) -> InboundEvent {
    let stored = store.get_inbound_event(source, id).await.expect("get");
    stored.expect("the event exists").event
}

/// An event of `source` with an entity and a version, received at `t(secs)`.
fn versioned(
    source: SourceId,
    id: &str,
    entity: &str,
    version: &str,
    secs: i64,
) -> crate::inbound::NewInboundEvent {
    crate::inbound::NewInboundEvent {
        entity: Some(entity.into()),
        version: Some(version.into()),
        now: t(secs),
        ..delivery(source, Some(id), id.as_bytes())
    }
}

/// A push claim takes the due events of sources with destinations (with their content and
/// the destinations owed), leased; a pull claim takes only its own source's; nothing is
/// claimed twice, and a released quarantined event is due.
pub async fn push_and_pull_claims_take_their_own_sources_events_under_a_lease(store: &dyn Store) {
    let dest = destination("https://a.example/in", false);
    let push = source_with(store, vec![dest.clone()]).await;
    let pull = source_with(store, Vec::new()).await;
    let pushed = claim_new(store, delivery(push.id, Some("p-1"), b"{\"n\":1}")).await;
    let pulled = claim_new(store, delivery(pull.id, Some("q-1"), b"{\"n\":2}")).await;
    assert_eq!(pushed.next_attempt_at, Some(t(10)));
    assert_eq!(store.next_inbound_due().await.unwrap(), Some(t(10)));
    assert!(
        claim(store, Consumer::Push, 5).await.claimed.is_empty(),
        "not due before it arrived"
    );

    let got = claim(store, Consumer::Push, 20).await;
    assert_eq!(ids(&got.claimed), vec![pushed.id]);
    let c = &got.claimed[0];
    assert_eq!(
        (c.event.state, c.event.attempts),
        (InboundState::Processing, 1)
    );
    assert_eq!(c.lease_until, t(50));
    assert_eq!(c.pending, vec![dest]);
    assert_eq!(
        c.content.as_ref().map(|c| c.payload.clone()),
        Some(b"{\"n\":1}".to_vec())
    );
    assert!(
        claim(store, Consumer::Push, 21).await.claimed.is_empty(),
        "claimed once"
    );
    assert_eq!(
        state_of(store, push.id, pushed.id).await.state,
        InboundState::Processing
    );

    let got = claim(store, Consumer::Pull(pull.id), 20).await;
    assert_eq!(ids(&got.claimed), vec![pulled.id]);
    assert!(got.claimed[0].pending.is_empty());
    assert!(claim(store, Consumer::Pull(push.id), 20)
        .await
        .claimed
        .is_empty());

    // A quarantined payload released by an operator is due at once.
    let other = delivery(push.id, Some("p-1"), b"{\"n\":3}");
    let quarantined = match store.claim_inbound(other).await.unwrap() {
        crate::inbound::Claim::Quarantined(e) => e,
        c => panic!("expected quarantine, got {c:?}"),
    };
    store
        .resolve_quarantined(push.id, quarantined.id, InboundState::Received, t(60))
        .await
        .unwrap();
    let got = claim(store, Consumer::Push, 61).await;
    assert!(
        ids(&got.claimed).contains(&quarantined.id),
        "{:?}",
        ids(&got.claimed)
    );
}

/// Each destination's outcome is kept; a retry goes only to the destinations still owed the
/// event, when it is due; the event ends `completed` once all confirmed.
pub async fn a_retry_reaches_only_the_destinations_still_owed_the_event(store: &dyn Store) {
    let (source, [a, b], event) = two_destinations(store).await;
    let first = claim(store, Consumer::Push, 20).await.claimed.remove(0);
    assert_eq!(first.pending.len(), 2);
    let results = vec![
        result(Some(a.id), Outcome::Completed),
        result(Some(b.id), Outcome::Retryable),
    ];
    let stored = record(store, &first, results, NextTry::At(t(100)), 21).await;
    assert_eq!(
        (stored.state, stored.next_attempt_at, stored.attempts),
        (InboundState::Retryable, Some(t(100)), 1)
    );
    assert_eq!(stored.last_error.as_deref(), Some("retryable there"));
    assert_eq!(store.next_inbound_due().await.unwrap(), Some(t(100)));
    assert!(
        claim(store, Consumer::Push, 99).await.claimed.is_empty(),
        "not before it is due"
    );

    let second = claim(store, Consumer::Push, 100).await.claimed.remove(0);
    assert_eq!(
        (second.event.attempts, second.pending.clone()),
        (2, vec![b.clone()])
    );
    let done = record(
        store,
        &second,
        vec![result(Some(b.id), Outcome::Completed)],
        NextTry::Exhausted,
        101,
    )
    .await;
    assert_eq!(
        (done.state, done.next_attempt_at),
        (InboundState::Completed, None)
    );
    assert_eq!(store.next_inbound_due().await.unwrap(), None);

    let stored = store
        .get_inbound_event(source.id, event.id)
        .await
        .unwrap()
        .unwrap();
    let mut forwards: Vec<_> = stored
        .forwards
        .iter()
        .map(|f| (f.destination, f.outcome, f.attempts, f.status))
        .collect();
    forwards.sort_by_key(|f| f.0.map(|d| d.to_string()));
    let mut want = vec![
        (Some(a.id), Outcome::Completed, 1, Some(200)),
        (Some(b.id), Outcome::Completed, 2, Some(200)),
    ];
    want.sort_by_key(|f| f.0.map(|d| d.to_string()));
    assert_eq!(forwards, want);
}

/// Out of attempts, a retryable outcome is dead-lettered (a rejection stays rejected); replay
/// forgets those outcomes and makes the event due again with fresh attempts; replaying an
/// event that is not dead-lettered or rejected is a conflict.
pub async fn an_exhausted_event_is_dead_lettered_and_replay_forwards_it_again(store: &dyn Store) {
    let (source, [a, b], event) = two_destinations(store).await;
    let c = claim(store, Consumer::Push, 20).await.claimed.remove(0);
    let results = vec![
        result(Some(a.id), Outcome::Rejected),
        result(Some(b.id), Outcome::Retryable),
    ];
    let stored = record(store, &c, results, NextTry::Exhausted, 21).await;
    assert_eq!(
        (stored.state, stored.next_attempt_at),
        (InboundState::DeadLettered, None)
    );
    let outcomes = |s: crate::inbound::StoredInbound| {
        let mut o: Vec<_> = s.forwards.iter().map(|f| f.outcome.as_str()).collect();
        o.sort();
        o
    };
    let stored_full = store
        .get_inbound_event(source.id, event.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcomes(stored_full), vec!["dead_lettered", "rejected"]);
    assert!(claim(store, Consumer::Push, 1000).await.claimed.is_empty());

    let replayed = store
        .replay_inbound(source.id, event.id, None, t(200))
        .await
        .unwrap()
        .event;
    assert_eq!(
        (replayed.state, replayed.next_attempt_at, replayed.attempts),
        (InboundState::Retryable, Some(t(200)), 0)
    );
    let again = claim(store, Consumer::Push, 200).await.claimed.remove(0);
    assert_eq!(again.pending.len(), 2, "both owed the event again");
    let results = vec![
        result(Some(a.id), Outcome::Completed),
        result(Some(b.id), Outcome::Completed),
    ];
    assert_eq!(
        record(store, &again, results, NextTry::Exhausted, 201)
            .await
            .state,
        InboundState::Completed
    );

    let r = store
        .replay_inbound(source.id, event.id, None, t(300))
        .await;
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
    let r = store
        .replay_inbound(source.id, InboundEventId::new(), None, t(300))
        .await;
    assert!(
        matches!(r, Err(StoreError::NotFound("inbound event"))),
        "{r:?}"
    );
}

/// A lease that ran out settles each destination still owed the event: `uncertain`, or
/// `retryable` (claimed again at once) when it is idempotent. The stale holder can no longer
/// record; an operator resolves what is uncertain.
pub async fn an_expired_lease_is_uncertain_unless_the_destination_is_idempotent(store: &dyn Store) {
    let (plain, safe) = (
        destination("https://a.example", false),
        destination("https://b.example", true),
    );
    let source = source_with(store, vec![plain.clone(), safe.clone()]).await;
    let event = claim_new(store, delivery(source.id, Some("e-1"), b"{}")).await;
    let stale = claim(store, Consumer::Push, 20).await.claimed.remove(0);

    let later = claim(store, Consumer::Push, 51).await;
    assert_eq!(
        later.expired.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![event.id]
    );
    assert_eq!(
        ids(&later.claimed),
        vec![event.id],
        "retried for the idempotent one"
    );
    let fresh = &later.claimed[0];
    assert_eq!(fresh.pending, vec![safe.clone()]);
    assert_eq!(fresh.event.attempts, 2);

    let lost = WorkOutcome {
        event: event.id,
        lease: stale.lease.clone(),
        results: vec![result(Some(plain.id), Outcome::Completed)],
        next: NextTry::Exhausted,
        now: t(52),
    };
    assert_eq!(
        store.record_inbound_work(lost).await.unwrap(),
        WorkRecorded::LeaseLost
    );

    let stored = record(
        store,
        fresh,
        vec![result(Some(safe.id), Outcome::Completed)],
        NextTry::Exhausted,
        53,
    )
    .await;
    assert_eq!(stored.state, InboundState::Uncertain);
    let full = store
        .get_inbound_event(source.id, event.id)
        .await
        .unwrap()
        .unwrap();
    let plain_forward = full
        .forwards
        .iter()
        .find(|f| f.destination == Some(plain.id))
        .unwrap();
    assert_eq!(plain_forward.outcome, Outcome::Uncertain);
    assert!(plain_forward
        .error
        .as_deref()
        .unwrap_or_default()
        .contains("lease"));

    let retried = store
        .resolve_uncertain(source.id, event.id, Resolution::Retry, None, t(60))
        .await
        .unwrap()
        .event;
    assert_eq!(
        (retried.state, retried.next_attempt_at),
        (InboundState::Retryable, Some(t(60)))
    );
    let last = claim(store, Consumer::Push, 60).await.claimed.remove(0);
    assert_eq!(last.pending, vec![plain.clone()]);
    let done = record(
        store,
        &last,
        vec![result(Some(plain.id), Outcome::Uncertain)],
        NextTry::Exhausted,
        61,
    )
    .await;
    assert_eq!(done.state, InboundState::Uncertain);
    let resolved = store
        .resolve_uncertain(source.id, event.id, Resolution::Completed, None, t(70))
        .await
        .unwrap()
        .event;
    assert_eq!(resolved.state, InboundState::Completed);
    let r = store
        .resolve_uncertain(source.id, event.id, Resolution::Retry, None, t(80))
        .await;
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
}

/// A pull consumer claims the oldest events first, at most the limit, completes and fails
/// them under its lease; a pull lease that runs out is uncertain.
pub async fn a_pull_consumer_claims_completes_and_fails_under_its_lease(store: &dyn Store) {
    let source = source_with(store, Vec::new()).await;
    let mut events = Vec::new();
    for (n, id) in ["a", "b", "c"].into_iter().enumerate() {
        let new = crate::inbound::NewInboundEvent {
            now: t(10 + n as i64),
            ..delivery(source.id, Some(id), id.as_bytes())
        };
        events.push(claim_new(store, new).await.id);
    }
    let pull = Consumer::Pull(source.id);
    let got = store
        .claim_inbound_work(&request(pull, 20, 2))
        .await
        .unwrap();
    assert_eq!(
        ids(&got.claimed),
        events[..2].to_vec(),
        "oldest first, at most the limit"
    );
    let done = record(
        store,
        &got.claimed[0],
        vec![result(None, Outcome::Completed)],
        NextTry::Exhausted,
        21,
    )
    .await;
    assert_eq!(done.state, InboundState::Completed);
    let failed = record(
        store,
        &got.claimed[1],
        vec![result(None, Outcome::Retryable)],
        NextTry::At(t(40)),
        21,
    )
    .await;
    assert_eq!(
        (failed.state, failed.next_attempt_at),
        (InboundState::Retryable, Some(t(40)))
    );

    let third = store
        .claim_inbound_work(&request(pull, 22, 5))
        .await
        .unwrap();
    assert_eq!(ids(&third.claimed), vec![events[2]]);
    let expired = store
        .claim_inbound_work(&request(pull, 53, 5))
        .await
        .unwrap();
    assert_eq!(
        expired.expired.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![events[2]]
    );
    assert_eq!(ids(&expired.claimed), vec![events[1]], "the retry, now due");
    assert_eq!(
        state_of(store, source.id, events[2]).await.state,
        InboundState::Uncertain
    );
    let full = store
        .get_inbound_event(source.id, events[2])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(full.forwards.len(), 1);
    assert_eq!(
        (full.forwards[0].destination, full.forwards[0].outcome),
        (None, Outcome::Uncertain)
    );
}

/// With versions and entities, one event per entity is processed at a time, in version
/// order; an event not newer than its entity's mark is `superseded` (not claimed), also when
/// it arrives after a newer one (a delete's mark stays as a tombstone); other entities and
/// events without a version are not held back.
pub async fn older_versions_of_an_entity_are_superseded_and_one_runs_at_a_time(store: &dyn Store) {
    let dest = destination("https://a.example", false);
    let source = source_with(store, vec![dest.clone()]).await;
    let a2 = claim_new(store, versioned(source.id, "a2", "cus_a", "2", 10)).await;
    let a1 = claim_new(store, versioned(source.id, "a1", "cus_a", "1", 11)).await;
    let b1 = claim_new(store, versioned(source.id, "b1", "cus_b", "1", 12)).await;
    let a3 = claim_new(store, versioned(source.id, "a3", "cus_a", "10", 13)).await;
    let plain = claim_new(store, delivery(source.id, Some("plain"), b"x")).await;

    let first = claim(store, Consumer::Push, 20).await;
    let mut got = ids(&first.claimed);
    got.sort_by_key(|id| id.to_string());
    let mut want = vec![a2.id, b1.id, plain.id];
    want.sort_by_key(|id| id.to_string());
    assert_eq!(got, want, "one per entity");
    assert!(first.superseded.is_empty());
    assert!(
        claim(store, Consumer::Push, 21).await.claimed.is_empty(),
        "cus_a is busy"
    );

    let a2_claim = first.claimed.iter().find(|c| c.event.id == a2.id).unwrap();
    let ok = vec![result(Some(dest.id), Outcome::Completed)];
    record(store, a2_claim, ok.clone(), NextTry::Exhausted, 22).await;
    let second = claim(store, Consumer::Push, 23).await;
    assert_eq!(
        second.superseded.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![a1.id]
    );
    assert_eq!(
        ids(&second.claimed),
        vec![a3.id],
        "10 is newer than 2, as a number"
    );
    let a1_now = state_of(store, source.id, a1.id).await;
    assert_eq!(a1_now.state, InboundState::Superseded);
    assert!(a1_now.last_error.unwrap_or_default().contains("not newer"));

    // "10" was a delete: its mark stays, so a late update at 9 is superseded too.
    record(store, &second.claimed[0], ok, NextTry::Exhausted, 24).await;
    let late = claim_new(store, versioned(source.id, "a9", "cus_a", "9", 30)).await;
    let third = claim(store, Consumer::Push, 31).await;
    assert!(third.claimed.is_empty());
    assert_eq!(
        third.superseded.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![late.id]
    );
    assert_eq!(
        state_of(store, source.id, late.id).await.state,
        InboundState::Superseded
    );
}

/// Renewing a held lease keeps the event from being settled as expired; a token that is not
/// the holder's renews nothing.
pub async fn renewing_an_inbound_lease_keeps_it_held(store: &dyn Store) {
    let source = source_with(store, vec![destination("https://a.example", false)]).await;
    let event = claim_new(store, delivery(source.id, Some("e-1"), b"{}")).await;
    let c = claim(store, Consumer::Push, 20).await.claimed.remove(0);
    let renewed = store
        .renew_inbound_leases(
            &[
                (event.id, c.lease.clone()),
                (event.id, LeaseToken("nope".into())),
            ],
            t(90),
        )
        .await
        .unwrap();
    assert_eq!(renewed, 1);
    let later = claim(store, Consumer::Push, 60).await;
    assert!(later.expired.is_empty() && later.claimed.is_empty());
    assert_eq!(
        state_of(store, source.id, event.id).await.state,
        InboundState::Processing
    );
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_inbound_work {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            push_and_pull_claims_take_their_own_sources_events_under_a_lease,
            a_retry_reaches_only_the_destinations_still_owed_the_event,
            an_exhausted_event_is_dead_lettered_and_replay_forwards_it_again,
            an_expired_lease_is_uncertain_unless_the_destination_is_idempotent,
            a_pull_consumer_claims_completes_and_fails_under_its_lease,
            older_versions_of_an_entity_are_superseded_and_one_runs_at_a_time,
            renewing_an_inbound_lease_keeps_it_held,
        );
    };
}
