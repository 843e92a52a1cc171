//! Cases about a source's activity as `vow tail --source` reads it
//! ([`crate::inbound::activity`]): arrivals, refusals and each recorded forward outcome, in key
//! order after a cursor, paged, failures only, and never another source's.

use crate::Store;
use vow_core::RejectionId;

use super::inbound::{claim_new, delivery};
use super::inbound_work::{claim, destination, record, result, source_with, two_destinations};
use super::support::*;
use crate::inbound::activity::{Activity, ActivityFilter, ActivityKey};
use crate::inbound::processing::{Consumer, NextTry, Outcome};
use crate::inbound::{Claim, NewRejection};
use crate::InboundStore;

fn refused(source: vow_core::SourceId, secs: i64) -> NewRejection {
    NewRejection {
        id: RejectionId::new(),
        source_id: source,
        reason: "signature_mismatch".into(),
        status: 401,
        body_size: 2,
        now: t(secs),
    }
}

/// What each row is, in a few words: `event <id>`, `forward <event> <outcome>`, `rejection`.
fn said(rows: &[Activity]) -> Vec<String> {
    rows.iter()
        .map(|row| match row {
            Activity::Event(e) => format!("event {}", e.event_id.as_deref().unwrap_or("-")),
            Activity::Forward(f) => format!(
                "forward {} {}",
                f.provider_event_id.as_deref().unwrap_or("-"),
                f.forward.outcome.as_str()
            ),
            Activity::Rejection(r) => format!("rejection {}", r.reason),
        })
        .collect()
}

async fn tail(
    store: &dyn InboundStore,
    filter: &ActivityFilter,
    after: &ActivityKey,
    limit: usize,
) -> Vec<Activity> {
    store.tail_inbound(filter, after, limit).await.unwrap()
}

/// Arrivals (received, then a quarantined reuse of the id), a refusal and each destination's
/// outcome come in key order (time, then ids); the same whatever the page size; after a
/// cursor only what follows it; `failures_only` keeps the quarantined arrival, the refusal
/// and the forward not completed; a forward recorded again comes again with its new outcome;
/// another source's rows never come.
pub async fn a_sources_activity_comes_in_key_order_after_a_cursor_and_only_its_own(
    store: &dyn Store,
) {
    let (source, [a, b], _) = two_destinations(store).await;
    let other = source_with(store, vec![destination("https://o.example", false)]).await;
    claim_new(store, delivery(other.id, Some("o-1"), b"{}")).await;
    let reuse = crate::inbound::NewInboundEvent {
        now: t(11),
        ..delivery(source.id, Some("e-1"), b"{\"other\":1}")
    };
    let quarantined = store.claim_inbound(reuse).await.unwrap();
    assert!(
        matches!(quarantined, Claim::Quarantined(_)),
        "{quarantined:?}"
    );
    store
        .record_rejection(refused(source.id, 12), 100)
        .await
        .unwrap();
    store
        .record_rejection(refused(other.id, 12), 100)
        .await
        .unwrap();
    let mut claimed = claim(store, Consumer::Push, 20).await.claimed;
    assert_eq!(claimed.len(), 2, "one event of each source");
    claimed.sort_by_key(|c| c.event.source_id != source.id);
    let (ours, theirs) = (claimed.remove(0), claimed.remove(0));
    let results = vec![
        result(Some(a.id), Outcome::Completed),
        result(Some(b.id), Outcome::Retryable),
    ];
    record(store, &ours, results, NextTry::At(t(100)), 21).await;
    let completed = vec![result(Some(theirs.pending[0].id), Outcome::Completed)];
    record(store, &theirs, completed, NextTry::Exhausted, 21).await;

    let filter = ActivityFilter {
        source: source.id,
        failures_only: false,
    };
    let start = ActivityKey::first_at(t(0));
    let everything = tail(store, &filter, &start, 100).await;
    let mut forwards = [
        ("forward e-1 completed", a.id.to_string()),
        ("forward e-1 retryable", b.id.to_string()),
    ];
    forwards.sort_by(|x, y| x.1.cmp(&y.1));
    let want: Vec<String> = ["event e-1", "event e-1", "rejection signature_mismatch"]
        .into_iter()
        .chain(forwards.iter().map(|f| f.0))
        .map(str::to_string)
        .collect();
    assert_eq!(said(&everything), want);
    let keys: Vec<ActivityKey> = everything.iter().map(Activity::key).collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    assert_eq!(keys[0].at, t(10));
    assert_eq!(keys[1].at, t(11));
    assert!(everything[1].failed() && !everything[0].failed());

    let mut paged = Vec::new();
    let mut cursor = start.clone();
    loop {
        let page = tail(store, &filter, &cursor, 2).await;
        let Some(last) = page.last() else { break };
        cursor = last.key();
        paged.extend(page);
    }
    assert_eq!(paged, everything, "pages of 2 read the same rows once");
    assert_eq!(
        said(&tail(store, &filter, &keys[2], 100).await),
        want[3..],
        "after the refusal: the forwards only"
    );

    let failures = ActivityFilter {
        failures_only: true,
        ..filter
    };
    assert_eq!(
        said(&tail(store, &failures, &start, 100).await),
        [
            "event e-1",
            "rejection signature_mismatch",
            "forward e-1 retryable"
        ]
    );

    let retry = claim(store, Consumer::Push, 100).await.claimed.remove(0);
    let done = vec![result(Some(b.id), Outcome::Completed)];
    record(store, &retry, done, NextTry::Exhausted, 101).await;
    let later = tail(store, &filter, &keys[4], 100).await;
    assert_eq!(said(&later), ["forward e-1 completed"]);
    assert_eq!(later[0].key().at, t(101));
    assert!(tail(store, &failures, &keys[4], 100).await.is_empty());
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_inbound_activity {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_sources_activity_comes_in_key_order_after_a_cursor_and_only_its_own,
        );
    };
}
