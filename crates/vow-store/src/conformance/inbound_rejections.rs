//! Cases about the bounded rejection log (issue 13): anyone who knows a source id can send it
//! refusals, so a source keeps only its newest `keep` rejection rows (a ring overwritten in
//! place) while its counts by reason stay exact.

use crate::Store;
use std::collections::HashSet;

use vow_core::RejectionId;

use super::inbound::create_source;
use super::support::*;
use crate::inbound::{NewRejection, RejectionCount};
use crate::InboundStore;

fn rejection(source: vow_core::SourceId, reason: &str, secs: i64) -> NewRejection {
    NewRejection {
        id: RejectionId::new(),
        source_id: source,
        reason: reason.into(),
        status: 401,
        body_size: 7,
        now: t(secs),
    }
}

/// The listed rejection ids of `source`, newest first.
async fn listed(store: &dyn InboundStore, source: vow_core::SourceId) -> Vec<RejectionId> {
    let rows = store.list_rejections(source, &all(1000)).await.unwrap();
    rows.into_iter().map(|r| r.id).collect()
}

fn count(reason: &str, count: u64, first: i64, last: i64) -> RejectionCount {
    RejectionCount {
        reason: reason.into(),
        count,
        first_at: t(first),
        last_at: t(last),
    }
}

/// `keep + k` rejections leave exactly the newest `keep` rows, and exact counts by reason
/// (with first and last seen); another source is unaffected; a lowered `keep` drops the
/// slots beyond it.
pub async fn the_rejection_log_keeps_the_newest_rows_and_exact_counts(store: &dyn Store) {
    const KEEP: u32 = 5;
    let source = create_source(store).await;
    let other = create_source(store).await;
    let theirs = rejection(other.id, "signature_mismatch", 0);
    store.record_rejection(theirs.clone(), KEEP).await.unwrap();
    let mut recorded = Vec::new();
    for i in 0..12 {
        let reason = if i % 3 == 2 {
            "timestamp_too_old"
        } else {
            "signature_mismatch"
        };
        let r = rejection(source.id, reason, i);
        store.record_rejection(r.clone(), KEEP).await.unwrap();
        recorded.push(r);
    }
    let newest: Vec<RejectionId> = recorded.iter().rev().take(5).map(|r| r.id).collect();
    assert_eq!(
        listed(store, source.id).await,
        newest,
        "the newest five, newest first"
    );
    let rows = store.list_rejections(source.id, &all(10)).await.unwrap();
    assert_eq!(rows[0], recorded[11], "rows hold what was recorded");
    assert_eq!(
        store.rejection_counts(source.id).await.unwrap(),
        vec![
            count("signature_mismatch", 8, 0, 10),
            count("timestamp_too_old", 4, 2, 11),
        ],
        "exact, by reason"
    );
    assert_eq!(listed(store, other.id).await, vec![theirs.id]);
    assert_eq!(
        store.rejection_counts(other.id).await.unwrap(),
        vec![count("signature_mismatch", 1, 0, 0)]
    );

    let last = rejection(source.id, "signature_mismatch", 20);
    store.record_rejection(last.clone(), 2).await.unwrap();
    let kept = listed(store, source.id).await;
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept[0], last.id);
    let counts = store.rejection_counts(source.id).await.unwrap();
    assert_eq!(counts[0], count("signature_mismatch", 9, 0, 20));
}

/// Forty concurrent rejections of one source take forty ring positions: with room for all,
/// forty rows; with room for eight, eight; the count is forty either way.
pub async fn concurrent_rejections_are_each_counted_and_the_log_stays_bounded(store: &dyn Store) {
    for keep in [64, 8] {
        let source = create_source(store).await;
        let records = (0..40)
            .map(|i| store.record_rejection(rejection(source.id, "signature_mismatch", i), keep))
            .collect();
        for outcome in join_all(records).await {
            outcome.expect("every rejection is recorded");
        }
        let ids = listed(store, source.id).await;
        assert_eq!(ids.len(), 40.min(keep as usize), "keep {keep}");
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
        let counts = store.rejection_counts(source.id).await.unwrap();
        assert_eq!(counts.len(), 1);
        assert_eq!(counts[0].count, 40, "keep {keep}");
    }
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_inbound_rejections {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            the_rejection_log_keeps_the_newest_rows_and_exact_counts,
            concurrent_rejections_are_each_counted_and_the_log_stays_bounded,
        );
    };
}
