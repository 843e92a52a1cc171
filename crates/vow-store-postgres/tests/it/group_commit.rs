//! Group commit: concurrent message creates (keyed or not) and inbound claims share
//! transactions, and a row that fails fails only its own request, with the answer it gets alone.

use std::collections::HashMap;

use sqlx::Row;
use vow_core::{AppId, EndpointId, InboundEventId, SourceId};
use vow_store::idempotency::{
    Completion, Fingerprint, FreshClaim, LeaseToken, Render, Scope, Settings, StoredResponse,
};
use vow_store::inbound::{Claim, InboundState, NewInboundEvent, ReplayGuard};
use vow_store::prelude::*;
use vow_store::{CreatedMessage, MessageFilter, NewMessage, Order, Seek, StoreError, StoreResult};
use vow_store_postgres::testing::fresh_store;

use crate::support::{app, endpoint, endpoint_fields, message, now, raw};

/// What each create of the mix is, and so what it must be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Plain,
    OnChannels,
    TakenEventId,
    /// Two creates of one new `eventId` in the same burst: one wins.
    RacedEventId,
    MissingApp,
    MissingOnlyEndpoint,
}

const KINDS: [Kind; 6] = [
    Kind::Plain,
    Kind::OnChannels,
    Kind::TakenEventId,
    Kind::RacedEventId,
    Kind::MissingApp,
    Kind::MissingOnlyEndpoint,
];

#[tokio::test]
async fn concurrent_creates_share_commits_and_a_failing_row_fails_only_its_own_request() {
    let (store, url) = fresh_store().await;
    let a = app(&store, None).await;
    let ep = endpoint(&store, a.id, endpoint_fields("https://example.com")).await;
    let taken = message(a.id, "t", Some("taken"));
    store.create_message(taken).await.unwrap();

    let creates: Vec<(Kind, NewMessage, Option<EndpointId>)> = (0..360)
        .map(|i| {
            let kind = KINDS[i % KINDS.len()];
            let mut new = message(a.id, "t", None);
            let mut only = None;
            match kind {
                Kind::Plain => {}
                Kind::OnChannels => {
                    new.channels = Some(vec!["red".into(), "red".into(), "blue".into()])
                }
                Kind::TakenEventId => new.event_id = Some("taken".into()),
                Kind::RacedEventId => new.event_id = Some(format!("raced-{}", i / 12)),
                Kind::MissingApp => new.app_id = AppId::new(),
                Kind::MissingOnlyEndpoint => only = Some(EndpointId::new()),
            }
            (kind, new, only)
        })
        .collect();
    let answers: Vec<(Kind, NewMessage, StoreResult<_>)> =
        futures_join_all(creates.into_iter().map(|(kind, new, only)| {
            let store = store.clone();
            async move {
                let create = MessageCreate {
                    new: new.clone(),
                    only,
                    app: None,
                };
                let answer = store.create_message_keyed(create, None).await;
                (kind, new, answer)
            }
        }))
        .await;

    let mut created: HashMap<Kind, usize> = HashMap::new();
    for (kind, new, answer) in &answers {
        match (kind, answer) {
            (Kind::Plain | Kind::OnChannels | Kind::RacedEventId, Ok((c, None))) => {
                assert_eq!(c.message.id, new.id);
                assert_eq!(c.deliveries, 1, "{kind:?}");
                *created.entry(*kind).or_default() += 1;
            }
            (Kind::TakenEventId | Kind::RacedEventId, Err(StoreError::Conflict(m))) => {
                assert_eq!(m, "a message with this eventId already exists");
            }
            (Kind::MissingApp, Err(StoreError::NotFound("application"))) => {}
            (Kind::MissingOnlyEndpoint, Err(StoreError::NotFound("endpoint"))) => {}
            other => panic!("unexpected answer: {other:?}"),
        }
    }
    assert_eq!(created[&Kind::Plain], 60);
    assert_eq!(created[&Kind::OnChannels], 60);
    assert_eq!(created[&Kind::RacedEventId], 30, "one of each raced pair");

    // What is stored is exactly what was answered as created, each with its one delivery.
    let mut conn = raw(&url).await;
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM messages")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored, 151);
    let deliveries: i64 =
        sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE endpoint_id = $1")
            .bind(ep.id.to_string())
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(deliveries, 151);
    let on_red = store
        .list_messages(
            a.id,
            &MessageFilter {
                channel: Some("red".into()),
                ..Default::default()
            },
            &Seek::for_iterator(None, Order::Descending, 500),
        )
        .await
        .unwrap();
    assert_eq!(on_red.len(), 60, "each message on its channels once");
    assert!(on_red
        .iter()
        .all(|m| m.channels.as_deref() == Some(&["red".into(), "red".into(), "blue".into()][..])));

    // The creates shared transactions: far fewer than one per message.
    let row = sqlx::query("SELECT count(DISTINCT xmin::text) AS txs FROM messages")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let transactions: i64 = row.get("txs");
    assert!(
        transactions < 151 / 2,
        "151 messages in {transactions} transactions"
    );
}

