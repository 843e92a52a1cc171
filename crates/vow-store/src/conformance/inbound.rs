//! Cases about inbound webhooks ([`InboundStore`]): sources, the atomic claim (one row among
//! concurrent claims of an id, duplicates, quarantine, id-less events), operators' decisions on
//! quarantined events, rejections, and retention of raw payloads.

use vow_core::{DestinationId, InboundEventId, RejectionId, SourceId};
use vow_idempotency::IdempotencyKey;

use super::support::*;
use crate::idempotency::{Begun, Completion, Fingerprint, Render, Scope, Settings, StoredResponse};
use crate::inbound::{
    Claim, Destination, InboundEvent, InboundFilter, InboundState, Locator, NewInboundEvent,
    NewRejection, NewSource, Source, SourceFields,
};
use crate::{InboundStore, Order, Seek, Store, StoreError};

/// GitHub-like fields with one secret and one destination.
pub(super) fn fields(description: &str) -> SourceFields {
    SourceFields {
        description: description.to_string(),
        scheme: "github".into(),
        hmac: None,
        secrets: strings(&["It's a Secret to Everybody"]),
        tolerance_secs: 300,
        replay_window_secs: None,
        event_id: None,
        account: Some(Locator::Header("x-github-hook-id".into())),
        version_pointer: Some("/version".into()),
        entity_pointer: None,
        destinations: vec![Destination {
            id: DestinationId::new(),
            url: "https://dest.example/hook".into(),
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            idempotent: true,
        }],
    }
}

pub(super) fn new_source(description: &str) -> NewSource {
    NewSource {
        id: SourceId::new(),
        token: format!("token-{}", SourceId::new()),
        fields: fields(description),
        now: t(0),
    }
}

pub(super) async fn create_source(store: &dyn InboundStore) -> Source {
    store
        .create_source(new_source("GitHub"))
        .await
        .expect("create a source")
}

/// A delivery of `payload` with `event_id` to `source`, at `t(10)`.
pub(super) fn delivery(
    source: SourceId,
    event_id: Option<&str>,
    payload: &[u8],
) -> NewInboundEvent {
    NewInboundEvent {
        id: InboundEventId::new(),
        source_id: source,
        account: "hook-1".into(),
        event_id: event_id.map(str::to_string),
        payload: payload.to_vec(),
        headers: vec![("x-github-event".into(), "push".into())],
        sha256: format!("{:x}", fake_digest(payload)),
        version: None,
        entity: None,
        replay_guard: None,
        now: t(10),
    }
}

/// A stand-in digest: backends compare it as text and never compute it.
pub(super) fn fake_digest(payload: &[u8]) -> u128 {
    payload.iter().fold(0xcbf2_9ce4_8422_2325_u128, |h, b| {
        (h ^ u128::from(*b)).wrapping_mul(0x1b3)
    })
}

pub(super) async fn events(
    store: &dyn InboundStore,
    source: SourceId,
    state: Option<InboundState>,
) -> usize {
    let filter = InboundFilter { state };
    let listed = store.list_inbound_events(source, &filter, &all(1000)).await;
    listed.expect("list inbound events").len()
}

/// Claims `new`, which must become a new received row.
pub(super) async fn claim_new(store: &dyn InboundStore, new: NewInboundEvent) -> InboundEvent {
    received(store.claim_inbound(new).await.expect("claim"))
}

#[track_caller]
pub(super) fn received(claim: Claim) -> InboundEvent {
    match claim {
        Claim::Received(event) => event,
        other => panic!("expected a new received row, got {other:?}"),
    }
}

