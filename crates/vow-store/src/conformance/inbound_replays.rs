//! Cases about bulk replays of a source's dead letters
//! ([`crate::inbound::source_replay`]): what a dry run counts, what a replay requeues (by
//! received time, by destination, never an event being processed, never another source's),
//! and how its stats follow exactly its own forwards.

use vow_core::{InboundEventId, ReplayId, SourceId};

use super::inbound::{claim_new, delivery};
use super::inbound_work::{claim, destination, record, result, source_with};
use super::support::*;
use crate::inbound::processing::{Consumer, NextTry, Outcome};
use crate::inbound::source_replay::{SourceReplayFilter, SourceReplayStats, SourceReplayed};
use crate::inbound::{InboundEvent, InboundState, Source};
use crate::{InboundStore, Store};

/// An event of `source` received at `t(secs)`.
async fn received_at(store: &dyn InboundStore, source: &Source, secs: i64) -> InboundEvent {
    let mut new = delivery(source.id, None, b"{}");
    new.now = t(secs);
    claim_new(store, new).await
}

/// The state of `id` and the outcome of each of its forwards, by destination.
async fn stands(
    store: &dyn InboundStore,
    source: SourceId,
    id: InboundEventId,
) -> (InboundState, Vec<Outcome>) {
    let stored = store.get_inbound_event(source, id).await.unwrap().unwrap();
    let mut forwards = stored.forwards;
    forwards.sort_by_key(|f| f.destination.map(|d| d.to_string()));
    let outcomes = forwards.iter().map(|f| f.outcome).collect();
    (stored.event.state, outcomes)
}

async fn replay(
    store: &dyn InboundStore,
    source: &Source,
    id: ReplayId,
    filter: SourceReplayFilter,
    secs: i64,
) -> SourceReplayed {
    let replayed = store.replay_source_keyed(source.id, id, &filter, t(secs), None);
    replayed.await.expect("replay the source").0
}

