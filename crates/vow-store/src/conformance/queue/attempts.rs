//! Cases about listing attempts: filters, paging, and isolation between applications.

use crate::Store;
use vow_core::AttemptId;

use super::*;
use crate::queue::{
    AttemptFilter, NextState, RecentAttempt, StatusClass, TailFilter, TailScope, TailedAttempt,
    EXCERPT_CHARS,
};

/// Attempts list by message and by endpoint, page through without gaps in both directions,
/// and filter by success, status code, class of status (or no answer), start time (strictly
/// before / after), and the message's event type and channel.
pub async fn attempts_are_listed_by_message_and_by_endpoint_with_paging_and_filters(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let a = create_endpoint(store, app.id).await.id;
    let b = create_endpoint(store, app.id).await.id;
    let m1 = message_at(store, app.id, 10).await;
    let m2 = message_at(store, app.id, 11).await;
    let billing = NewMessage {
        now: t(12),
        channels: Some(vec!["billing".into()]),
        ..new_message(app.id, "invoice.paid")
    };
    let m3 = store.create_message(billing).await.unwrap().message.id;
    let mut made = round(store, 100, 100, 500, retry_at(200)).await;
    made.extend(round(store, 200, 200, 404, retry_at(300)).await);
    made.extend(round(store, 300, 300, 200, || NextState::Delivered).await);
    let m4 = message_at(store, app.id, 350).await;
    let unanswered = round_answered(store, 400, 400, None, None, retry_at(500)).await;
    assert!(unanswered.iter().all(|x| x.msg_id == m4));
    made.extend(unanswered);
    assert_eq!(made.len(), 20);
    let all = made;

    let by_message = |msg: MessageId| {
        let filter = AttemptFilter {
            msg_id: Some(msg),
            ..AttemptFilter::default()
        };
        move |seek: Seek| {
            let filter = filter.clone();
            async move {
                let rows = store.list_attempts(app.id, &filter, &seek).await.unwrap();
                rows.into_iter()
                    .map(|a| a.id.to_string())
                    .collect::<Vec<_>>()
            }
        }
    };
    assert_pages(&ids_where(&all, |x| x.msg_id == m1), by_message(m1)).await;
    assert_pages(&ids_where(&all, |x| x.msg_id == m2), by_message(m2)).await;
    let by_endpoint = |ep: EndpointId| {
        let filter = AttemptFilter {
            endpoint_id: Some(ep),
            ..AttemptFilter::default()
        };
        move |seek: Seek| {
            let filter = filter.clone();
            async move {
                let rows = store.list_attempts(app.id, &filter, &seek).await.unwrap();
                rows.into_iter()
                    .map(|a| a.id.to_string())
                    .collect::<Vec<_>>()
            }
        }
    };
    assert_pages(&ids_where(&all, |x| x.endpoint_id == a), by_endpoint(a)).await;

    let newest = Seek::for_iterator(None, Order::Descending, 100);
    let newest_first = store
        .list_attempts(app.id, &AttemptFilter::default(), &newest)
        .await
        .unwrap();
    let mut expected = ids_where(&all, |_| true);
    expected.reverse();
    let got: Vec<String> = newest_first.iter().map(|x| x.id.to_string()).collect();
    assert_eq!(got, expected, "the whole application, descending");
    let by_id = |id: AttemptId| all.iter().find(|x| x.id == id).cloned();
    for got in newest_first {
        assert_eq!(Some(got.clone()), by_id(got.id), "every field as recorded");
    }

    let f = AttemptFilter::default;
    let cases: Vec<(AttemptFilter, Keep<'_>)> = vec![
        (
            AttemptFilter {
                success: Some(true),
                ..f()
            },
            Box::new(|x| x.attempt.success),
        ),
        (
            AttemptFilter {
                success: Some(false),
                msg_id: Some(m1),
                ..f()
            },
            Box::new(|x| !x.attempt.success && x.msg_id == m1),
        ),
        (
            AttemptFilter {
                status_code: Some(404),
                ..f()
            },
            Box::new(|x| x.attempt.response_status == Some(404)),
        ),
        (
            AttemptFilter {
                msg_id: Some(m2),
                endpoint_id: Some(b),
                ..f()
            },
            Box::new(|x| x.msg_id == m2 && x.endpoint_id == b),
        ),
        (
            AttemptFilter {
                status_class: Some(StatusClass::Answered(400)),
                ..f()
            },
            Box::new(|x| x.attempt.response_status == Some(404)),
        ),
        (
            AttemptFilter {
                status_class: Some(StatusClass::Answered(200)),
                endpoint_id: Some(b),
                ..f()
            },
            Box::new(|x| x.attempt.response_status == Some(200) && x.endpoint_id == b),
        ),
        (
            AttemptFilter {
                status_class: Some(StatusClass::NoResponse),
                ..f()
            },
            Box::new(|x| x.attempt.response_status.is_none()),
        ),
        (
            AttemptFilter {
                event_types: vec!["invoice.paid".into()],
                ..f()
            },
            Box::new(|x| x.msg_id == m3),
        ),
        (
            AttemptFilter {
                event_types: vec!["invoice.paid".into(), "user.created".into()],
                status_code: Some(500),
                ..f()
            },
            Box::new(|x| x.attempt.response_status == Some(500)),
        ),
        (
            AttemptFilter {
                channel: Some("billing".into()),
                endpoint_id: Some(a),
                ..f()
            },
            Box::new(|x| x.msg_id == m3 && x.endpoint_id == a),
        ),
        (
            AttemptFilter {
                before: Some(t(102)),
                ..f()
            },
            Box::new(|x| x.attempt.started_at < t(102)),
        ),
        (
            AttemptFilter {
                after: Some(t(300)),
                endpoint_id: Some(a),
                ..f()
            },
            Box::new(|x| x.attempt.started_at > t(300) && x.endpoint_id == a),
        ),
        (
            AttemptFilter {
                after: Some(t(100)),
                before: Some(t(203)),
                ..f()
            },
            Box::new(|x| x.attempt.started_at > t(100) && x.attempt.started_at < t(203)),
        ),
    ];
    for (i, (filter, keep)) in cases.into_iter().enumerate() {
        let expected = ids_where(&all, keep);
        assert!(!expected.is_empty(), "filter {i} selects something");
        assert!(
            expected.len() < all.len(),
            "filter {i} leaves something out"
        );
        assert_eq!(listed(store, app.id, filter).await, expected, "filter {i}");
    }
    assert_eq!(
        listed(
            store,
            app.id,
            AttemptFilter {
                before: Some(t(100)),
                ..f()
            }
        )
        .await
        .len(),
        0
    );
}

