//! Cases about messages: `eventId` uniqueness (also under concurrency), reading back, tenant
//! isolation, listing filters and paging.

use vow_core::{AppId, MessageId};

use super::support::*;
use crate::{MessageFilter, MessageKey, NewMessage, Order, Seek, Store, StoreError};

/// A second message with an `eventId` the application already used is a `Conflict`, and
/// neither it nor any delivery of it is stored.
pub async fn a_duplicate_event_id_is_a_conflict_and_writes_nothing(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let first = NewMessage {
        event_id: Some("evt-1".into()),
        ..new_message(app.id, "user.created")
    };
    store.create_message(first.clone()).await.unwrap();
    let dup = NewMessage {
        event_id: Some("evt-1".into()),
        ..new_message(app.id, "user.deleted")
    };
    assert_conflict(store.create_message(dup.clone()).await, "eventId");

    assert_eq!(
        store
            .get_message(app.id, &MessageKey::Id(dup.id))
            .await
            .unwrap(),
        None
    );
    assert!(store
        .list_deliveries(app.id, dup.id)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        message_ids(store, app.id, &MessageFilter::default()).await,
        vec![first.id]
    );
    let by_event = store
        .get_message(app.id, &MessageKey::EventId("evt-1".into()))
        .await
        .unwrap();
    assert_eq!(by_event.map(|m| m.event_type), Some("user.created".into()));
    assert_eq!(
        store.list_deliveries(app.id, first.id).await.unwrap().len(),
        1
    );

    // Messages without an eventId never clash.
    store
        .create_message(new_message(app.id, "a"))
        .await
        .unwrap();
    store
        .create_message(new_message(app.id, "b"))
        .await
        .unwrap();
    assert_eq!(
        message_ids(store, app.id, &MessageFilter::default())
            .await
            .len(),
        3
    );
}

/// Another application may use the same `eventId`.
pub async fn another_application_may_reuse_an_event_id(store: &dyn Store) {
    let a = create_app(store, "A").await;
    let b = create_app(store, "B").await;
    create_endpoint(store, b.id).await;
    let in_a = NewMessage {
        event_id: Some("shared".into()),
        ..new_message(a.id, "user.created")
    };
    let in_b = NewMessage {
        event_id: Some("shared".into()),
        ..new_message(b.id, "user.created")
    };
    store.create_message(in_a.clone()).await.unwrap();
    let created = store.create_message(in_b.clone()).await.unwrap();
    assert_eq!(created.deliveries, 1);
    let key = MessageKey::EventId("shared".into());
    assert_eq!(
        store.get_message(a.id, &key).await.unwrap().map(|m| m.id),
        Some(in_a.id)
    );
    assert_eq!(
        store.get_message(b.id, &key).await.unwrap().map(|m| m.id),
        Some(in_b.id)
    );
}

/// A message for a deleted application is `NotFound("application")` and writes nothing.
pub async fn a_message_for_a_deleted_application_is_not_found_and_writes_nothing(
    store: &dyn Store,
) {
    let app = create_app(store, "Gone").await;
    create_endpoint(store, app.id).await;
    store.delete_application(app.id).await.unwrap();
    let new = NewMessage {
        event_id: Some("evt".into()),
        ..new_message(app.id, "user.created")
    };
    assert_not_found(store.create_message(new.clone()).await, "application");
    assert_eq!(
        store
            .get_message(app.id, &MessageKey::Id(new.id))
            .await
            .unwrap(),
        None
    );
    assert!(store
        .list_deliveries(app.id, new.id)
        .await
        .unwrap()
        .is_empty());
    assert!(message_ids(store, app.id, &MessageFilter::default())
        .await
        .is_empty());
    assert_not_found(
        store.create_message(new_message(AppId::new(), "x")).await,
        "application",
    );
}

/// A message is read back by id and by `eventId`, its payload byte for byte as given.
pub async fn a_message_is_read_back_by_id_and_by_event_id_with_its_payload_verbatim(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let payload = "{ \"z\": 1,\n  \"a\": [1, 2.50, \"é\\u00e9\"], \"n\": null, \"big\": 12345678901234567890 }";
    let new = NewMessage {
        event_id: Some("order-42".into()),
        channels: Some(strings(&["eu", "project_1"])),
        payload: payload.into(),
        ..new_message(app.id, "order.paid")
    };
    let created = store.create_message(new.clone()).await.unwrap();
    let m = &created.message;
    assert_eq!(m.id, new.id);
    assert_eq!(m.app_id, app.id);
    assert_eq!(m.event_id.as_deref(), Some("order-42"));
    assert_eq!(m.event_type, "order.paid");
    assert_eq!(m.channels, new.channels);
    assert_eq!(m.payload.as_deref(), Some(payload));
    assert_eq!(m.payload_expires_at, new.payload_expires_at);
    assert_eq!(m.created_at, t(5));

    let by_id = store
        .get_message(app.id, &MessageKey::Id(new.id))
        .await
        .unwrap();
    assert_eq!(by_id.as_ref(), Some(m));
    let by_event = store
        .get_message(app.id, &MessageKey::EventId("order-42".into()))
        .await
        .unwrap();
    assert_eq!(by_event.as_ref(), Some(m));
    let listed = store
        .list_messages(app.id, &MessageFilter::default(), &all(10))
        .await
        .unwrap();
    assert_eq!(listed, vec![m.clone()]);
    let missing = store
        .get_message(app.id, &MessageKey::EventId("order-43".into()))
        .await
        .unwrap();
    assert_eq!(missing, None);
}

