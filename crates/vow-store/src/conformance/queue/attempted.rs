//! Cases about Svix's attempted destinations and attempted messages (each row with its
//! delivery's status) and about a message sent to one endpoint only (send-example).

use super::*;
use crate::queue::{DeliveryState, MessageStatus};
use crate::Store;
use crate::{DeliveryStatus, EndpointFields, MessageCreate, MessageFilter};

/// The status of each listed row, by key.
fn statuses<'a>(
    rows: impl Iterator<Item = (String, &'a DeliveryState)>,
) -> Vec<(String, MessageStatus)> {
    rows.map(|(k, d)| (k, d.status)).collect()
}

/// One delivery each: delivered, dead-lettered, leased, retrying, held; a filtered-out endpoint
/// is not a destination. Listed by endpoint id, in pages, and only through the message's own
/// application.
pub async fn attempted_destinations_are_the_messages_endpoints_with_their_status(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let other = create_app(store, "Other").await;
    let mut eps = Vec::new();
    for _ in 0..4 {
        eps.push(create_endpoint(store, app.id).await.id);
    }
    let disabled = EndpointFields {
        disabled: true,
        ..endpoint_fields("https://example.com/off")
    };
    eps.push(create_endpoint_with(store, app.id, disabled).await.id);
    let filtered = EndpointFields {
        event_types: Some(strings(&["invoice.paid"])),
        ..endpoint_fields("https://example.com/invoices")
    };
    create_endpoint_with(store, app.id, filtered).await;
    let m = message_at(store, app.id, 10).await;

    let claimed = claim(store, 50).await;
    let by_ep = |ep: EndpointId| {
        claimed
            .iter()
            .find(|c| c.delivery.endpoint_id == ep)
            .unwrap()
    };
    let retry = NextState::RetryAt {
        at: t(300),
        client_errors: 0,
    };
    record_all(
        store,
        vec![
            outcome(by_ep(eps[0]), Some(200), NextState::Delivered, 51),
            outcome(by_ep(eps[1]), Some(500), dead_letter("5xx"), 51),
            outcome(by_ep(eps[3]), Some(503), retry, 51),
        ],
    )
    .await;

    let list = |seek: Seek| async move {
        let rows = store.list_attempted_destinations(app.id, m, t(60), &seek);
        rows.await.unwrap()
    };
    let rows = list(Seek::for_iterator(None, Order::Ascending, 100)).await;
    let mut expected_eps = eps.clone();
    expected_eps.sort();
    let listed: Vec<EndpointId> = rows.iter().map(|r| r.endpoint.id).collect();
    assert_eq!(
        listed, expected_eps,
        "every destination once, by endpoint id"
    );
    let got = statuses(
        rows.iter()
            .map(|r| (r.endpoint.id.to_string(), &r.delivery)),
    );
    let want = [
        (eps[0], MessageStatus::Success),
        (eps[1], MessageStatus::Fail),
        (eps[2], MessageStatus::Sending),
        (eps[3], MessageStatus::Pending),
        (eps[4], MessageStatus::Pending),
    ];
    for (ep, status) in want {
        assert!(
            got.contains(&(ep.to_string(), status)),
            "{ep} is {status:?}: {got:?}"
        );
    }
    let row = rows.iter().find(|r| r.endpoint.id == eps[3]).unwrap();
    assert_eq!(row.delivery.delivery.next_attempt_at, t(300));
    assert_eq!(row.delivery.delivery.msg_id, m);
    let held = rows.iter().find(|r| r.endpoint.id == eps[4]).unwrap();
    assert_eq!(held.delivery.delivery.status, DeliveryStatus::Held);
    assert!(held.endpoint.fields.disabled, "the endpoint as it is now");

    // Once the lease has run out, the leased one is pending again.
    let later = store
        .list_attempted_destinations(app.id, m, t(200), &all(100))
        .await
        .unwrap();
    let row = later.iter().find(|r| r.endpoint.id == eps[2]).unwrap();
    assert_eq!(row.delivery.status, MessageStatus::Pending);

    let keys: Vec<Key> = expected_eps.iter().map(ToString::to_string).collect();
    assert_pages(&keys, |seek| async move {
        let page = list(seek).await;
        page.iter().map(|r| r.endpoint.id.to_string()).collect()
    })
    .await;

    let seek = all(100);
    let foreign = store.list_attempted_destinations(other.id, m, t(60), &seek);
    assert!(
        foreign.await.unwrap().is_empty(),
        "another application sees nothing"
    );
}

