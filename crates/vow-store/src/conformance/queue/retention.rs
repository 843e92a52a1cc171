//! Cases about removing attempt content and attempts: expunge on request, cascades from
//! endpoints and applications, and retention purges (of content, and of whole messages).

use crate::Store;
use vow_core::AttemptId;

use super::*;
use crate::queue::AttemptFilter;
use crate::{MessageFilter, MessageKey, NewMessage, Order, Seek};

/// Expunging a message drops its payload and its attempts' response bodies, nothing else.
pub async fn expunging_a_message_removes_its_payload_and_its_attempts_responses(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    create_endpoint(store, app.id).await;
    let m1 = message_at(store, app.id, 10).await;
    let m2 = message_at(store, app.id, 11).await;
    let mut all = round(store, 50, 50, 500, retry_at(100)).await;
    all.extend(round(store, 100, 100, 500, retry_at(200)).await);

    store.expunge_message_content(app.id, m1).await.unwrap();
    let payload = |m| async move {
        let found = store.get_message(app.id, &MessageKey::Id(m)).await.unwrap();
        found.expect("messages are kept").payload
    };
    assert_eq!(payload(m1).await, None);
    assert!(payload(m2).await.is_some());
    for before in &all {
        let after = store.get_attempt(app.id, before.msg_id, before.id).await;
        let after = after.unwrap().expect("the attempt is kept");
        if before.msg_id == m1 {
            let expunged = Attempt {
                attempt: NewAttempt {
                    response: String::new(),
                    ..before.attempt.clone()
                },
                ..before.clone()
            };
            assert_eq!(after, expunged, "only the response goes");
        } else {
            assert_eq!(&after, before);
        }
    }
    let claimed = claim(store, 200).await;
    assert_eq!(claimed.len(), 4);
    for c in claimed {
        assert_eq!(c.payload.is_none(), c.delivery.msg_id == m1);
    }
    assert_not_found(
        store
            .expunge_message_content(app.id, MessageId::new())
            .await,
        "message",
    );
}

/// Expunging an attempt drops its response body alone; a missing one is `NotFound`.
pub async fn expunging_an_attempt_removes_only_its_response(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let m = message_at(store, app.id, 10).await;
    let mut all = round(store, 50, 50, 500, retry_at(100)).await;
    all.extend(round(store, 100, 100, 502, retry_at(200)).await);
    let (gone, kept) = (&all[0], &all[1]);

    store
        .expunge_attempt_content(app.id, m, gone.id)
        .await
        .unwrap();
    let after = store
        .get_attempt(app.id, m, gone.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.attempt.response, "");
    assert_eq!(after.attempt.response_status, Some(500), "the rest stays");
    let other = store.get_attempt(app.id, m, kept.id).await.unwrap();
    assert_eq!(other.as_ref(), Some(kept));
    assert!(store
        .get_message(app.id, &MessageKey::Id(m))
        .await
        .unwrap()
        .unwrap()
        .payload
        .is_some());
    assert_not_found(
        store
            .expunge_attempt_content(app.id, m, AttemptId::new())
            .await,
        "attempt",
    );
    assert_not_found(
        store
            .expunge_attempt_content(app.id, MessageId::new(), kept.id)
            .await,
        "attempt",
    );
}

/// Deleting an endpoint deletes its attempts; deleting the application deletes the rest.
pub async fn deleting_an_endpoint_or_an_application_removes_its_attempts(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let a = create_endpoint(store, app.id).await.id;
    let b = create_endpoint(store, app.id).await.id;
    message_at(store, app.id, 10).await;
    message_at(store, app.id, 11).await;
    let all = round(store, 50, 50, 500, retry_at(100)).await;
    assert_eq!(all.len(), 4);

    store.delete_endpoint(app.id, a).await.unwrap();
    let left = listed(store, app.id, AttemptFilter::default()).await;
    assert_eq!(left, ids_where(&all, |x| x.endpoint_id == b));
    for x in all.iter().filter(|x| x.endpoint_id == a) {
        assert_eq!(
            store.get_attempt(app.id, x.msg_id, x.id).await.unwrap(),
            None
        );
    }
    let by_a = AttemptFilter {
        endpoint_id: Some(a),
        ..AttemptFilter::default()
    };
    assert!(listed(store, app.id, by_a).await.is_empty());

    store.delete_application(app.id).await.unwrap();
    assert!(listed(store, app.id, AttemptFilter::default())
        .await
        .is_empty());
    for x in &all {
        assert_eq!(
            store.get_attempt(app.id, x.msg_id, x.id).await.unwrap(),
            None
        );
    }
}