/// Application B sees none of A's attempts, whatever it filters on; an attempt read through the
/// wrong application or message is not there, and cannot be expunged that way.
pub async fn attempts_are_invisible_through_another_application(store: &dyn Store) {
    let a = create_app(store, "A").await;
    let b = create_app(store, "B").await;
    let ep_a = create_endpoint(store, a.id).await.id;
    create_endpoint(store, b.id).await;
    let m_a = message_at(store, a.id, 10).await;
    let other_a = message_at(store, a.id, 11).await;
    let m_b = message_at(store, b.id, 12).await;
    let all = round(store, 50, 50, 500, retry_at(100)).await;
    assert_eq!(all.len(), 3);
    let mine = all.iter().find(|x| x.msg_id == m_a).unwrap().clone();
    let theirs = all.iter().find(|x| x.msg_id == m_b).unwrap().clone();

    for filter in [
        AttemptFilter::default(),
        AttemptFilter {
            msg_id: Some(m_a),
            ..AttemptFilter::default()
        },
        AttemptFilter {
            endpoint_id: Some(ep_a),
            ..AttemptFilter::default()
        },
        AttemptFilter {
            event_types: vec!["user.created".into()],
            ..AttemptFilter::default()
        },
    ] {
        let seen = listed(store, b.id, filter).await;
        assert!(!seen.contains(&mine.id.to_string()), "B sees A's attempt");
    }
    assert_eq!(
        listed(store, b.id, AttemptFilter::default()).await,
        vec![theirs.id.to_string()]
    );
    assert_eq!(store.get_attempt(b.id, m_a, mine.id).await.unwrap(), None);
    assert_eq!(
        store.get_attempt(a.id, other_a, mine.id).await.unwrap(),
        None
    );
    assert_eq!(
        store.get_attempt(a.id, m_a, mine.id).await.unwrap(),
        Some(mine.clone())
    );
    assert_not_found(
        store.expunge_attempt_content(b.id, m_a, mine.id).await,
        "attempt",
    );
    assert_not_found(store.expunge_message_content(b.id, m_a).await, "message");
    assert_eq!(
        store.get_attempt(a.id, m_a, mine.id).await.unwrap(),
        Some(mine)
    );
}

