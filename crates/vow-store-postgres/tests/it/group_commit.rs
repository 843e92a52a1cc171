//! Group commit: concurrent message creates share transactions, and a row that fails fails only
//! its own request, with the answer it gets alone.

use std::collections::HashMap;

use sqlx::Row;
use vow_core::{AppId, EndpointId};
use vow_store::prelude::*;
use vow_store::{MessageFilter, NewMessage, Order, Seek, StoreError, StoreResult};
use vow_store_postgres::testing::fresh_store;

use crate::support::{app, endpoint, endpoint_fields, message, raw};

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