/// A source reads back by id and by token, updates replace its fields but not its token, and
/// deleting it takes its events and rejections along.
pub async fn a_source_round_trips_updates_and_deletes_with_its_events(store: &dyn Store) {
    let new = new_source("GitHub");
    let created = store.create_source(new.clone()).await.unwrap();
    assert_eq!((created.id, &created.fields), (new.id, &new.fields));
    assert_eq!(created.created_at, t(0));
    assert_eq!(
        store.get_source(new.id).await.unwrap(),
        Some(created.clone())
    );
    let by_token = store.get_source_by_token(&new.token).await.unwrap();
    assert_eq!(by_token, Some(created.clone()));
    assert_eq!(store.get_source_by_token("nope").await.unwrap(), None);
    let taken = NewSource {
        id: SourceId::new(),
        ..new.clone()
    };
    assert!(matches!(
        store.create_source(taken).await,
        Err(StoreError::Conflict(_))
    ));

    let changed = SourceFields {
        scheme: "stripe".into(),
        secrets: strings(&["whsec_new", "whsec_old"]),
        event_id: Some(Locator::Pointer("/id".into())),
        destinations: Vec::new(),
        ..fields("Stripe now")
    };
    let updated = store
        .update_source(new.id, changed.clone(), t(20))
        .await
        .unwrap();
    assert_eq!((&updated.fields, &updated.token), (&changed, &new.token));
    assert_eq!((updated.created_at, updated.updated_at), (t(0), t(20)));
    assert_eq!(store.get_source(new.id).await.unwrap(), Some(updated));
    let r = store.update_source(SourceId::new(), changed, t(20)).await;
    assert_not_found(r, "source");

    store
        .claim_inbound(delivery(new.id, Some("evt-1"), b"{}"))
        .await
        .unwrap();
    store
        .record_rejection(rejection(new.id, 0), KEEP)
        .await
        .unwrap();
    store.delete_source(new.id).await.unwrap();
    assert_eq!(store.get_source(new.id).await.unwrap(), None);
    assert_eq!(events(store, new.id, None).await, 0);
    assert!(store
        .list_rejections(new.id, &all(10))
        .await
        .unwrap()
        .is_empty());
    assert_not_found(store.delete_source(new.id).await, "source");
    let gone = store.claim_inbound(delivery(new.id, Some("evt-2"), b"{}"));
    assert_not_found(gone.await, "source");
}

/// Sources are listed by id, a page at a time, in both directions.
pub async fn sources_page_through_in_both_directions_without_gaps(store: &dyn Store) {
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(create_source_named(store, &format!("s{i}")).await);
    }
    ids.sort();
    assert_pages(&ids, |seek| async move {
        let rows = store.list_sources(&seek).await.unwrap();
        rows.iter().map(|s| s.id.to_string()).collect()
    })
    .await;
}

async fn create_source_named(store: &dyn InboundStore, description: &str) -> String {
    let created = store.create_source(new_source(description)).await.unwrap();
    created.id.to_string()
}

/// Fifty concurrent claims of one event id with one payload store exactly one row; the others
/// are duplicates of it, and it counts them.
pub async fn concurrent_claims_of_one_event_id_store_exactly_one_row(store: &dyn Store) {
    let source = create_source(store).await;
    let claims = (0..50)
        .map(|_| store.claim_inbound(delivery(source.id, Some("evt-1"), b"{\"a\":1}")))
        .collect();
    let outcomes = join_all(claims).await;
    let mut first = Vec::new();
    let mut repeated = Vec::new();
    for outcome in outcomes {
        match outcome.expect("every claim succeeds") {
            Claim::Received(event) => first.push(event),
            Claim::Duplicate(event) => repeated.push(event),
            other => panic!("nothing differs, so nothing is quarantined: {other:?}"),
        }
    }
    assert_eq!(first.len(), 1, "exactly one claim wins");
    assert_eq!(repeated.len(), 49);
    assert!(repeated.iter().all(|e| e.id == first[0].id));
    assert_eq!(events(store, source.id, None).await, 1, "one stored row");
    let stored = store.get_inbound_event(source.id, first[0].id).await;
    let stored = stored.unwrap().expect("the row");
    assert_eq!(stored.event.duplicates, 49);
    assert_eq!(stored.event.state, InboundState::Received);
}