/// An endpoint list's health read: the newest attempts of each endpoint asked for, at most the
/// number asked, in the order the endpoints were given and newest first within one; a failure
/// carries its response cut at [`EXCERPT_CHARS`] characters, a success none; another
/// application's endpoint gives nothing.
pub async fn recent_attempts_are_each_endpoints_newest_in_the_order_asked(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let a = create_endpoint(store, app.id).await.id;
    let b = create_endpoint(store, app.id).await.id;
    let other = create_app(store, "Other").await;
    let theirs = create_endpoint(store, other.id).await.id;
    message_at(store, app.id, 10).await;
    message_at(store, app.id, 11).await;
    message_at(store, other.id, 12).await;
    let long = "é".repeat(EXCERPT_CHARS + 50);
    let mut all = round(store, 100, 100, 500, retry_at(200)).await;
    all.extend(round_answered(store, 200, 200, Some(503), Some(&long), retry_at(300)).await);
    all.extend(round(store, 300, 300, 200, || NextState::Delivered).await);
    assert_eq!(all.len(), 15, "5 deliveries, 3 attempts each");

    let newest = |endpoint: EndpointId, each: usize| {
        let mut mine: Vec<&Attempt> = all.iter().filter(|x| x.endpoint_id == endpoint).collect();
        mine.sort_by_key(|x| std::cmp::Reverse(x.id.to_string()));
        mine.into_iter().take(each).map(|x| RecentAttempt {
            id: x.id,
            endpoint_id: x.endpoint_id,
            started_at: x.attempt.started_at,
            response_status: x.attempt.response_status,
            duration_ms: x.attempt.duration_ms,
            success: x.attempt.success,
            error: x.attempt.error.clone(),
            excerpt: if x.attempt.success {
                String::new()
            } else {
                x.attempt.response.chars().take(EXCERPT_CHARS).collect()
            },
        })
    };
    for each in [1, 4, 100] {
        let got = store
            .recent_attempts(app.id, &[b, theirs, a], each)
            .await
            .unwrap();
        let expected: Vec<RecentAttempt> = newest(b, each).chain(newest(a, each)).collect();
        assert_eq!(got, expected, "{each} per endpoint");
    }
    let cut = store.recent_attempts(app.id, &[a], 4).await.unwrap();
    assert!(
        cut[0].success && cut[0].excerpt.is_empty(),
        "a success has no excerpt"
    );
    assert_eq!(
        cut[2].excerpt.chars().count(),
        EXCERPT_CHARS,
        "cut in characters"
    );
    assert_eq!(cut[2].response_status, Some(503));
    assert!(store
        .recent_attempts(app.id, &[], 4)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .recent_attempts(other.id, &[a, b], 4)
        .await
        .unwrap()
        .is_empty());
}

