//! Processing inbound events on PostgreSQL, beyond the shared suite: two processes claiming at
//! once (never one event twice, never two events of one entity at a time, versions in order),
//! and the paths the suite leaves out (an expired idempotent lease out of attempts, an
//! exhausted outcome with an unreported retryable destination, `next_inbound_due` around a
//! busy entity, a pull claim on a source with destinations).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use vow_core::{DestinationId, InboundEventId, SourceId};
use vow_store::inbound::processing::{
    ClaimedEvent, Consumer, DestinationResult, NextTry, Outcome, WorkOutcome, WorkRecorded,
    WorkRequest,
};
use vow_store::inbound::{
    Claim, Destination, InboundState, NewInboundEvent, NewSource, Source, SourceFields,
};
use vow_store::prelude::*;
use vow_store_postgres::testing::fresh_store;
use vow_store_postgres::PgStore;

use crate::support::now;

fn destination(idempotent: bool) -> Destination {
    Destination {
        id: DestinationId::new(),
        url: "https://dest.example/hook".into(),
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
        idempotent,
    }
}

/// A source (deliveries ordered by `/v` within `/id`) with `destinations`.
pub(crate) async fn source(store: &PgStore, destinations: Vec<Destination>) -> Source {
    let fields = SourceFields {
        description: "work".into(),
        scheme: "github".into(),
        hmac: None,
        secrets: vec!["s".into()],
        tolerance_secs: 300,
        replay_window_secs: None,
        event_id: None,
        account: None,
        version_pointer: Some("/v".into()),
        entity_pointer: Some("/id".into()),
        destinations,
    };
    let new = NewSource {
        id: SourceId::new(),
        token: format!("token-{}", SourceId::new()),
        fields,
        now: now(),
    };
    store.create_source(new).await.unwrap()
}

/// A delivery to `source`, received at `at`, ordered by `(entity, version)` when given.
async fn receive(
    store: &PgStore,
    source: SourceId,
    key: &str,
    ordered: Option<(&str, &str)>,
    at: DateTime<Utc>,
) -> InboundEventId {
    let new = NewInboundEvent {
        id: InboundEventId::new(),
        source_id: source,
        account: String::new(),
        event_id: Some(key.into()),
        payload: key.as_bytes().to_vec(),
        headers: Vec::new(),
        sha256: format!("digest-{key}"),
        version: ordered.map(|(_, v)| v.to_string()),
        entity: ordered.map(|(e, _)| e.to_string()),
        replay_guard: None,
        now: at,
    };
    match store.claim_inbound(new).await.unwrap() {
        Claim::Received(e) => e.id,
        other => panic!("expected a received row, got {other:?}"),
    }
}

fn request(consumer: Consumer, at: DateTime<Utc>, limit: usize, max: u32) -> WorkRequest {
    WorkRequest {
        now: at,
        lease: Duration::seconds(30),
        limit,
        consumer,
        max_attempts: max,
    }
}

fn result(destination: Option<DestinationId>, outcome: Outcome) -> DestinationResult {
    DestinationResult {
        destination,
        outcome,
        status: None,
        error: (outcome != Outcome::Completed).then(|| format!("{} there", outcome.as_str())),
    }
}

async fn record(
    store: &PgStore,
    claimed: &ClaimedEvent,
    results: Vec<DestinationResult>,
    next: NextTry,
    at: DateTime<Utc>,
) -> vow_store::inbound::InboundEvent {
    let outcome = WorkOutcome {
        event: claimed.event.id,
        lease: claimed.lease.clone(),
        results,
        next,
        now: at,
    };
    match store.record_inbound_work(outcome).await.unwrap() {
        WorkRecorded::Stored(e) => *e,
        WorkRecorded::LeaseLost => panic!("lease lost"),
    }
}

async fn full(
    store: &PgStore,
    source: SourceId,
    id: InboundEventId,
) -> vow_store::inbound::StoredInbound {
    store.get_inbound_event(source, id).await.unwrap().unwrap()
}