/// The same id with another payload is stored as its own quarantined row pointing at the
/// claim; that payload again is a duplicate of the quarantined row; another account or another
/// source may use the id freely.
pub async fn a_reused_id_with_another_payload_is_quarantined_once(store: &dyn Store) {
    let source = create_source(store).await;
    let claim = claim_new(store, delivery(source.id, Some("evt-1"), b"one")).await;
    let changed = delivery(source.id, Some("evt-1"), b"two");
    let quarantined = match store.claim_inbound(changed.clone()).await.unwrap() {
        Claim::Quarantined(event) => event,
        other => panic!("expected quarantine, got {other:?}"),
    };
    assert_eq!(quarantined.id, changed.id);
    assert_eq!(quarantined.state, InboundState::Quarantined);
    assert_eq!(quarantined.conflicts_with, Some(claim.id));
    assert_eq!(quarantined.sha256, changed.sha256);
    assert_eq!(
        quarantined.next_attempt_at, None,
        "a quarantined row is never due until an operator releases it"
    );
    assert_eq!(
        claim.next_attempt_at,
        Some(claim.received_at),
        "a claim is due at once"
    );
    let stored = store.get_inbound_event(source.id, quarantined.id).await;
    let stored = stored.unwrap().unwrap();
    assert_eq!(stored.event.next_attempt_at, None);
    let content = stored.content.unwrap();
    assert_eq!(content.payload, b"two", "the new payload is kept, durable");

    let again = delivery(source.id, Some("evt-1"), b"two");
    match store.claim_inbound(again).await.unwrap() {
        Claim::Duplicate(event) => assert_eq!(event.id, quarantined.id),
        other => panic!("expected a duplicate of the quarantined row, got {other:?}"),
    }
    let original = delivery(source.id, Some("evt-1"), b"one");
    match store.claim_inbound(original).await.unwrap() {
        Claim::Duplicate(event) => assert_eq!((event.id, event.duplicates), (claim.id, 1)),
        other => panic!("expected a duplicate of the claim, got {other:?}"),
    }
    assert_eq!(events(store, source.id, None).await, 2);
    let only = |state| events(store, source.id, Some(state));
    assert_eq!(only(InboundState::Quarantined).await, 1);
    assert_eq!(only(InboundState::Received).await, 1);

    let other_account = NewInboundEvent {
        account: "hook-2".into(),
        ..delivery(source.id, Some("evt-1"), b"three")
    };
    claim_new(store, other_account).await;
    let elsewhere = create_source(store).await;
    claim_new(store, delivery(elsewhere.id, Some("evt-1"), b"two")).await;
}

/// Deliveries without an event id are each stored, identical bodies included: a body hash is
/// not an identity.
pub async fn events_without_an_id_are_never_deduplicated(store: &dyn Store) {
    let source = create_source(store).await;
    let claims = (0..3)
        .map(|_| store.claim_inbound(delivery(source.id, None, b"same")))
        .collect();
    for outcome in join_all(claims).await {
        let event = received(outcome.unwrap());
        assert_eq!(event.event_id, None);
    }
    assert_eq!(events(store, source.id, None).await, 3);
}

/// An event's payload bytes (not UTF-8 here) and headers come back exactly; the listing leaves
/// content out and pages newest first.
pub async fn an_event_keeps_its_exact_bytes_headers_and_pointers(store: &dyn Store) {
    let source = create_source(store).await;
    let payload = [0xff, 0x00, b'{', 0xfe];
    let new = NewInboundEvent {
        headers: vec![
            ("user-agent".into(), "GitHub-Hookshot/1".into()),
            ("x-github-event".into(), "push".into()),
        ],
        version: Some("7".into()),
        entity: Some("repo-1".into()),
        ..delivery(source.id, Some("evt-1"), &payload)
    };
    let event = claim_new(store, new.clone()).await;
    assert_eq!(
        (event.size, event.received_at, event.updated_at),
        (4, t(10), t(10))
    );
    assert_eq!(
        (event.version.as_deref(), event.entity.as_deref()),
        (Some("7"), Some("repo-1"))
    );
    let stored = store.get_inbound_event(source.id, event.id).await.unwrap();
    let stored = stored.expect("stored");
    assert_eq!(stored.event, event);
    let content = stored.content.expect("content");
    assert_eq!(
        (content.payload, content.headers),
        (payload.to_vec(), new.headers)
    );
    let elsewhere = create_source(store).await;
    assert_eq!(
        store
            .get_inbound_event(elsewhere.id, event.id)
            .await
            .unwrap(),
        None
    );

    let later = claim_new(store, delivery(source.id, Some("evt-2"), b"{}")).await;
    let listed = store
        .list_inbound_events(source.id, &InboundFilter::default(), &all(10))
        .await
        .unwrap();
    assert_eq!(listed, vec![later, event]);
}

