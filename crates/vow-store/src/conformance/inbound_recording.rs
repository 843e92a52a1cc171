//! Cases about recording an inbound attempt and settling an expired lease
//! ([`crate::rules::recording`]), where the backends once decided differently: out of attempts
//! nothing stays retryable, a dead-letter names its own error, a final outcome stays final, a
//! destination reported twice is one attempt; and about who may claim (a pull consumer only
//! while its source has no destinations; only versioned events of an entity wait for each
//! other).

use vow_core::SourceId;

use super::inbound::{claim_new, delivery};
use super::inbound_work::{claim, destination, record, result, source_with, two_destinations};
use super::support::*;
use crate::inbound::processing::{Consumer, Forward, NextTry, Outcome};
use crate::inbound::{InboundState, NewInboundEvent, Source, StoredInbound};
use crate::{InboundStore, Store};

/// `source` with only these destinations, at `t(secs)`.
async fn keep_only(
    store: &dyn InboundStore,
    source: &Source,
    destinations: Vec<crate::inbound::Destination>,
    secs: i64,
) {
    let mut fields = source.fields.clone();
    fields.destinations = destinations;
    store
        .update_source(source.id, fields, t(secs))
        .await
        .expect("update the source");
}

async fn stored(
    store: &dyn InboundStore,
    source: SourceId,
    id: vow_core::InboundEventId,
) -> StoredInbound {
    let found = store.get_inbound_event(source, id).await.expect("get");
    found.expect("the event exists")
}

fn at(forwards: &[Forward], destination: Option<vow_core::DestinationId>) -> &Forward {
    let found = forwards.iter().find(|f| f.destination == destination);
    found.expect("a forward to that destination")
}

/// Out of attempts, a retryable outcome stored for a destination not reported this time (it
/// was removed from the source) is dead-lettered too, keeping its attempts and error, so the
/// event is not due forever; the event names that error.
pub async fn out_of_attempts_no_destination_stays_retryable_even_one_not_reported(
    store: &dyn Store,
) {
    let (source, [a, b], event) = two_destinations(store).await;
    let first = claim(store, Consumer::Push, 20).await.claimed.remove(0);
    let results = vec![
        result(Some(a.id), Outcome::Completed),
        result(Some(b.id), Outcome::Retryable),
    ];
    record(store, &first, results, NextTry::At(t(100)), 21).await;

    keep_only(store, &source, vec![a.clone()], 50).await;
    let last = claim(store, Consumer::Push, 100).await.claimed.remove(0);
    assert!(last.pending.is_empty(), "a is done, b is gone");
    let ended = record(store, &last, Vec::new(), NextTry::Exhausted, 101).await;
    assert_eq!(
        (ended.state, ended.next_attempt_at),
        (InboundState::DeadLettered, None)
    );
    assert_eq!(ended.last_error.as_deref(), Some("retryable there"));
    let full = stored(store, source.id, event.id).await;
    let b_forward = at(&full.forwards, Some(b.id));
    assert_eq!(
        (
            b_forward.outcome,
            b_forward.attempts,
            b_forward.error.as_deref()
        ),
        (Outcome::DeadLettered, 1, Some("retryable there"))
    );
    assert_eq!(at(&full.forwards, Some(a.id)).outcome, Outcome::Completed);
    assert!(claim(store, Consumer::Push, 10_000)
        .await
        .claimed
        .is_empty());
}

/// The event's last error is that of a destination whose outcome names its state, not the
/// first failure reported: a dead-lettered event names what dead-lettered it.
pub async fn a_dead_letter_names_the_error_that_dead_lettered_it(store: &dyn Store) {
    let (a, b, c) = (
        destination("https://a.example", false),
        destination("https://b.example", false),
        destination("https://c.example", false),
    );
    let source = source_with(store, vec![a.clone(), b.clone(), c.clone()]).await;
    claim_new(store, delivery(source.id, Some("e-1"), b"{}")).await;
    let claimed = claim(store, Consumer::Push, 20).await.claimed.remove(0);
    let mut silent = result(Some(b.id), Outcome::Retryable);
    silent.error = None;
    let results = vec![
        result(Some(a.id), Outcome::Rejected),
        silent,
        result(Some(c.id), Outcome::Retryable),
    ];
    let ended = record(store, &claimed, results, NextTry::Exhausted, 21).await;
    assert_eq!(ended.state, InboundState::DeadLettered);
    assert_eq!(ended.last_error.as_deref(), Some("retryable there"));
}

/// A lease that runs out never rewrites a final outcome, a pull consumer's included: here a
/// pull consumer rejected the event while another outcome kept it retryable, and its next
/// lease ran out.
pub async fn an_expired_pull_lease_leaves_a_final_outcome_final(store: &dyn Store) {
    let a = destination("https://a.example", false);
    let source = source_with(store, vec![a.clone()]).await;
    let event = claim_new(store, delivery(source.id, Some("e-1"), b"{}")).await;
    let pushed = claim(store, Consumer::Push, 20).await.claimed.remove(0);
    let retry = vec![result(Some(a.id), Outcome::Retryable)];
    record(store, &pushed, retry, NextTry::At(t(30)), 21).await;

    keep_only(store, &source, Vec::new(), 25).await;
    let pull = Consumer::Pull(source.id);
    let pulled = claim(store, pull, 30).await.claimed.remove(0);
    let rejected = vec![result(None, Outcome::Rejected)];
    let after = record(store, &pulled, rejected, NextTry::At(t(40)), 31).await;
    assert_eq!(after.state, InboundState::Retryable, "a is still retryable");

    let again = claim(store, pull, 40).await;
    assert_eq!(again.claimed.len(), 1);
    let settled = claim(store, pull, 71).await;
    assert_eq!(
        settled.expired.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![event.id]
    );
    assert_eq!(settled.expired[0].state, InboundState::Retryable);
    let full = stored(store, source.id, event.id).await;
    let pull_forward = at(&full.forwards, None);
    assert_eq!(
        (pull_forward.outcome, pull_forward.attempts),
        (Outcome::Rejected, 1),
        "final, and not attempted again"
    );
}