/// A message of application A is not found through application B, by id or `eventId`, and
/// neither are its deliveries.
pub async fn a_message_is_invisible_through_another_application(store: &dyn Store) {
    let a = create_app(store, "A").await;
    let b = create_app(store, "B").await;
    create_endpoint(store, a.id).await;
    let new = NewMessage {
        event_id: Some("private".into()),
        ..new_message(a.id, "user.created")
    };
    store.create_message(new.clone()).await.unwrap();
    assert_eq!(
        store
            .get_message(b.id, &MessageKey::Id(new.id))
            .await
            .unwrap(),
        None
    );
    let by_event = store
        .get_message(b.id, &MessageKey::EventId("private".into()))
        .await
        .unwrap();
    assert_eq!(by_event, None);
    assert!(message_ids(store, b.id, &MessageFilter::default())
        .await
        .is_empty());
    assert!(store
        .list_deliveries(b.id, new.id)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(store.list_deliveries(a.id, new.id).await.unwrap().len(), 1);
}

/// `list_messages` filters by event types, by channel and by creation time (both bounds
/// exclusive), alone and combined, newest first.
pub async fn listing_messages_filters_by_event_type_channel_and_time(store: &dyn Store) {
    let app = create_app(store, "App").await;
    // (event type, channels, created at), oldest first; ids are assigned in sorted order, so
    // the newer message has the larger id.
    let specs: [(&str, Option<&[&str]>, i64); 5] = [
        ("user.created", Some(&["eu"]), 10),
        ("user.deleted", None, 20),
        ("user.created", Some(&["us", "eu"]), 30),
        ("invoice.paid", Some(&["us"]), 40),
        ("user.created", None, 50),
    ];
    let mut ids: Vec<MessageId> = specs.iter().map(|_| MessageId::new()).collect();
    ids.sort();
    for ((event_type, channels, at), id) in specs.into_iter().zip(&ids) {
        let new = NewMessage {
            id: *id,
            channels: channels.map(strings),
            now: t(at),
            ..new_message(app.id, event_type)
        };
        store.create_message(new).await.unwrap();
    }
    let pick = |idx: &[usize]| idx.iter().rev().map(|&i| ids[i]).collect::<Vec<_>>();

    let everything = message_ids(store, app.id, &MessageFilter::default()).await;
    assert_eq!(everything, pick(&[0, 1, 2, 3, 4]), "newest first");

    let f =
        |event_types: &[&str], channel: Option<&str>, before: Option<i64>, after: Option<i64>| {
            MessageFilter {
                event_types: strings(event_types),
                channel: channel.map(str::to_string),
                before: before.map(t),
                after: after.map(t),
            }
        };
    let cases: Vec<(MessageFilter, Vec<MessageId>)> = vec![
        (f(&["user.created"], None, None, None), pick(&[0, 2, 4])),
        (
            f(&["user.deleted", "invoice.paid"], None, None, None),
            pick(&[1, 3]),
        ),
        (f(&["no.such.type"], None, None, None), vec![]),
        (f(&[], Some("eu"), None, None), pick(&[0, 2])),
        (f(&[], Some("us"), None, None), pick(&[2, 3])),
        (f(&[], Some("asia"), None, None), vec![]),
        (f(&[], None, Some(30), None), pick(&[0, 1])),
        (f(&[], None, None, Some(30)), pick(&[3, 4])),
        (f(&[], None, Some(50), Some(10)), pick(&[1, 2, 3])),
        (f(&["user.created"], Some("us"), None, None), pick(&[2])),
        (f(&["user.created"], None, Some(45), Some(5)), pick(&[0, 2])),
    ];
    for (filter, expected) in cases {
        let got = message_ids(store, app.id, &filter).await;
        assert_eq!(got, expected, "filter {filter:?}");
    }

    // Another application's message of the same type and channel (named twice) is its own:
    // found once there, never here.
    let other = create_app(store, "Other").await;
    let theirs = NewMessage {
        channels: Some(strings(&["eu", "eu"])),
        now: t(60),
        ..new_message(other.id, "user.created")
    };
    let theirs = store.create_message(theirs).await.unwrap().message.id;
    let eu = f(&["user.created"], Some("eu"), None, None);
    assert_eq!(message_ids(store, other.id, &eu).await, vec![theirs]);
    assert_eq!(message_ids(store, app.id, &eu).await, pick(&[0, 2]));
    // Deleting it takes its messages and their channels along.
    store.delete_application(other.id).await.unwrap();
    assert!(store
        .get_message(other.id, &MessageKey::Id(theirs))
        .await
        .unwrap()
        .is_none());

    // Filters and paging together: the user.created messages, one per page, newest first.
    let filter = f(&["user.created"], None, None, None);
    let first = store
        .list_messages(
            app.id,
            &filter,
            &Seek::for_iterator(None, Order::Descending, 1),
        )
        .await
        .unwrap();
    assert_eq!(
        first.iter().map(|m| m.id).collect::<Vec<_>>(),
        pick(&[2, 4])
    );
    let next = Seek::for_iterator(Some(&ids[4].to_string()), Order::Descending, 1);
    let second = store.list_messages(app.id, &filter, &next).await.unwrap();
    assert_eq!(
        second.iter().map(|m| m.id).collect::<Vec<_>>(),
        pick(&[0, 2])
    );
}

/// Messages page by id in both directions (newest first is descending) without gaps or
/// repeats, and only the application's own.
pub async fn messages_are_listed_newest_first_and_page_without_gaps(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let noise = create_app(store, "Noise").await;
    let mut ids = Vec::new();
    for i in 0..7 {
        let new = NewMessage {
            now: t(10 + i),
            ..new_message(app.id, "user.created")
        };
        ids.push(new.id.to_string());
        store.create_message(new).await.unwrap();
        store
            .create_message(new_message(noise.id, "user.created"))
            .await
            .unwrap();
    }
    ids.sort();
    let newest = store
        .list_messages(app.id, &MessageFilter::default(), &all(2))
        .await
        .unwrap();
    assert_eq!(
        newest[0].id.to_string(),
        ids[6],
        "descending starts with the newest"
    );
    assert_pages(&ids, |seek| async move {
        let page = store
            .list_messages(app.id, &MessageFilter::default(), &seek)
            .await
            .unwrap();
        page.iter().map(|m| m.id.to_string()).collect()
    })
    .await;
}

/// 50 concurrent creates with one `eventId`: exactly one succeeds, the others are conflicts,
/// and one message with one set of deliveries is stored.
pub async fn concurrent_creates_with_one_event_id_store_exactly_one_message(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    create_endpoint(store, app.id).await;
    let attempts: Vec<NewMessage> = (0..50)
        .map(|_| NewMessage {
            event_id: Some("once".into()),
            ..new_message(app.id, "user.created")
        })
        .collect();
    let results = join_all(
        attempts
            .iter()
            .map(|new| store.create_message(new.clone()))
            .collect(),
    )
    .await;

    let mut winners = Vec::new();
    for (new, result) in attempts.iter().zip(results) {
        match result {
            Ok(created) => {
                assert_eq!(created.deliveries, 2);
                winners.push(new.id);
            }
            Err(StoreError::Conflict(_)) => {}
            Err(other) => panic!("a duplicate create should be a Conflict, got {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one create wins");
    let winner = winners[0];
    assert_eq!(
        message_ids(store, app.id, &MessageFilter::default()).await,
        vec![winner]
    );
    let by_event = store
        .get_message(app.id, &MessageKey::EventId("once".into()))
        .await
        .unwrap();
    assert_eq!(by_event.map(|m| m.id), Some(winner));
    assert_eq!(
        store.list_deliveries(app.id, winner).await.unwrap().len(),
        2
    );
    for new in attempts.iter().filter(|n| n.id != winner) {
        assert!(store
            .list_deliveries(app.id, new.id)
            .await
            .unwrap()
            .is_empty());
    }
}

/// A message's `traceparent` is read back as written, by the message and by the claim of each of
/// its deliveries (the attempt joins the trace in whichever process claims it); a message
/// without one has none.
pub async fn a_message_keeps_its_traceparent_for_its_attempts(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let traced = NewMessage {
        traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
        ..new_message(app.id, "user.created")
    };
    let untraced = new_message(app.id, "user.deleted");
    for new in [&traced, &untraced] {
        let created = store.create_message(new.clone()).await.unwrap();
        assert_eq!(created.message.traceparent, new.traceparent);
        let read = store
            .get_message(app.id, &MessageKey::Id(new.id))
            .await
            .unwrap()
            .expect("the message");
        assert_eq!(read.traceparent, new.traceparent);
    }
    let claimed = super::queue::claim(store, 6).await;
    assert_eq!(claimed.len(), 2, "{claimed:?}");
    for c in &claimed {
        let new = if c.delivery.msg_id == traced.id {
            &traced
        } else {
            &untraced
        };
        assert_eq!(c.traceparent, new.traceparent, "{:?}", c.delivery.msg_id);
    }
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_messages {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_duplicate_event_id_is_a_conflict_and_writes_nothing,
            another_application_may_reuse_an_event_id,
            a_message_for_a_deleted_application_is_not_found_and_writes_nothing,
            a_message_is_read_back_by_id_and_by_event_id_with_its_payload_verbatim,
            a_message_is_invisible_through_another_application,
            listing_messages_filters_by_event_type_channel_and_time,
            messages_are_listed_newest_first_and_page_without_gaps,
            concurrent_creates_with_one_event_id_store_exactly_one_message,
            a_message_keeps_its_traceparent_for_its_attempts,
        );
    };
}