/// Releasing a quarantined event makes it `received`, discarding makes it `discarded`; either
/// happens once, and only to a quarantined event.
pub async fn a_quarantined_event_is_released_or_discarded_once(store: &dyn Store) {
    let source = create_source(store).await;
    let claim = claim_new(store, delivery(source.id, Some("evt-1"), b"one")).await;
    let mut quarantined = Vec::new();
    for body in [&b"two"[..], b"three"] {
        match store
            .claim_inbound(delivery(source.id, Some("evt-1"), body))
            .await
        {
            Ok(Claim::Quarantined(event)) => quarantined.push(event.id),
            other => panic!("expected quarantine, got {other:?}"),
        }
    }
    let resolve = |id, to| store.resolve_quarantined(source.id, id, to, t(30));
    let released = resolve(quarantined[0], InboundState::Received)
        .await
        .unwrap();
    assert_eq!(
        (released.state, released.updated_at),
        (InboundState::Received, t(30))
    );
    let discarded = resolve(quarantined[1], InboundState::Discarded)
        .await
        .unwrap();
    assert_eq!(discarded.state, InboundState::Discarded);
    for id in [quarantined[0], quarantined[1], claim.id] {
        let again = resolve(id, InboundState::Discarded).await;
        assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    }
    assert_not_found(
        resolve(InboundEventId::new(), InboundState::Received).await,
        "inbound event",
    );
    let only = |state| events(store, source.id, Some(state));
    assert_eq!(only(InboundState::Received).await, 2);
    assert_eq!(only(InboundState::Discarded).await, 1);
    assert_eq!(only(InboundState::Quarantined).await, 0);
}

/// Room in the rejection log for everything these cases record.
const KEEP: u32 = 1000;

fn rejection(source: SourceId, secs: i64) -> NewRejection {
    NewRejection {
        id: RejectionId::new(),
        source_id: source,
        reason: "signature_mismatch".into(),
        status: 401,
        body_size: 42,
        now: t(secs),
    }
}

/// Rejections are recorded as given and listed newest first; one for a missing source is
/// `NotFound`.
pub async fn rejections_are_recorded_and_listed_per_source(store: &dyn Store) {
    let source = create_source(store).await;
    let other = create_source(store).await;
    let first = rejection(source.id, 1);
    let second = NewRejection {
        reason: "timestamp_too_old".into(),
        ..rejection(source.id, 2)
    };
    for r in [&first, &second, &rejection(other.id, 3)] {
        store.record_rejection(r.clone(), KEEP).await.unwrap();
    }
    let listed = store.list_rejections(source.id, &all(10)).await.unwrap();
    assert_eq!(listed, vec![second, first]);
    let missing = store
        .record_rejection(rejection(SourceId::new(), 4), KEEP)
        .await;
    assert_not_found(missing, "source");
}