/// Retention clears payloads with `payload_expires_at <= now` and response bodies of attempts
/// started before the cut-off, at most `batch` of each per call, and reports what it changed.
pub async fn purging_respects_the_deadlines_and_the_batch_size(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let mut expiring = Vec::new();
    for (i, expires) in [100, 100, 99, 101].into_iter().enumerate() {
        let new = NewMessage {
            now: t(5 + i as i64),
            payload_expires_at: t(expires),
            ..new_message(app.id, "user.created")
        };
        store.create_message(new.clone()).await.unwrap();
        expiring.push((new.id, expires <= 100));
    }
    // Attempts started at t(10) to t(13), then at t(300) to t(303).
    let mut all = round(store, 50, 10, 500, retry_at(60)).await;
    all.extend(round(store, 60, 300, 500, retry_at(70)).await);
    assert_eq!(all.len(), 8);
    let responses_before = t(13);

    let purge = || store.purge_expired(t(100), responses_before, 2);
    assert_eq!(purge().await.unwrap(), 4, "2 payloads + 2 responses");
    assert_eq!(purge().await.unwrap(), 2, "1 payload + 1 response");
    assert_eq!(purge().await.unwrap(), 0, "nothing left to purge");

    for (id, expired) in expiring {
        let m = store
            .get_message(app.id, &MessageKey::Id(id))
            .await
            .unwrap();
        let payload = m.expect("messages are kept").payload;
        assert_eq!(payload.is_none(), expired, "message {id}");
    }
    for x in &all {
        let got = store
            .get_attempt(app.id, x.msg_id, x.id)
            .await
            .unwrap()
            .unwrap();
        let old = x.attempt.started_at < responses_before;
        assert_eq!(
            got.attempt.response.is_empty(),
            old,
            "attempt at {}",
            x.attempt.started_at
        );
        assert_eq!(got.attempt.response_status, Some(500));
    }
}

/// A purge with a `batch` of 0 changes nothing, however much is due.
pub async fn purging_with_a_batch_of_zero_changes_nothing(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let new = NewMessage {
        now: t(10),
        payload_expires_at: t(20),
        ..new_message(app.id, "user.created")
    };
    store.create_message(new.clone()).await.unwrap();
    let written = round(store, 50, 30, 500, retry_at(100)).await;
    assert_eq!(written.len(), 1);

    assert_eq!(store.purge_expired(t(100), t(100), 0).await.unwrap(), 0);
    let message = store.get_message(app.id, &MessageKey::Id(new.id)).await;
    let message = message.unwrap().expect("messages are kept");
    assert_eq!(message.payload.as_deref(), Some(new.payload.as_str()));
    let attempt = store
        .get_attempt(app.id, new.id, written[0].id)
        .await
        .unwrap();
    assert_eq!(attempt.as_ref(), Some(&written[0]), "the response is kept");
    assert_eq!(
        store.purge_expired(t(100), t(100), 1).await.unwrap(),
        2,
        "both were due: a payload and a response"
    );
}

/// A message of `app` made at `t(secs)`, its id too, on `channels`.
async fn message_made_at(store: &dyn Store, app: AppId, secs: i64, channels: &[&str]) -> MessageId {
    let new = NewMessage {
        id: MessageId::new_at(t(secs)),
        now: t(secs),
        channels: (!channels.is_empty()).then(|| channels.iter().map(|c| c.to_string()).collect()),
        ..new_message(app, "user.created")
    };
    created(store, new).await
}

/// Whether `msg` is gone with every row about it: the message, its deliveries and attempts, and
/// its place in its channel's listing.
async fn gone(store: &dyn Store, app: AppId, msg: MessageId, channel: &str) -> bool {
    let found = store.get_message(app, &MessageKey::Id(msg)).await.unwrap();
    let deliveries = store.list_deliveries(app, msg).await.unwrap_or_default();
    let attempts = attempts_of(store, app, msg).await;
    let filter = MessageFilter {
        channel: Some(channel.to_string()),
        ..MessageFilter::default()
    };
    let seek = Seek::for_iterator(None, Order::Descending, 100);
    let listed = store.list_messages(app, &filter, &seek).await.unwrap();
    let in_channel = listed.iter().any(|m| m.id == msg);
    match (
        found,
        deliveries.is_empty(),
        attempts.is_empty(),
        in_channel,
    ) {
        (None, true, true, false) => true,
        (Some(_), false, _, _) => false,
        other => panic!("{msg} is half deleted: {other:?}"),
    }
}