/// What each keyed create of the keyed mix is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Keyed {
    /// A key of its own.
    Fresh,
    /// Two creates with one key (and one body) in the same burst: one creates, one is fenced.
    RacedKey,
    /// Its message is not written (no application): its key gets no record.
    MissingApp,
    /// Its message is not written (its `eventId` is taken): its key gets no record.
    TakenEventId,
    /// No key at all, in the same batches.
    Plain,
}

const KEYED: [Keyed; 5] = [
    Keyed::Fresh,
    Keyed::RacedKey,
    Keyed::Plain,
    Keyed::MissingApp,
    Keyed::TakenEventId,
];

/// Keyed creates share the batches: each key is claimed once, with its response, in its
/// message's transaction; of two creates racing with one key, one creates and the other is
/// fenced; a keyed create whose message is not written leaves no record, whether the batch
/// skipped it before claiming (no application) or after (a taken `eventId`, which its batch's
/// one statement cannot skip: that batch is written in a transaction).
#[tokio::test]
async fn keyed_creates_share_commits_and_each_key_records_only_a_written_message() {
    keyed_mix(&KEYED).await;
}

/// The keyed mix without the creates a batch's one statement cannot write or skip (its
/// batches then need no transaction): the same answers and rows.
#[tokio::test]
async fn keyed_creates_without_taken_event_ids_share_commits_the_same_way() {
    let kinds: Vec<Keyed> = KEYED
        .into_iter()
        .filter(|kind| *kind != Keyed::TakenEventId)
        .collect();
    keyed_mix(&kinds).await;
}

/// 60 creates of each of `kinds`, concurrently, and what they must be answered and leave.
async fn keyed_mix(kinds: &[Keyed]) {
    let (store, url) = fresh_store().await;
    let a = app(&store, None).await;
    endpoint(&store, a.id, endpoint_fields("https://example.com")).await;
    store
        .create_message(message(a.id, "t", Some("taken")))
        .await
        .unwrap();

    let creates = (0..60 * kinds.len()).map(|i| {
        let kind = kinds[i % kinds.len()];
        let mut new = message(a.id, "t", None);
        let key = match kind {
            Keyed::Fresh => Some(format!("fresh-{i}")),
            Keyed::RacedKey => Some(format!("raced-{}", i / (2 * kinds.len()))),
            Keyed::MissingApp => {
                new.app_id = AppId::new();
                Some(format!("missing-{i}"))
            }
            Keyed::TakenEventId => {
                new.event_id = Some("taken".into());
                Some(format!("taken-{i}"))
            }
            Keyed::Plain => None,
        };
        let store = store.clone();
        let completion = key.map(|key| ready_claim(&a.id.to_string(), &key, &new));
        async move {
            let create = MessageCreate {
                new: new.clone(),
                only: None,
                app: None,
            };
            (
                kind,
                new,
                store.create_message_keyed(create, completion).await,
            )
        }
    });
    let answers = futures_join_all(creates).await;

    let mut created: HashMap<Keyed, usize> = HashMap::new();
    for (kind, new, answer) in &answers {
        match (kind, answer) {
            (Keyed::Fresh | Keyed::RacedKey, Ok((c, Some(response)))) => {
                assert_eq!(c.message.id, new.id);
                assert_eq!(response.resource.as_deref(), Some(&*new.id.to_string()));
                *created.entry(*kind).or_default() += 1;
            }
            (Keyed::Plain, Ok((c, None))) => {
                assert_eq!(c.deliveries, 1);
                *created.entry(*kind).or_default() += 1;
            }
            (Keyed::RacedKey, Err(StoreError::Fenced)) => {}
            (Keyed::MissingApp, Err(StoreError::NotFound("application"))) => {}
            (Keyed::TakenEventId, Err(StoreError::Conflict(_))) => {}
            other => panic!("unexpected answer: {other:?}"),
        }
    }
    assert_eq!(created[&Keyed::Fresh], 60);
    assert_eq!(created[&Keyed::RacedKey], 30, "one of each raced pair");
    assert_eq!(created[&Keyed::Plain], 60);

    // Stored: every message answered as created, and a record for each keyed one, naming it.
    let mut conn = raw(&url).await;
    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
    let messages = count("SELECT count(*) FROM messages");
    assert_eq!(messages.fetch_one(&mut conn).await.unwrap(), 151);
    let records = count("SELECT count(*) FROM idempotency_records");
    assert_eq!(records.fetch_one(&mut conn).await.unwrap(), 90);
    let naming = count(
        "SELECT count(*) FROM idempotency_records r JOIN messages m ON m.id = r.resource \
         WHERE r.state = 'completed' AND r.response_status = 202",
    );
    assert_eq!(naming.fetch_one(&mut conn).await.unwrap(), 90);
    // The records shared their messages' transactions, and those were shared.
    let apart = count(
        "SELECT count(*) FROM idempotency_records r JOIN messages m ON m.id = r.resource \
         WHERE r.xmin::text <> m.xmin::text",
    );
    assert_eq!(apart.fetch_one(&mut conn).await.unwrap(), 0);
    let row = sqlx::query("SELECT count(DISTINCT xmin::text) AS txs FROM idempotency_records")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let transactions: i64 = row.get("txs");
    assert!(
        transactions < 90 / 2,
        "90 keyed messages in {transactions} transactions"
    );
}