/// A tail: the attempts after a cursor, oldest id first, at most the limit asked, so paging by
/// the last id read sees each once; filtered by application, endpoint (within its application)
/// and outcome, never showing another application's attempts when an application is given. Each
/// carries its message's event type, its number within its delivery and, while the delivery
/// waits for a retry, the retry's time.
pub async fn a_tail_reads_the_attempts_after_its_cursor_in_order_and_filtered(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let a = create_endpoint(store, app.id).await.id;
    let b = create_endpoint(store, app.id).await.id;
    let other = create_app(store, "Other").await;
    let theirs = create_endpoint(store, other.id).await.id;
    let start = AttemptId::new();
    message_of_type(store, app.id, 10, "user.created").await;
    message_of_type(store, other.id, 11, "invoice.paid").await;
    let tail = |filter: TailFilter, after: AttemptId, limit: usize| async move {
        store.tail_attempts(&filter, after, limit).await.unwrap()
    };
    let ids = |rows: &[TailedAttempt]| rows.iter().map(|x| x.id.to_string()).collect::<Vec<_>>();

    let first = round(store, 100, 100, 500, retry_at(200)).await;
    assert_eq!(first.len(), 3, "one message to a and b, one to theirs");
    let waiting = tail(TailFilter::default(), start, 100).await;
    assert_eq!(ids(&waiting), ids_where(&first, |_| true));
    let of_a = waiting.iter().find(|x| x.endpoint_id == a).unwrap();
    let made = first.iter().find(|x| x.endpoint_id == a).unwrap();
    assert_eq!(
        of_a,
        &TailedAttempt {
            id: made.id,
            app_id: app.id,
            msg_id: made.msg_id,
            endpoint_id: a,
            started_at: made.attempt.started_at,
            url: made.attempt.url.clone(),
            response_status: Some(500),
            duration_ms: made.attempt.duration_ms,
            success: false,
            error: None,
            event_type: "user.created".into(),
            attempt: 1,
            next_attempt_at: Some(t(200)),
        }
    );
    let of_theirs = waiting.iter().find(|x| x.endpoint_id == theirs).unwrap();
    assert_eq!(
        (of_theirs.app_id, of_theirs.event_type.as_str()),
        (other.id, "invoice.paid")
    );

    let second = round(store, 200, 200, 200, || NextState::Delivered).await;
    let all: Vec<Attempt> = first.into_iter().chain(second).collect();
    let everything = tail(TailFilter::default(), start, 100).await;
    assert_eq!(ids(&everything), ids_where(&all, |_| true));
    let again = everything.iter().find(|x| x.endpoint_id == a && x.success);
    let again = again.expect("a's second attempt");
    assert_eq!((again.attempt, again.next_attempt_at), (2, None));
    assert!(
        everything.iter().all(|x| x.next_attempt_at.is_none()),
        "nothing waits for a retry once delivered"
    );

    let mut paged = Vec::new();
    let mut cursor = start;
    loop {
        let page = tail(TailFilter::default(), cursor, 4).await;
        assert!(page.len() <= 4);
        let Some(last) = page.last() else { break };
        cursor = last.id;
        paged.extend(ids(&page));
    }
    assert_eq!(paged, ids_where(&all, |_| true), "each once, in order");
    let third = everything[2].id;
    assert_eq!(
        ids(&tail(TailFilter::default(), third, 100).await),
        ids_where(&all, |x| x.id > third),
        "strictly after the cursor"
    );

    let mine = TailFilter {
        scope: TailScope::App(app.id),
        ..TailFilter::default()
    };
    let cases: Vec<(TailFilter, Keep<'_>)> = vec![
        (mine.clone(), Box::new(|x| x.app_id == app.id)),
        (
            TailFilter {
                scope: TailScope::App(other.id),
                ..TailFilter::default()
            },
            Box::new(|x| x.app_id == other.id),
        ),
        (
            TailFilter {
                scope: TailScope::Endpoint(app.id, b),
                ..TailFilter::default()
            },
            Box::new(|x| x.endpoint_id == b),
        ),
        (
            TailFilter {
                success: Some(false),
                ..mine.clone()
            },
            Box::new(|x| x.app_id == app.id && !x.attempt.success),
        ),
        (
            TailFilter {
                success: Some(true),
                ..TailFilter::default()
            },
            Box::new(|x| x.attempt.success),
        ),
        (
            TailFilter {
                scope: TailScope::Endpoint(app.id, theirs),
                ..TailFilter::default()
            },
            Box::new(|_| false),
        ),
    ];
    for (filter, keep) in cases {
        let expected = ids_where(&all, keep);
        assert_eq!(
            ids(&tail(filter.clone(), start, 100).await),
            expected,
            "{filter:?}"
        );
    }
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_attempts {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            attempts_are_listed_by_message_and_by_endpoint_with_paging_and_filters,
            attempts_are_invisible_through_another_application,
            recent_attempts_are_each_endpoints_newest_in_the_order_asked,
            a_tail_reads_the_attempts_after_its_cursor_in_order_and_filtered,
        );
    };
}