/// An endpoint's messages, newest first by default, each with its delivery's status; filtered
/// by status, event type, channel and time; only the endpoint's own and only through its
/// application.
pub async fn attempted_messages_are_an_endpoints_messages_filtered_by_status_and_fields(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let other = create_app(store, "Other").await;
    let ep = create_endpoint(store, app.id).await.id;
    let invoices = EndpointFields {
        event_types: Some(strings(&["invoice.paid"])),
        ..endpoint_fields("https://example.com/invoices")
    };
    let ep2 = create_endpoint_with(store, app.id, invoices).await.id;
    let delivered = message_at(store, app.id, 10).await;
    let failed = message_of_type(store, app.id, 11, "invoice.paid").await;
    let new = NewMessage {
        now: t(12),
        channels: Some(strings(&["eu"])),
        ..new_message(app.id, "user.created")
    };
    let on_channel = store.create_message(new).await.unwrap().message.id;
    let waiting = message_at(store, app.id, 500).await;
    message_at(store, other.id, 10).await;

    let claimed = claim(store, 50).await;
    let find = |m: MessageId| {
        claimed
            .iter()
            .find(|c| c.delivery.msg_id == m && c.delivery.endpoint_id == ep)
            .unwrap()
    };
    record_all(
        store,
        vec![
            outcome(find(delivered), Some(200), NextState::Delivered, 51),
            outcome(find(failed), Some(500), dead_letter("5xx"), 51),
        ],
    )
    .await;

    let ids = |status: Option<MessageStatus>, filter: MessageFilter| async move {
        let rows = store
            .list_attempted_messages(app.id, ep, &filter, status, t(60), &all(100))
            .await
            .unwrap();
        rows.into_iter().map(|r| r.message.id).collect::<Vec<_>>()
    };
    let none = MessageFilter::default();
    let mut everything = vec![delivered, failed, on_channel, waiting];
    everything.sort();
    everything.reverse();
    assert_eq!(ids(None, none.clone()).await, everything, "newest first");
    assert_eq!(
        ids(Some(MessageStatus::Success), none.clone()).await,
        vec![delivered]
    );
    assert_eq!(
        ids(Some(MessageStatus::Fail), none.clone()).await,
        vec![failed]
    );
    assert_eq!(
        ids(Some(MessageStatus::Sending), none.clone()).await,
        vec![on_channel]
    );
    assert_eq!(
        ids(Some(MessageStatus::Pending), none.clone()).await,
        vec![waiting]
    );
    let invoice = MessageFilter {
        event_types: strings(&["invoice.paid"]),
        ..MessageFilter::default()
    };
    assert_eq!(ids(None, invoice).await, vec![failed]);
    let eu = MessageFilter {
        channel: Some("eu".into()),
        ..MessageFilter::default()
    };
    assert_eq!(ids(None, eu).await, vec![on_channel]);
    let window = MessageFilter {
        after: Some(t(10)),
        before: Some(t(500)),
        ..MessageFilter::default()
    };
    let mut middle = vec![failed, on_channel];
    middle.sort();
    middle.reverse();
    assert_eq!(
        ids(None, window).await,
        middle,
        "before and after are strict"
    );

    let rows = store
        .list_attempted_messages(app.id, ep, &none, None, t(60), &all(100))
        .await
        .unwrap();
    let row = rows.iter().find(|r| r.message.id == delivered).unwrap();
    assert_eq!(row.message.payload.as_deref(), Some(r#"{"hello":"world"}"#));
    assert_eq!(row.delivery.delivery.endpoint_id, ep);
    assert_eq!(row.delivery.delivery.status, DeliveryStatus::Delivered);

    let only_invoices = store
        .list_attempted_messages(app.id, ep2, &none, None, t(60), &all(100))
        .await
        .unwrap();
    let listed: Vec<MessageId> = only_invoices.iter().map(|r| r.message.id).collect();
    assert_eq!(listed, vec![failed], "only what went to that endpoint");

    let mut keys: Vec<Key> = everything.iter().map(ToString::to_string).collect();
    keys.sort();
    assert_pages(&keys, |seek| async move {
        let page = store
            .list_attempted_messages(app.id, ep, &MessageFilter::default(), None, t(60), &seek)
            .await
            .unwrap();
        page.iter().map(|r| r.message.id.to_string()).collect()
    })
    .await;

    let seek = all(100);
    let foreign = store.list_attempted_messages(other.id, ep, &none, None, t(60), &seek);
    assert!(
        foreign.await.unwrap().is_empty(),
        "another application sees nothing"
    );
}

/// A message to one endpoint gets exactly one delivery, there, whatever the endpoint's filters
/// (held when it is disabled); another application's endpoint or a missing application is
/// `NotFound` and writes nothing.
pub async fn a_message_to_one_endpoint_is_delivered_there_only(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let other = create_app(store, "Other").await;
    let everything = create_endpoint(store, app.id).await.id;
    let invoices = EndpointFields {
        event_types: Some(strings(&["invoice.paid"])),
        ..endpoint_fields("https://example.com/invoices")
    };
    let target = create_endpoint_with(store, app.id, invoices).await.id;
    let off = EndpointFields {
        disabled: true,
        ..endpoint_fields("https://example.com/off")
    };
    let disabled = create_endpoint_with(store, app.id, off).await.id;
    let foreign = create_endpoint(store, other.id).await.id;

    let new = new_message(app.id, "user.created");
    let created = create_to(store, new.clone(), target).await.unwrap();
    assert_eq!(created.deliveries, 1);
    assert_eq!(created.message.id, new.id);
    let deliveries = store.list_deliveries(app.id, new.id).await.unwrap();
    assert_eq!(deliveries.len(), 1, "not fanned out to {everything}");
    assert_eq!(deliveries[0].endpoint_id, target);
    assert_eq!(deliveries[0].status, DeliveryStatus::Pending);
    assert_eq!(deliveries[0].next_attempt_at, new.now);

    let held = new_message(app.id, "user.created");
    create_to(store, held.clone(), disabled).await.unwrap();
    let deliveries = store.list_deliveries(app.id, held.id).await.unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].status, DeliveryStatus::Held);

    for (app_id, ep, what) in [
        (app.id, foreign, "endpoint"),
        (app.id, EndpointId::new(), "endpoint"),
        (AppId::new(), target, "application"),
    ] {
        let lost = new_message(app_id, "user.created");
        let r = create_to(store, lost.clone(), ep).await;
        assert_not_found(r, what);
        let key = crate::MessageKey::Id(lost.id);
        assert_eq!(
            store.get_message(app_id, &key).await.unwrap(),
            None,
            "nothing written"
        );
    }
}

/// [`crate::Messages::create_message_keyed`] to `only`, whatever its filters, without a key.
async fn create_to(
    store: &dyn Store,
    new: NewMessage,
    only: EndpointId,
) -> crate::StoreResult<crate::CreatedMessage> {
    let create = MessageCreate {
        new,
        only: Some(only),
        app: None,
    };
    Ok(store.create_message_keyed(create, None).await?.0)
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_attempted {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            attempted_destinations_are_the_messages_endpoints_with_their_status,
            attempted_messages_are_an_endpoints_messages_filtered_by_status_and_fields,
            a_message_to_one_endpoint_is_delivered_there_only,
        );
    };
}