/// Retention deletes the messages made before the cut-off whose deliveries all ended
/// (delivered, dead-lettered, held), in every application, with their deliveries, attempts and
/// channels; a message with a pending delivery stays, leased or not, and so does a newer one.
pub async fn purging_messages_deletes_old_ended_ones_with_their_rows(store: &dyn Store) {
    let (shop, other) = (
        create_app(store, "Shop").await,
        create_app(store, "Other").await,
    );
    create_endpoint(store, shop.id).await;
    create_endpoint(store, other.id).await;
    let delivered = message_made_at(store, shop.id, 10, &["eu"]).await;
    let dead = message_made_at(store, shop.id, 11, &["eu"]).await;
    let held = message_made_at(store, shop.id, 12, &["eu"]).await;
    let retrying = message_made_at(store, shop.id, 13, &["eu"]).await;
    let elsewhere = message_made_at(store, other.id, 14, &["eu"]).await;
    let newer = message_made_at(store, shop.id, 200, &["eu"]).await;

    let outcomes = claim(store, 50)
        .await
        .iter()
        .map(|c| {
            let m = c.delivery.msg_id;
            let next = if m == dead {
                dead_letter("gave up")
            } else if m == held {
                NextState::Hold
            } else if m == retrying {
                NextState::RetryAt {
                    at: t(500),
                    client_errors: 0,
                }
            } else {
                NextState::Delivered
            };
            outcome(
                c,
                Some(if m == delivered || m == elsewhere {
                    200
                } else {
                    500
                }),
                next,
                50,
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(outcomes.len(), 5, "all but the newer one were due");
    record(store, outcomes).await;

    assert_eq!(store.purge_messages(t(100), 100).await.unwrap(), 4);
    for (app, m) in [
        (shop.id, delivered),
        (shop.id, dead),
        (shop.id, held),
        (other.id, elsewhere),
    ] {
        assert!(
            gone(store, app, m, "eu").await,
            "{m} is past retention and ended"
        );
    }
    assert!(
        !gone(store, shop.id, retrying, "eu").await,
        "still retrying"
    );
    assert!(
        !gone(store, shop.id, newer, "eu").await,
        "made after the cut-off"
    );
    assert_eq!(attempts_of(store, shop.id, retrying).await.len(), 1);

    // The newer message leased, the older one still waiting: both pending, both kept.
    let leased = claim(store, 250).await;
    assert_eq!(claimed_messages(&leased), vec![newer]);
    assert_eq!(store.purge_messages(t(300), 100).await.unwrap(), 0);
    assert!(!gone(store, shop.id, newer, "eu").await);

    record(
        store,
        vec![outcome(&leased[0], Some(200), NextState::Delivered, 260)],
    )
    .await;
    let last = claim(store, 600).await;
    assert_eq!(claimed_messages(&last), vec![retrying]);
    record(
        store,
        vec![outcome(&last[0], Some(200), NextState::Delivered, 600)],
    )
    .await;
    assert_eq!(
        store.purge_messages(t(100), 100).await.unwrap(),
        1,
        "only the one made before"
    );
    assert!(gone(store, shop.id, retrying, "eu").await);
    assert!(!gone(store, shop.id, newer, "eu").await);
    assert_eq!(store.purge_messages(t(300), 100).await.unwrap(), 1);
    assert!(gone(store, shop.id, newer, "eu").await);
}

/// A message purge deletes at most `batch` messages per call; a `batch` of 0 deletes none.
pub async fn purging_messages_respects_the_batch_size(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let mut made = Vec::new();
    for secs in [10, 11, 12] {
        made.push(message_made_at(store, app.id, secs, &[]).await);
    }
    round(store, 50, 50, 200, || NextState::Delivered).await;

    assert_eq!(store.purge_messages(t(100), 0).await.unwrap(), 0);
    assert_eq!(store.purge_messages(t(100), 2).await.unwrap(), 2);
    assert_eq!(store.purge_messages(t(100), 2).await.unwrap(), 1);
    assert_eq!(store.purge_messages(t(100), 2).await.unwrap(), 0);
    for m in made {
        assert_eq!(
            store.get_message(app.id, &MessageKey::Id(m)).await.unwrap(),
            None
        );
    }
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_retention {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            expunging_a_message_removes_its_payload_and_its_attempts_responses,
            expunging_an_attempt_removes_only_its_response,
            deleting_an_endpoint_or_an_application_removes_its_attempts,
            purging_respects_the_deadlines_and_the_batch_size,
            purging_with_a_batch_of_zero_changes_nothing,
            purging_messages_deletes_old_ended_ones_with_their_rows,
            purging_messages_respects_the_batch_size,
        );
    };
}
