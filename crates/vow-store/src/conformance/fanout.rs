//! Cases about fan-out: which endpoints a new message gets delivery rows for, and in what state.

use std::collections::BTreeSet;

use vow_core::{AppId, EndpointId, MessageId};

use super::support::*;
use crate::{DeliveryStatus, EndpointFields, MessageFilter, Store};

/// The endpoints that got a delivery row for `msg`, checking that the count agrees.
async fn targets(store: &dyn Store, app: AppId, msg: MessageId) -> BTreeSet<EndpointId> {
    let deliveries = store.list_deliveries(app, msg).await.unwrap();
    let set: BTreeSet<EndpointId> = deliveries.iter().map(|d| d.endpoint_id).collect();
    assert_eq!(set.len(), deliveries.len(), "one delivery per endpoint");
    set
}

fn with_filters(event_types: Option<&[&str]>, channels: Option<&[&str]>) -> EndpointFields {
    EndpointFields {
        event_types: event_types.map(strings),
        channels: channels.map(strings),
        ..endpoint_fields("https://example.com/filtered")
    }
}
/// Without filters, a message gets one `Pending` delivery per endpoint of its application, due
/// at the message's time; the count returned equals the rows stored.
pub async fn a_message_fans_out_to_every_endpoint_without_filters(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let other = create_app(store, "Other").await;
    let mut endpoints = BTreeSet::new();
    for _ in 0..3 {
        endpoints.insert(create_endpoint(store, app.id).await.id);
    }
    create_endpoint(store, other.id).await;

    let new = new_message(app.id, "user.created");
    let created = store.create_message(new.clone()).await.unwrap();
    assert_eq!(created.deliveries, 3);
    assert_eq!(created.message.id, new.id);
    assert_eq!(
        created.message.payload.as_deref(),
        Some(new.payload.as_str())
    );

    let deliveries = store.list_deliveries(app.id, new.id).await.unwrap();
    assert_eq!(deliveries.len(), created.deliveries);
    for d in &deliveries {
        assert_eq!(d.app_id, app.id);
        assert_eq!(d.msg_id, new.id);
        assert_eq!(d.status, DeliveryStatus::Pending);
        assert_eq!(d.attempts, 0);
        assert_eq!(d.next_attempt_at, t(5));
        assert_eq!(d.created_at, t(5));
    }
    assert_eq!(targets(store, app.id, new.id).await, endpoints);
    let ids: BTreeSet<_> = deliveries.iter().map(|d| d.id).collect();
    assert_eq!(ids.len(), 3, "delivery ids are distinct");

    // An application without endpoints still stores the message, with no deliveries.
    let lonely = create_app(store, "Lonely").await;
    let created = store
        .create_message(new_message(lonely.id, "user.created"))
        .await
        .unwrap();
    assert_eq!(created.deliveries, 0);
    assert!(targets(store, lonely.id, created.message.id)
        .await
        .is_empty());
    assert_eq!(
        message_ids(store, lonely.id, &MessageFilter::default())
            .await
            .len(),
        1
    );
}

/// An endpoint with an event-type filter only gets messages of the listed types.
pub async fn event_type_filters_choose_the_endpoints(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let any = create_endpoint(store, app.id).await.id;
    let created = create_endpoint_with(store, app.id, with_filters(Some(&["user.created"]), None))
        .await
        .id;
    create_endpoint_with(store, app.id, with_filters(Some(&["user.deleted"]), None)).await;
    let both = create_endpoint_with(
        store,
        app.id,
        with_filters(Some(&["user.deleted", "user.created"]), None),
    )
    .await
    .id;

    let msg = store
        .create_message(new_message(app.id, "user.created"))
        .await
        .unwrap();
    assert_eq!(msg.deliveries, 3);
    assert_eq!(
        targets(store, app.id, msg.message.id).await,
        BTreeSet::from([any, created, both])
    );

    let msg = store
        .create_message(new_message(app.id, "user.updated"))
        .await
        .unwrap();
    assert_eq!(msg.deliveries, 1);
    assert_eq!(
        targets(store, app.id, msg.message.id).await,
        BTreeSet::from([any])
    );
}

/// An endpoint with a channel filter only gets messages sharing one of its channels.
pub async fn channel_filters_choose_the_endpoints(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let any = create_endpoint(store, app.id).await.id;
    let a = create_endpoint_with(store, app.id, with_filters(None, Some(&["a"])))
        .await
        .id;
    let ab = create_endpoint_with(store, app.id, with_filters(None, Some(&["a", "b"])))
        .await
        .id;
    let c = create_endpoint_with(store, app.id, with_filters(None, Some(&["c"])))
        .await
        .id;
    create_endpoint_with(
        store,
        app.id,
        with_filters(Some(&["other.type"]), Some(&["c"])),
    )
    .await;

    let send = |channels: Option<&[&str]>| {
        let mut new = new_message(app.id, "user.created");
        new.channels = channels.map(strings);
        new
    };
    let msg = store.create_message(send(Some(&["b"]))).await.unwrap();
    assert_eq!(msg.deliveries, 2);
    assert_eq!(
        targets(store, app.id, msg.message.id).await,
        BTreeSet::from([any, ab])
    );

    let msg = store.create_message(send(None)).await.unwrap();
    assert_eq!(
        msg.deliveries, 1,
        "a message without channels skips channel-filtered endpoints"
    );
    assert_eq!(
        targets(store, app.id, msg.message.id).await,
        BTreeSet::from([any])
    );

    let msg = store.create_message(send(Some(&["a", "c"]))).await.unwrap();
    assert_eq!(
        msg.deliveries, 4,
        "both filters must match (the typed endpoint is skipped)"
    );
    assert_eq!(
        targets(store, app.id, msg.message.id).await,
        BTreeSet::from([any, a, ab, c])
    );
}

/// A disabled endpoint still gets its delivery row, `Held` instead of `Pending`.
pub async fn a_disabled_endpoint_gets_a_held_delivery(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let enabled = create_endpoint(store, app.id).await.id;
    let disabled = create_endpoint_with(
        store,
        app.id,
        EndpointFields {
            disabled: true,
            ..endpoint_fields("https://example.com/off")
        },
    )
    .await
    .id;
    let msg = store
        .create_message(new_message(app.id, "user.created"))
        .await
        .unwrap();
    assert_eq!(msg.deliveries, 2);
    let deliveries = store.list_deliveries(app.id, msg.message.id).await.unwrap();
    assert_eq!(deliveries.len(), 2);
    for d in deliveries {
        let expected = if d.endpoint_id == disabled {
            DeliveryStatus::Held
        } else {
            assert_eq!(d.endpoint_id, enabled);
            DeliveryStatus::Pending
        };
        assert_eq!(d.status, expected);
    }
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_fanout {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_message_fans_out_to_every_endpoint_without_filters,
            event_type_filters_choose_the_endpoints,
            channel_filters_choose_the_endpoints,
            a_disabled_endpoint_gets_a_held_delivery,
        );
    };
}
