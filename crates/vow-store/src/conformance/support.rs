//! Fixtures the cases share: fixed times, minimal valid rows, paging and concurrency helpers.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use chrono::{DateTime, Utc};
use vow_core::{AppId, EndpointId, MessageId};

use crate::page::Page;
use crate::{
    AppKey, Application, ApplicationFields, Endpoint, EndpointFields, MessageFilter, Metadata,
    NewApplication, NewEndpoint, NewMessage, Order, Seek, Store, StoreError,
};

/// A fixed instant with a sub-second part, plus `secs` seconds. Every backend stores times to
/// the microsecond, so these round-trip exactly.
pub(crate) fn t(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(1_704_067_200_123_456 + secs * 1_000_000)
        .expect("a fixed time in range")
}

/// A string map from pairs.
pub(crate) fn map(pairs: &[(&str, &str)]) -> Metadata {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Owned strings from literals.
pub(crate) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Application fields with just a name.
pub(crate) fn app_fields(name: &str) -> ApplicationFields {
    ApplicationFields {
        name: name.to_string(),
        ..ApplicationFields::default()
    }
}

/// Creates an application with `fields` at `t(0)`.
pub(crate) async fn create_app_with(store: &dyn Store, fields: ApplicationFields) -> Application {
    store
        .create_application(NewApplication {
            id: AppId::new(),
            fields,
            now: t(0),
        })
        .await
        .expect("create an application")
}

/// Creates an application named `name`.
pub(crate) async fn create_app(store: &dyn Store, name: &str) -> Application {
    create_app_with(store, app_fields(name)).await
}

/// Endpoint fields with just a URL (no filters: it takes every message).
pub(crate) fn endpoint_fields(url: &str) -> EndpointFields {
    EndpointFields {
        url: url.to_string(),
        ..EndpointFields::default()
    }
}

/// Creates an endpoint of `app` with `fields` at `t(1)`.
pub(crate) async fn create_endpoint_with(
    store: &dyn Store,
    app: AppId,
    fields: EndpointFields,
) -> Endpoint {
    store
        .create_endpoint(NewEndpoint {
            id: EndpointId::new(),
            app_id: app,
            fields,
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string(),
            now: t(1),
        })
        .await
        .expect("create an endpoint")
}

/// Creates an endpoint of `app` without filters.
pub(crate) async fn create_endpoint(store: &dyn Store, app: AppId) -> Endpoint {
    create_endpoint_with(store, app, endpoint_fields("https://example.com/hook")).await
}

/// A message of `app` with event type `event_type`, created at `t(5)`.
pub(crate) fn new_message(app: AppId, event_type: &str) -> NewMessage {
    NewMessage {
        id: MessageId::new(),
        app_id: app,
        event_id: None,
        event_type: event_type.to_string(),
        channels: None,
        payload: r#"{"hello":"world"}"#.to_string(),
        payload_expires_at: t(5 + 90 * 24 * 3600),
        now: t(5),
        traceparent: None,
    }
}

/// Asserts `r` is `NotFound(what)`.
#[track_caller]
pub(crate) fn assert_not_found<T: std::fmt::Debug>(r: Result<T, StoreError>, what: &str) {
    match r {
        Err(StoreError::NotFound(w)) => assert_eq!(w, what, "NotFound names the missing row"),
        other => panic!("expected NotFound({what:?}), got {other:?}"),
    }
}

/// Asserts `r` is a `Conflict` whose sentence mentions `word`.
#[track_caller]
pub(crate) fn assert_conflict<T: std::fmt::Debug>(r: Result<T, StoreError>, word: &str) {
    match r {
        Err(StoreError::Conflict(sentence)) => assert!(
            sentence.contains(word),
            "the conflict {sentence:?} should name the {word}"
        ),
        other => panic!("expected a Conflict about the {word}, got {other:?}"),
    }
}

/// The ids of an application's listing, to compare with ids made in the case.
pub(crate) async fn app_ids(store: &dyn Store) -> Vec<String> {
    let seek = Seek {
        after: None,
        order: Order::Ascending,
        limit: 1000,
    };
    let apps = store
        .list_applications(&seek)
        .await
        .expect("list applications");
    apps.iter().map(|a| a.id.to_string()).collect()
}

/// A key of a `Seek` listing.
pub(crate) type Key = String;

/// Walks every page of a listing the way the API does (`Seek::for_iterator` + `Page::build`),
/// checking the backend never returns more than `limit + 1` rows, and returns the keys in order.
pub(crate) async fn walk<F, Fut>(order: Order, limit: usize, fetch: &F) -> Vec<Key>
where
    F: Fn(Seek) -> Fut,
    Fut: Future<Output = Vec<Key>>,
{
    let mut keys = Vec::new();
    let mut iterator: Option<String> = None;
    for _ in 0..1000 {
        let seek = Seek::for_iterator(iterator.as_deref(), order, limit);
        let rows = fetch(seek.clone()).await;
        assert!(
            rows.len() <= limit + 1,
            "a backend returns at most limit + 1 rows, got {} for limit {limit}",
            rows.len()
        );
        let page = Page::build(rows, &seek, order, Key::clone);
        keys.extend(page.data.iter().cloned());
        if page.done {
            return keys;
        }
        iterator = page.iterator;
    }
    panic!("a listing did not end after 1000 pages");
}

/// Checks a keyset listing over `expected` (sorted ascending, at least 4 keys): pages of 3
/// visit every key once in both directions, a page as large as the listing is the only one,
/// and the previous-page cursor of the last page leads back to the page before it.
pub(crate) async fn assert_pages<F, Fut>(expected: &[Key], fetch: F)
where
    F: Fn(Seek) -> Fut,
    Fut: Future<Output = Vec<Key>>,
{
    assert!(expected.len() >= 4, "a paging case needs several pages");
    let mut sorted = expected.to_vec();
    sorted.sort();
    assert_eq!(sorted, expected, "expected keys must be sorted ascending");

    assert_eq!(
        walk(Order::Ascending, 3, &fetch).await,
        expected,
        "ascending pages of 3"
    );
    let mut reversed = expected.to_vec();
    reversed.reverse();
    assert_eq!(
        walk(Order::Descending, 3, &fetch).await,
        reversed,
        "descending pages of 3"
    );
    assert_eq!(
        walk(Order::Ascending, 1, &fetch).await,
        expected,
        "pages of 1"
    );

    // One page holding everything: fetched rows are exactly the listing, so it is done.
    let all = Seek::for_iterator(None, Order::Ascending, expected.len());
    assert_eq!(fetch(all).await, expected, "a page as large as the listing");

    // From the middle, `after` is exclusive in both directions.
    let mid = &expected[1];
    let up = fetch(Seek::for_iterator(Some(mid), Order::Ascending, 2)).await;
    assert_eq!(
        up,
        expected[2..expected.len().min(5)].to_vec(),
        "after is exclusive ascending"
    );
    let down = fetch(Seek::for_iterator(Some(&expected[2]), Order::Descending, 5)).await;
    assert_eq!(
        down,
        vec![expected[1].clone(), expected[0].clone()],
        "after is exclusive descending"
    );

    // Back from the second page with its `prevIterator`: the first page again.
    let first = Seek::for_iterator(None, Order::Ascending, 2);
    let p1 = Page::build(
        fetch(first.clone()).await,
        &first,
        Order::Ascending,
        Key::clone,
    );
    let second = Seek::for_iterator(p1.iterator.as_deref(), Order::Ascending, 2);
    let p2 = Page::build(
        fetch(second.clone()).await,
        &second,
        Order::Ascending,
        Key::clone,
    );
    let back = Seek::for_iterator(p2.prev_iterator.as_deref(), Order::Ascending, 2);
    let pb = Page::build(
        fetch(back.clone()).await,
        &back,
        Order::Ascending,
        Key::clone,
    );
    assert_eq!(
        pb.data, p1.data,
        "prevIterator of page 2 leads back to page 1"
    );
}

/// Polls every future concurrently in the calling task and returns their outputs in order.
/// (The cases hold a borrowed `&dyn Store`, so they cannot spawn; a backend still sees every
/// request in flight at once.)
pub(crate) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(v) => *output = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future completed"))
        .collect()
}

/// Reads an application back by id.
pub(crate) async fn get_app(store: &dyn Store, id: AppId) -> Option<Application> {
    store
        .get_application(&AppKey::Id(id))
        .await
        .expect("get an application")
}

/// A descending (newest first) listing from the start.
pub(crate) fn all(limit: usize) -> Seek {
    Seek::for_iterator(None, Order::Descending, limit)
}

/// The ids of an application's messages matching `filter`, newest first.
pub(crate) async fn message_ids(
    store: &dyn Store,
    app: AppId,
    filter: &MessageFilter,
) -> Vec<MessageId> {
    let listed = store.list_messages(app, filter, &all(100)).await.unwrap();
    listed.into_iter().map(|m| m.id).collect()
}