/// A dry run counts the forwards a replay would requeue (and those it would skip, their event
/// being processed) and changes nothing; a replay requeues exactly those of the time range,
/// makes their events due with fresh attempts, leaves another source's dead letters dead, and
/// its stats follow its own forwards to the end: a forward a later replay takes is that one's.
pub async fn a_source_replay_requeues_its_dead_letters_and_counts_them_by_its_id(
    store: &dyn Store,
) {
    let (a, b) = (
        destination("https://a.example", false),
        destination("https://b.example", false),
    );
    let source = source_with(store, vec![a.clone(), b.clone()]).await;
    let other = source_with(store, vec![destination("https://c.example", false)]).await;
    let mut events = Vec::new();
    for secs in [10, 20, 30] {
        events.push(received_at(store, &source, secs).await);
    }
    let elsewhere = received_at(store, &other, 20).await;
    // Each of them: `a` out of attempts, `b` done; the other source's one destination too.
    for c in claim(store, Consumer::Push, 40).await.claimed {
        let results = c
            .pending
            .iter()
            .map(|d| {
                let ok = d.id == b.id;
                let outcome = if ok {
                    Outcome::Completed
                } else {
                    Outcome::Retryable
                };
                result(Some(d.id), outcome)
            })
            .collect();
        record(store, &c, results, NextTry::Exhausted, 41).await;
    }
    // One more, rejected at `a` and being forwarded again to `b`: skipped.
    let busy = received_at(store, &source, 45).await;
    let first = claim(store, Consumer::Push, 50).await.claimed.remove(0);
    let results = vec![
        result(Some(a.id), Outcome::Rejected),
        result(Some(b.id), Outcome::Retryable),
    ];
    record(store, &first, results, NextTry::At(t(51)), 50).await;
    let again = claim(store, Consumer::Push, 51).await.claimed;
    assert_eq!(
        again.iter().map(|c| c.event.id).collect::<Vec<_>>(),
        [busy.id]
    );
    // The outcomes sorted by name: which destination sorts first is the ids' business.
    let sorted = |(s, mut o): (InboundState, Vec<Outcome>)| {
        o.sort_by_key(|o| o.as_str());
        (s, o)
    };
    let dead = || {
        let outcomes = vec![Outcome::DeadLettered, Outcome::Completed];
        sorted((InboundState::DeadLettered, outcomes))
    };

    let everything = SourceReplayFilter::default();
    let counted = store
        .count_source_replay(source.id, &everything)
        .await
        .unwrap();
    assert_eq!(
        counted,
        SourceReplayed {
            requeued: 3,
            skipped: 1
        }
    );
    let only_b = SourceReplayFilter {
        destination: Some(b.id),
        ..everything
    };
    let counted = store.count_source_replay(source.id, &only_b).await.unwrap();
    assert_eq!(counted, SourceReplayed::default(), "b completed them all");
    for e in &events {
        assert_eq!(sorted(stands(store, source.id, e.id).await), dead());
    }

    // The events received in [20, 35): the second and the third.
    let range = SourceReplayFilter {
        since: Some(t(20)),
        until: Some(t(35)),
        destination: Some(a.id),
    };
    let first_replay = ReplayId::new();
    let replayed = replay(store, &source, first_replay, range, 60).await;
    assert_eq!(
        replayed,
        SourceReplayed {
            requeued: 2,
            skipped: 0
        }
    );
    assert_eq!(sorted(stands(store, source.id, events[0].id).await), dead());
    for e in &events[1..] {
        let stored = store
            .get_inbound_event(source.id, e.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                stored.event.state,
                stored.event.next_attempt_at,
                stored.event.attempts
            ),
            (InboundState::Retryable, Some(t(60)), 0)
        );
    }
    let stats = |id| store.source_replay_stats(source.id, id);
    assert_eq!(
        stats(first_replay).await.unwrap(),
        SourceReplayStats {
            pending: 2,
            ..Default::default()
        }
    );
    let foreign = store.source_replay_stats(other.id, first_replay).await;
    assert_eq!(foreign.unwrap(), SourceReplayStats::default());

    // Forwarded again: the second delivered, the third out of attempts once more.
    let claimed = claim(store, Consumer::Push, 60).await.claimed;
    let mut ids: Vec<_> = claimed.iter().map(|c| c.event.id).collect();
    ids.sort_by_key(|id| id.to_string());
    let mut want: Vec<_> = events[1..].iter().map(|e| e.id).collect();
    want.sort_by_key(|id| id.to_string());
    assert_eq!(ids, want, "only the replayed events are due");
    assert_eq!(
        stats(first_replay).await.unwrap(),
        SourceReplayStats {
            processing: 2,
            ..Default::default()
        }
    );
    for c in &claimed {
        assert_eq!(c.pending.len(), 1, "only `a` is owed it");
        let outcome = if c.event.id == events[1].id {
            Outcome::Completed
        } else {
            Outcome::Retryable
        };
        record(
            store,
            c,
            vec![result(Some(a.id), outcome)],
            NextTry::Exhausted,
            61,
        )
        .await;
    }
    assert_eq!(
        stats(first_replay).await.unwrap(),
        SourceReplayStats {
            completed: 1,
            dead_lettered: 1,
            ..Default::default()
        }
    );

    // Everything of the source: the first and the third; the busy one skipped.
    let second_replay = ReplayId::new();
    let replayed = replay(store, &source, second_replay, everything, 70).await;
    assert_eq!(
        replayed,
        SourceReplayed {
            requeued: 2,
            skipped: 1
        }
    );
    assert_eq!(
        stats(first_replay).await.unwrap(),
        SourceReplayStats {
            completed: 1,
            ..Default::default()
        },
        "the third is the second replay's now"
    );
    assert_eq!(stats(second_replay).await.unwrap().pending, 2);
    let (state, _) = stands(store, source.id, busy.id).await;
    assert_eq!(state, InboundState::Processing, "a held lease is untouched");
    assert_eq!(
        stands(store, other.id, elsewhere.id).await,
        (InboundState::DeadLettered, vec![Outcome::DeadLettered]),
        "another source's dead letters stay dead"
    );
    let nothing = store.count_source_replay(other.id, &everything).await;
    assert_eq!(nothing.unwrap().requeued, 1, "and are its own to replay");

    // A single-event replay takes a forward from the bulk replay's count.
    let r = store
        .replay_inbound(source.id, events[2].id, None, t(80))
        .await;
    assert!(r.is_err(), "nothing is dead-lettered there now: {r:?}");
    let third = claim(store, Consumer::Push, 80).await.claimed;
    for c in &third {
        let results = c
            .pending
            .iter()
            .map(|d| result(Some(d.id), Outcome::Retryable))
            .collect();
        record(store, c, results, NextTry::Exhausted, 81).await;
    }
    assert_eq!(stats(second_replay).await.unwrap().dead_lettered, 2);
    store
        .replay_inbound(source.id, events[2].id, Some(a.id), t(90))
        .await
        .unwrap();
    assert_eq!(
        stats(second_replay).await.unwrap(),
        SourceReplayStats {
            dead_lettered: 1,
            ..Default::default()
        }
    );
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_inbound_replays {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_source_replay_requeues_its_dead_letters_and_counts_them_by_its_id,
        );
    };
}