/// A keyed create's claim as the server's hot path makes it: `key` of `app`, the response
/// (naming `new`) rendered before the write.
fn ready_claim(app: &str, key: &str, new: &NewMessage) -> Completion<CreatedMessage> {
    let body = br#"{"eventType":"t","payload":{}}"#;
    let id = new.id.to_string();
    let response = StoredResponse {
        resource: Some(id.clone()),
        ..StoredResponse::json(202, &serde_json::json!({ "id": id }))
    };
    Completion {
        scope: Scope {
            principal: "admin".into(),
            application: Some(app.into()),
            method: "POST".into(),
            route: "/api/v1/app/{app_id}/msg".into(),
            key: vow_idempotency::IdempotencyKey::parse(key).unwrap(),
        },
        token: LeaseToken::generate(),
        fresh: Some(FreshClaim {
            fingerprint: Fingerprint::of("POST", "/api/v1/app/{app_id}/msg", body),
            canonical_body: vow_idempotency::fingerprint::canonical(
                &serde_json::from_slice(body).unwrap(),
            ),
            on_takeover: None,
        }),
        now: now(),
        settings: Settings::default(),
        render: Render::Ready(response),
    }
}

/// Runs the futures concurrently, answers in order.
async fn futures_join_all<F: std::future::Future + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

/// What each inbound claim of the inbound mix is, and so what it must be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Inbound {
    /// An id, a payload and a guarded digest of its own.
    Fresh,
    /// Two claims of one id with one payload in the same burst: one received, one duplicate.
    SameIdAndPayload,
    /// Two claims of one id with other payloads: one received, one quarantined.
    SameIdOtherPayload,
    /// Two claims with their own ids and one guarded digest: one received, one replayed.
    SameDigest,
    /// No id: always stored.
    NoId,
    /// A source that does not exist.
    MissingSource,
}

const INBOUND: [Inbound; 6] = [
    Inbound::Fresh,
    Inbound::SameIdAndPayload,
    Inbound::SameIdOtherPayload,
    Inbound::SameDigest,
    Inbound::NoId,
    Inbound::MissingSource,
];