/// Retention removes old payloads and headers and old rejections, a batch at a time, but keeps
/// the events, so an old id still deduplicates.
pub async fn purging_removes_old_content_but_keeps_the_claims(store: &dyn Store) {
    let source = create_source(store).await;
    let mut old = Vec::new();
    for i in 0..3 {
        let new = NewInboundEvent {
            now: t(i),
            ..delivery(source.id, Some(&format!("old-{i}")), b"old")
        };
        old.push(claim_new(store, new).await.id);
        store
            .record_rejection(rejection(source.id, i), KEEP)
            .await
            .unwrap();
    }
    let recent = claim_new(store, delivery(source.id, Some("new"), b"new")).await;
    store
        .record_rejection(rejection(source.id, 10), KEEP)
        .await
        .unwrap();

    assert_eq!(
        store.purge_inbound(t(5), 2).await.unwrap(),
        4,
        "two of each"
    );
    assert_eq!(store.purge_inbound(t(5), 2).await.unwrap(), 2);
    assert_eq!(store.purge_inbound(t(5), 2).await.unwrap(), 0);
    for id in old {
        let stored = store.get_inbound_event(source.id, id).await.unwrap();
        assert_eq!(stored.expect("the row stays").content, None);
    }
    let kept = store.get_inbound_event(source.id, recent.id).await.unwrap();
    assert!(kept.unwrap().content.is_some());
    let rejections = store.list_rejections(source.id, &all(10)).await.unwrap();
    assert_eq!(rejections.len(), 1);
    let repeat = delivery(source.id, Some("old-0"), b"old");
    assert!(matches!(
        store.claim_inbound(repeat).await.unwrap(),
        Claim::Duplicate(_)
    ));
}

/// A source created through [`crate::inbound::Sources::create_source_keyed`] commits with its
/// idempotency record; a fenced
/// create writes nothing.
pub async fn an_idempotent_source_create_commits_with_its_record(store: &dyn Store) {
    let scope = Scope {
        principal: "admin".into(),
        application: None,
        method: "POST".into(),
        route: "/api/v1/source".into(),
        key: IdempotencyKey::parse("source-1").unwrap(),
    };
    let body = r#"{"scheme":"github"}"#;
    let fingerprint = Fingerprint::of("POST", "/api/v1/source", body.as_bytes());
    let begun = store
        .begin_idempotent(&scope, &fingerprint, body, t(5), &Settings::default())
        .await;
    let Ok(Begun::Owner(token)) = begun else {
        panic!("expected to own the record, got {begun:?}");
    };
    let completion = |token| Completion {
        scope: scope.clone(),
        token,
        fresh: None,
        now: t(5),
        settings: Settings::default(),
        render: Render::From(Box::new(|written: &Source| StoredResponse {
            status: 201,
            headers: Vec::new(),
            body: Vec::new(),
            resource: Some(written.id.to_string()),
        })),
    };
    let new = new_source("GitHub");
    let applied = store
        .create_source_keyed(new.clone(), Some(completion(token.clone())))
        .await
        .unwrap();
    match applied {
        (source, Some(response)) => {
            assert_eq!(source.id, new.id);
            assert_eq!(response.resource, Some(new.id.to_string()));
        }
        other => panic!("expected the source and its stored response, got {other:?}"),
    }
    assert!(store.get_source(new.id).await.unwrap().is_some());

    let fenced = new_source("never");
    let stale = crate::idempotency::LeaseToken("not-the-owner".into());
    let r = store
        .create_source_keyed(fenced.clone(), Some(completion(stale)))
        .await;
    assert!(matches!(r, Err(StoreError::Fenced)), "{r:?}");
    assert_eq!(store.get_source(fenced.id).await.unwrap(), None);
    let seek = Seek::for_iterator(None, Order::Ascending, 10);
    assert_eq!(store.list_sources(&seek).await.unwrap().len(), 1);
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_inbound {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_source_round_trips_updates_and_deletes_with_its_events,
            sources_page_through_in_both_directions_without_gaps,
            concurrent_claims_of_one_event_id_store_exactly_one_row,
            a_reused_id_with_another_payload_is_quarantined_once,
            events_without_an_id_are_never_deduplicated,
            an_event_keeps_its_exact_bytes_headers_and_pointers,
            a_quarantined_event_is_released_or_discarded_once,
            rejections_are_recorded_and_listed_per_source,
            purging_removes_old_content_but_keeps_the_claims,
            an_idempotent_source_create_commits_with_its_record,
        );
    };
}