/// A destination reported twice in one outcome counts one attempt, with its last report.
pub async fn a_destination_reported_twice_counts_one_attempt(store: &dyn Store) {
    let a = destination("https://a.example", false);
    let source = source_with(store, vec![a.clone()]).await;
    let event = claim_new(store, delivery(source.id, Some("e-1"), b"{}")).await;
    let claimed = claim(store, Consumer::Push, 20).await.claimed.remove(0);
    let results = vec![
        result(Some(a.id), Outcome::Retryable),
        result(Some(a.id), Outcome::Completed),
    ];
    let ended = record(store, &claimed, results, NextTry::At(t(100)), 21).await;
    assert_eq!(
        (ended.state, ended.next_attempt_at, ended.last_error),
        (InboundState::Completed, None, None)
    );
    let full = stored(store, source.id, event.id).await;
    assert_eq!(full.forwards.len(), 1);
    let forward = &full.forwards[0];
    assert_eq!(
        (forward.outcome, forward.attempts, forward.status),
        (Outcome::Completed, 1, Some(200))
    );
}

/// A pull claim takes nothing of a source that has destinations (vow's workers forward its
/// events), whatever the API checked before.
pub async fn a_pull_claim_takes_nothing_while_its_source_has_destinations(store: &dyn Store) {
    let source = source_with(store, vec![destination("https://a.example", false)]).await;
    let event = claim_new(store, delivery(source.id, Some("e-1"), b"{}")).await;
    assert!(claim(store, Consumer::Pull(source.id), 20)
        .await
        .claimed
        .is_empty());
    assert_eq!(
        stored(store, source.id, event.id).await.event.state,
        InboundState::Received
    );
    let pushed = claim(store, Consumer::Push, 20).await;
    assert_eq!(pushed.claimed.len(), 1);
}

/// Ordering binds versioned events only: an event of an entity without a version neither
/// waits for a versioned one being processed nor holds one back.
pub async fn events_without_a_version_neither_wait_for_nor_hold_back_their_entity(
    store: &dyn Store,
) {
    let source = source_with(store, vec![destination("https://a.example", false)]).await;
    let of_entity = |id: &str, version: Option<&str>, secs| NewInboundEvent {
        entity: Some("cus_a".into()),
        version: version.map(Into::into),
        now: t(secs),
        ..delivery(source.id, Some(id), id.as_bytes())
    };
    let plain = claim_new(store, of_entity("u1", None, 10)).await;
    assert_eq!(
        claim(store, Consumer::Push, 20).await.claimed[0].event.id,
        plain.id
    );
    let versioned = claim_new(store, of_entity("v1", Some("1"), 21)).await;
    let got = claim(store, Consumer::Push, 22).await;
    assert_eq!(
        got.claimed.iter().map(|c| c.event.id).collect::<Vec<_>>(),
        vec![versioned.id],
        "not held back by the unversioned event"
    );
    let later = claim_new(store, of_entity("u2", None, 23)).await;
    let got = claim(store, Consumer::Push, 24).await;
    assert_eq!(
        got.claimed.iter().map(|c| c.event.id).collect::<Vec<_>>(),
        vec![later.id],
        "not held back by the versioned event"
    );
}

/// The next time a push claim could take something is not that of an event waiting for its
/// busy entity but the end of the lease that keeps the entity busy (settling it may make work
/// due); an event without an entity is due when it arrives.
pub async fn next_due_waits_for_a_busy_entity_and_counts_lease_ends(store: &dyn Store) {
    let source = source_with(store, vec![destination("https://a.example", false)]).await;
    let of_entity = |id: &str, version: &str, secs| NewInboundEvent {
        entity: Some("cus_a".into()),
        version: Some(version.into()),
        now: t(secs),
        ..delivery(source.id, Some(id), id.as_bytes())
    };
    claim_new(store, of_entity("v1", "1", 10)).await;
    claim_new(store, of_entity("v2", "2", 11)).await;
    let got = claim(store, Consumer::Push, 12).await;
    assert_eq!(got.claimed.len(), 1, "one event of cus_a at a time");
    assert_eq!(got.claimed[0].lease_until, t(42));
    assert_eq!(store.next_inbound_due().await.unwrap(), Some(t(42)));
    claim_new(store, delivery(source.id, Some("plain"), b"{}")).await;
    assert_eq!(store.next_inbound_due().await.unwrap(), Some(t(10)));
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_inbound_recording {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            out_of_attempts_no_destination_stays_retryable_even_one_not_reported,
            a_dead_letter_names_the_error_that_dead_lettered_it,
            an_expired_pull_lease_leaves_a_final_outcome_final,
            a_destination_reported_twice_counts_one_attempt,
            a_pull_claim_takes_nothing_while_its_source_has_destinations,
            events_without_a_version_neither_wait_for_nor_hold_back_their_entity,
            next_due_waits_for_a_busy_entity_and_counts_lease_ends,
        );
    };
}