/// What two draining processes share: the entities in flight and the versions claimed, in the
/// order they were claimed.
#[derive(Default)]
struct Log {
    in_flight: HashSet<String>,
    claimed: Vec<(InboundEventId, Option<(String, String)>)>,
}

/// Claims until a claim comes back empty, completing every claimed event.
async fn drain(store: PgStore, at: DateTime<Utc>, log: Arc<Mutex<Log>>) {
    loop {
        let got = store
            .claim_inbound_work(&request(Consumer::Push, at, 3, 5))
            .await
            .unwrap();
        if got.claimed.is_empty() && got.superseded.is_empty() {
            return;
        }
        for c in &got.claimed {
            let ordered = c.event.entity.clone().zip(c.event.version.clone());
            let mut log = log.lock().unwrap();
            if let Some((entity, _)) = &ordered {
                assert!(
                    log.in_flight.insert(entity.clone()),
                    "two events of {entity} in flight"
                );
            }
            log.claimed.push((c.event.id, ordered));
        }
        tokio::task::yield_now().await;
        for c in &got.claimed {
            // Out of flight before the record commits: until then the entity stays busy in
            // the database, so nobody can claim it in between.
            if let Some(entity) = &c.event.entity {
                log.lock().unwrap().in_flight.remove(entity);
            }
            let results = c
                .pending
                .iter()
                .map(|d| result(Some(d.id), Outcome::Completed))
                .collect();
            record(&store, c, results, NextTry::Exhausted, at).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_claiming_at_once_keep_one_event_per_entity_in_version_order() {
    let (first, url) = fresh_store().await;
    let second = PgStore::connect(&url, 4).await.unwrap();
    let src = source(&first, vec![destination(false)]).await;
    let t0 = now();
    let mut all = Vec::new();
    // 6 entities, 8 versions each, arriving out of order; and 12 events without a version.
    for n in 0..8 {
        for e in 0..6 {
            let version = ((n * 5) % 8).to_string();
            let key = format!("e{e}-v{version}");
            let at = t0 + Duration::milliseconds(n * 6 + e);
            let entity = format!("ent-{e}");
            all.push(receive(&first, src.id, &key, Some((&entity, &version)), at).await);
        }
    }
    for n in 0..12 {
        all.push(receive(&first, src.id, &format!("plain-{n}"), None, t0).await);
    }
    let at = t0 + Duration::seconds(1);
    let log = Arc::new(Mutex::new(Log::default()));
    let (one, two) = tokio::join!(
        tokio::spawn(drain(first.clone(), at, log.clone())),
        tokio::spawn(drain(second.clone(), at, log.clone()))
    );
    one.unwrap();
    two.unwrap();

    let claimed = std::mem::take(&mut log.lock().unwrap().claimed);
    let mut seen = HashSet::new();
    let mut last: HashMap<&str, i64> = HashMap::new();
    for (id, ordered) in &claimed {
        assert!(seen.insert(*id), "{id} was claimed twice");
        if let Some((entity, version)) = ordered {
            let v: i64 = version.parse().unwrap();
            let before = last.insert(entity, v);
            assert!(
                before.is_none_or(|b| b < v),
                "{entity}: {before:?} then {v}"
            );
        }
    }
    let mut states: HashMap<InboundState, usize> = HashMap::new();
    for id in &all {
        *states
            .entry(full(&first, src.id, *id).await.event.state)
            .or_default() += 1;
    }
    let completed = states.get(&InboundState::Completed).copied().unwrap_or(0);
    let superseded = states.get(&InboundState::Superseded).copied().unwrap_or(0);
    assert_eq!(completed + superseded, all.len(), "{states:?}");
    assert_eq!(completed, claimed.len());
    // Each entity ends at its newest version.
    assert_eq!(last.len(), 6);
    assert!(last.values().all(|&v| v == 7), "{last:?}");
}

#[tokio::test]
async fn an_expired_lease_of_an_idempotent_destination_out_of_attempts_is_dead_lettered() {
    let store = fresh_store().await.0;
    let (safe, plain) = (destination(true), destination(false));
    let src = source(&store, vec![safe.clone(), plain.clone()]).await;
    let t0 = now();
    let id = receive(&store, src.id, "e-1", None, t0).await;
    let claimed = store
        .claim_inbound_work(&request(Consumer::Push, t0, 10, 1))
        .await
        .unwrap();
    assert_eq!(claimed.claimed.len(), 1);
    // The worker stalls past its lease.
    let later = store
        .claim_inbound_work(&request(Consumer::Push, t0 + Duration::seconds(31), 10, 1))
        .await
        .unwrap();
    assert!(later.claimed.is_empty());
    assert_eq!(later.expired.len(), 1);
    let event = &later.expired[0];
    assert_eq!(
        (event.id, event.state, event.next_attempt_at),
        (id, InboundState::Uncertain, None)
    );
    let stored = full(&store, src.id, id).await;
    let outcome = |d: DestinationId| {
        let f = stored.forwards.iter().find(|f| f.destination == Some(d));
        f.map(|f| (f.outcome, f.attempts))
    };
    assert_eq!(outcome(safe.id), Some((Outcome::DeadLettered, 1)));
    assert_eq!(outcome(plain.id), Some((Outcome::Uncertain, 1)));
}

#[tokio::test]
async fn an_exhausted_outcome_dead_letters_a_retryable_destination_left_unreported() {
    let store = fresh_store().await.0;
    let (a, b) = (destination(false), destination(false));
    let src = source(&store, vec![a.clone(), b.clone()]).await;
    let t0 = now();
    let id = receive(&store, src.id, "e-1", None, t0).await;
    let first = store
        .claim_inbound_work(&request(Consumer::Push, t0, 10, 5))
        .await
        .unwrap()
        .claimed
        .remove(0);
    let results = vec![
        result(Some(a.id), Outcome::Retryable),
        result(Some(b.id), Outcome::Retryable),
    ];
    let retry_at = t0 + Duration::seconds(5);
    record(&store, &first, results, NextTry::At(retry_at), t0).await;
    let second = store
        .claim_inbound_work(&request(Consumer::Push, retry_at, 10, 5))
        .await
        .unwrap()
        .claimed
        .remove(0);
    assert_eq!(second.pending.len(), 2);
    // Only a is reported; the worker gives up on the event.
    let done = record(
        &store,
        &second,
        vec![result(Some(a.id), Outcome::Completed)],
        NextTry::Exhausted,
        retry_at,
    )
    .await;
    // The event names the error that dead-lettered it: b's, stored by the first attempt
    // (ADR 8, "Recording an attempt"; it named none before issue 14).
    assert_eq!(
        (done.state, done.next_attempt_at, done.last_error.as_deref()),
        (InboundState::DeadLettered, None, Some("retryable there"))
    );
    let stored = full(&store, src.id, id).await;
    let b_forward = stored.forwards.iter().find(|f| f.destination == Some(b.id));
    assert_eq!(
        b_forward.map(|f| (f.outcome, f.attempts)),
        Some((Outcome::DeadLettered, 1))
    );
}

#[tokio::test]
async fn next_due_skips_events_waiting_for_a_busy_entity_and_counts_lease_ends() {
    let store = fresh_store().await.0;
    let src = source(&store, vec![destination(false)]).await;
    let t0 = now();
    receive(&store, src.id, "v1", Some(("cus_a", "1")), t0).await;
    receive(
        &store,
        src.id,
        "v2",
        Some(("cus_a", "2")),
        t0 + Duration::seconds(1),
    )
    .await;
    let at = t0 + Duration::seconds(2);
    let got = store
        .claim_inbound_work(&request(Consumer::Push, at, 10, 5))
        .await
        .unwrap();
    assert_eq!(got.claimed.len(), 1);
    // v2 is due, but cus_a is busy until v1's lease ends.
    assert_eq!(
        store.next_inbound_due().await.unwrap(),
        Some(got.claimed[0].lease_until)
    );
    receive(&store, src.id, "plain", None, t0 + Duration::seconds(3)).await;
    assert_eq!(
        store.next_inbound_due().await.unwrap(),
        Some(t0 + Duration::seconds(3))
    );
}

#[tokio::test]
async fn a_pull_claim_leaves_a_source_with_destinations_to_the_workers() {
    let store = fresh_store().await.0;
    let src = source(&store, vec![destination(false)]).await;
    let t0 = now();
    receive(&store, src.id, "e-1", None, t0).await;
    let pulled = store
        .claim_inbound_work(&request(Consumer::Pull(src.id), t0, 10, 5))
        .await
        .unwrap();
    assert!(pulled.claimed.is_empty());
    let pushed = store
        .claim_inbound_work(&request(Consumer::Push, t0, 10, 5))
        .await
        .unwrap();
    assert_eq!(pushed.claimed.len(), 1);
}

/// Another process claims an event of `cus_a` (by hand, on a raw connection: it takes the
/// entity's row, makes the event `processing`, moves the mark) while a claim of ours is
/// picking a later event of it: ours waits for the entity's row, then finds it busy and takes
/// nothing. `marked`: whether the entity had a mark before (else both insert it).
async fn a_claim_racing_another_for_one_entity_waits_for_it(marked: bool) {
    let (store, url) = fresh_store().await;
    let src = source(&store, vec![destination(false)]).await;
    let t0 = now();
    let at = t0 + Duration::seconds(10);
    if marked {
        receive(&store, src.id, "v1", Some(("cus_a", "1")), t0).await;
        let first = store
            .claim_inbound_work(&request(Consumer::Push, at, 10, 5))
            .await
            .unwrap()
            .claimed
            .remove(0);
        let ok = vec![result(Some(first.pending[0].id), Outcome::Completed)];
        record(&store, &first, ok, NextTry::Exhausted, at).await;
    }
    let v2 = receive(&store, src.id, "v2", Some(("cus_a", "2")), t0).await;
    let v3 = receive(&store, src.id, "v3", Some(("cus_a", "3")), t0).await;

    let mut other = crate::support::raw(&url).await;
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query(
        "INSERT INTO inbound_entities (source_id, entity, version, event_id, updated_at)
         VALUES ($1, 'cus_a', '2', $2, now())
         ON CONFLICT (source_id, entity) DO UPDATE SET version = '2', event_id = $2",
    )
    .bind(src.id.to_string())
    .bind(v2.to_string())
    .execute(&mut other)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE inbound_events SET state = 'processing', lease_token = 'other',
             lease_until = $2, claimed_by = 'push', attempts = 1
         WHERE id = $1",
    )
    .bind(v2.to_string())
    .bind(at + Duration::hours(1))
    .execute(&mut other)
    .await
    .unwrap();

    let ours = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .claim_inbound_work(&request(Consumer::Push, at, 10, 5))
                .await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!ours.is_finished(), "the claim should wait for cus_a's row");
    sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    let got = ours.await.unwrap().unwrap();
    assert!(
        got.claimed.is_empty() && got.superseded.is_empty(),
        "claimed {:?}, superseded {:?}",
        got.claimed.iter().map(|c| c.event.id).collect::<Vec<_>>(),
        got.superseded.iter().map(|e| e.id).collect::<Vec<_>>()
    );
    let v3_now = full(&store, src.id, v3).await.event;
    assert_eq!(v3_now.state, InboundState::Received);
}

#[tokio::test]
async fn a_claim_racing_another_for_a_marked_entity_waits_and_finds_it_busy() {
    a_claim_racing_another_for_one_entity_waits_for_it(true).await;
}

#[tokio::test]
async fn a_claim_racing_another_for_a_new_entity_waits_and_finds_it_busy() {
    a_claim_racing_another_for_one_entity_waits_for_it(false).await;
}