/// Concurrent inbound claims share transactions, and each is answered as it would be alone:
/// received, duplicate, quarantined, replayed (nothing stored) or "no such source"; what is
/// stored is exactly what was answered as stored, with one digest per received guarded claim.
#[tokio::test]
async fn concurrent_inbound_claims_share_commits_and_each_is_answered_as_alone() {
    let (store, url) = fresh_store().await;
    let source = crate::inbound::source(&store, Vec::new()).await;
    let claims = (0..360).map(|i| {
        let kind = INBOUND[i % INBOUND.len()];
        let pair = i / 12;
        let (event_id, payload, digest) = match kind {
            Inbound::Fresh => (
                Some(format!("fresh-{i}")),
                format!("fresh-{i}"),
                Some(format!("d-fresh-{i}")),
            ),
            Inbound::SameIdAndPayload => {
                (Some(format!("same-{pair}")), format!("same-{pair}"), None)
            }
            Inbound::SameIdOtherPayload => {
                (Some(format!("other-{pair}")), format!("other-{i}"), None)
            }
            Inbound::SameDigest => (
                Some(format!("replay-{i}")),
                format!("replay-{pair}"),
                Some(format!("d-replay-{pair}")),
            ),
            Inbound::NoId => (None, "no id".to_string(), None),
            Inbound::MissingSource => (Some(format!("gone-{i}")), format!("gone-{i}"), None),
        };
        let source_id = match kind {
            Inbound::MissingSource => SourceId::new(),
            _ => source.id,
        };
        let new = NewInboundEvent {
            id: InboundEventId::new(),
            source_id,
            account: String::new(),
            event_id,
            sha256: format!("sha-{payload}"),
            payload: payload.into_bytes(),
            headers: vec![("x-kind".into(), format!("{kind:?}"))],
            version: None,
            entity: None,
            replay_guard: digest.map(|digest| ReplayGuard {
                digest,
                window: chrono::Duration::minutes(5),
            }),
            now: now(),
        };
        let store = store.clone();
        async move { (kind, store.claim_inbound(new).await) }
    });
    let answers = futures_join_all(claims).await;

    let mut seen: HashMap<(Inbound, &'static str), usize> = HashMap::new();
    for (kind, answer) in &answers {
        let outcome = match (kind, answer) {
            (_, Ok(Claim::Received(e))) if e.state == InboundState::Received => "received",
            (Inbound::SameIdAndPayload, Ok(Claim::Duplicate(_))) => "duplicate",
            (Inbound::SameIdOtherPayload, Ok(Claim::Quarantined(_))) => "quarantined",
            (Inbound::SameDigest, Ok(Claim::Replayed(_))) => "replayed",
            (Inbound::MissingSource, Err(StoreError::NotFound("source"))) => "missing",
            other => panic!("unexpected answer: {other:?}"),
        };
        *seen.entry((*kind, outcome)).or_default() += 1;
    }
    let expected: HashMap<(Inbound, &'static str), usize> = [
        ((Inbound::Fresh, "received"), 60),
        ((Inbound::SameIdAndPayload, "received"), 30),
        ((Inbound::SameIdAndPayload, "duplicate"), 30),
        ((Inbound::SameIdOtherPayload, "received"), 30),
        ((Inbound::SameIdOtherPayload, "quarantined"), 30),
        ((Inbound::SameDigest, "received"), 30),
        ((Inbound::SameDigest, "replayed"), 30),
        ((Inbound::NoId, "received"), 60),
        ((Inbound::MissingSource, "missing"), 60),
    ]
    .into_iter()
    .collect();
    assert_eq!(seen, expected);

    // Stored: each received or quarantined claim once, each duplicate counted on its row, a
    // digest for each received guarded claim, nothing of a replay.
    let mut conn = raw(&url).await;
    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
    let rows = count("SELECT count(*) FROM inbound_events");
    assert_eq!(rows.fetch_one(&mut conn).await.unwrap(), 240);
    let received = count("SELECT count(*) FROM inbound_events WHERE state = 'received'");
    assert_eq!(received.fetch_one(&mut conn).await.unwrap(), 210);
    let duplicates = count("SELECT sum(duplicates)::int8 FROM inbound_events");
    assert_eq!(duplicates.fetch_one(&mut conn).await.unwrap(), 30);
    let digests =
        count("SELECT count(*) FROM inbound_digests d JOIN inbound_events e ON e.id = d.event_id");
    assert_eq!(digests.fetch_one(&mut conn).await.unwrap(), 90);
    let replays = count("SELECT count(*) FROM inbound_events WHERE event_id LIKE 'replay-%'");
    assert_eq!(replays.fetch_one(&mut conn).await.unwrap(), 30);
    let row = sqlx::query(
        "SELECT count(DISTINCT xmin::text) AS txs FROM inbound_events \
         WHERE event_id LIKE 'fresh-%'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let transactions: i64 = row.get("txs");
    assert!(
        transactions < 60 / 2,
        "60 fresh claims in {transactions} transactions"
    );
}
