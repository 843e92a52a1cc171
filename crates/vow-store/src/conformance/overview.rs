//! Cases about the console's Overview ([`crate::Overviews`]): each figure counted exactly from a
//! known set of outcomes, deliveries, endpoints and inbound events, in the windows it falls in;
//! retention of the activity minutes.
//!
//! Inbound events count by their ids, which are made on the real clock, so these cases put
//! `now` half an hour ahead of it and every other time relative to `now`.

use chrono::{DateTime, TimeDelta, Utc};
use vow_core::{AppId, RejectionId, SourceId};

use super::inbound::{claim_new, delivery};
use super::inbound_work::{claim as claim_work, destination, record as record_work, result};
use super::queue::{attempt, claim_at, dead_letter, record, STORED};
use super::support::*;
use crate::inbound::processing::{Consumer, NextTry, Outcome};
use crate::inbound::{Claim, NewRejection};
use crate::overview::{minute_of, Activity, Backlog, Count, Held, Overview, Rejections};
use crate::queue::{AttemptOutcome, ClaimedDelivery, NextState, Recorded};
use crate::{EndpointFields, NewMessage, Store};

/// Half an hour after the real clock, 30 s into a minute.
fn overview_time() -> DateTime<Utc> {
    minute_of(Utc::now() + TimeDelta::minutes(30)) + TimeDelta::seconds(30)
}

/// Creates a message of `app` at `at`, so its deliveries are due then.
async fn message(store: &dyn Store, app: AppId, at: DateTime<Utc>) {
    let new = NewMessage {
        now: at,
        payload_expires_at: at + TimeDelta::days(90),
        ..new_message(app, "user.created")
    };
    store.create_message(new).await.expect("create a message");
}

/// Claims at most `limit` due deliveries at `at`.
async fn claim(store: &dyn Store, at: DateTime<Utc>, limit: usize) -> Vec<ClaimedDelivery> {
    let claimed = store.claim_deliveries(&claim_at(at, limit)).await;
    claimed.expect("claim deliveries")
}

/// The outcome of attempting `claimed` (`status`: the response; `None`: no attempt row),
/// recorded at `at`.
fn done(
    claimed: &ClaimedDelivery,
    status: Option<u16>,
    next: NextState,
    at: DateTime<Utc>,
) -> AttemptOutcome {
    AttemptOutcome {
        delivery_id: claimed.delivery.id,
        lease: claimed.lease.clone(),
        attempt: status.map(|s| attempt(Some(s), 0)),
        next,
        now: at,
    }
}

/// A refused request of `source` for `reason`, at `at`.
fn rejection(source: SourceId, reason: &str, at: DateTime<Utc>) -> NewRejection {
    NewRejection {
        id: RejectionId::new(),
        source_id: source,
        reason: reason.into(),
        status: 401,
        body_size: 2,
        now: at,
    }
}

/// The overview at `now`; its backlog is also what the backlog read alone answers.
async fn overview(store: &dyn Store, now: DateTime<Utc>) -> Overview {
    let overview = store.overview(now).await.expect("read the overview");
    let backlog = store.backlog(now, &[]).await.expect("read the backlog");
    assert_eq!(backlog, overview.current.backlog, "the backlog read alone");
    overview
}

/// Reasons and counts.
fn reasons(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(r, n)| (r.to_string(), *n)).collect()
}

/// Attempts, delivered and dead-lettered deliveries and disabled endpoints count in the hour
/// and the day they were recorded in (a lost lease adds nothing), by hour bar; the backlog is
/// the pending deliveries due now (the one in flight too) and the oldest's due time; disabled
/// endpoints, stored inbound events, quarantined and uncertain ones, and rejections by reason
/// are counted exactly, the rejections as a lower bound once a source's log lost rows.
pub async fn the_overview_counts_each_figure_in_the_windows_it_falls_in(store: &dyn Store) {
    let now = overview_time();
    let ago = |minutes: i64| now - TimeDelta::minutes(minutes);
    let retry = |at| NextState::RetryAt {
        at,
        client_errors: 0,
    };

    // One: a 500 25 h ago (before the day), a 503 2 h ago, then delivered 10 minutes ago,
    // recorded twice (the second finds its lease gone).
    let one = create_app(store, "One").await;
    let one_endpoint = create_endpoint(store, one.id).await;
    message(store, one.id, ago(26 * 60)).await;
    let c = claim(store, ago(26 * 60), 1).await;
    let first = done(&c[0], Some(500), retry(ago(120)), ago(25 * 60));
    assert_eq!(record(store, vec![first]).await, [STORED]);
    let c = claim(store, ago(120), 1).await;
    let second = done(&c[0], Some(503), retry(ago(20)), ago(120));
    assert_eq!(record(store, vec![second]).await, [STORED]);
    let c = claim(store, ago(20), 1).await;
    let ok = done(&c[0], Some(200), NextState::Delivered, ago(10));
    let twice = record(store, vec![ok.clone(), ok]).await;
    assert_eq!(twice, [STORED, Recorded::LeaseLost]);

    // Two: dead-letters 2 h ago, then a 410 five minutes ago dead-letters and disables it.
    let two = create_app(store, "Two").await;
    create_endpoint(store, two.id).await;
    message(store, two.id, ago(180)).await;
    message(store, two.id, ago(180)).await;
    let c = claim(store, ago(180), 10).await;
    assert_eq!(c.len(), 2);
    let dead = done(&c[0], Some(500), dead_letter("out of tries"), ago(120));
    assert_eq!(record(store, vec![dead]).await, [STORED]);
    let gone = NextState::DeadLetter {
        reason: "410 Gone".into(),
        disable_endpoint: true,
    };
    let disabled = Recorded::Stored {
        endpoint_disabled: true,
    };
    assert_eq!(
        record(store, vec![done(&c[1], Some(410), gone, ago(5))]).await,
        [disabled]
    );

    // Four: a payload that expired dead-letters without an attempt, half an hour ago; and an
    // endpoint created disabled.
    let four = create_app(store, "Four").await;
    create_endpoint(store, four.id).await;
    message(store, four.id, ago(40)).await;
    let c = claim(store, ago(40), 1).await;
    let expired = done(&c[0], None, dead_letter("payload expired"), ago(30));
    assert_eq!(record(store, vec![expired]).await, [STORED]);
    let off = EndpointFields {
        disabled: true,
        ..endpoint_fields("https://example.com/off")
    };
    create_endpoint_with(store, four.id, off).await;

    // Three, the backlog: due 50 and 5 minutes ago (the older one being attempted now), and
    // one due in 10 minutes.
    let three = create_app(store, "Three").await;
    let three_endpoint = create_endpoint(store, three.id).await;
    for at in [ago(50), ago(5), now + TimeDelta::minutes(10)] {
        message(store, three.id, at).await;
    }
    let in_flight = claim(store, now - TimeDelta::seconds(30), 1).await;
    assert_eq!(in_flight[0].delivery.next_attempt_at, ago(50));

    // Inbound: an event, its id again with another payload (quarantined) and with the same
    // (a duplicate stores nothing); the event's forward ends uncertain.
    let dest = destination("https://a.example/in", false);
    let source = super::inbound_work::source_with(store, vec![dest.clone()]).await;
    claim_new(store, delivery(source.id, Some("evt_1"), b"{\"n\":1}")).await;
    let other = store.claim_inbound(delivery(source.id, Some("evt_1"), b"{\"n\":2}"));
    assert!(matches!(other.await.unwrap(), Claim::Quarantined(_)));
    let again = store.claim_inbound(delivery(source.id, Some("evt_1"), b"{\"n\":1}"));
    assert!(matches!(again.await.unwrap(), Claim::Duplicate(_)));
    let work = claim_work(store, Consumer::Push, 20).await;
    let unsure = vec![result(Some(dest.id), Outcome::Uncertain)];
    record_work(store, &work.claimed[0], unsure, NextTry::Exhausted, 21).await;
    for (reason, at) in [
        ("signature_mismatch", ago(10)),
        ("signature_mismatch", ago(10)),
        ("timestamp_too_old", ago(180)),
        ("signature_mismatch", ago(26 * 60)),
    ] {
        let refused = rejection(source.id, reason, at);
        store.record_rejection(refused, 1000).await.unwrap();
    }

    let o = overview(store, now).await;
    assert_eq!(o.now, now);
    let hour = Activity {
        succeeded: 1,
        failed: 1,
        delivered: 1,
        dead_lettered: 2,
        disabled: 1,
    };
    assert_eq!(o.hour.deliveries, hour);
    let day = Activity {
        succeeded: 1,
        failed: 3,
        delivered: 1,
        dead_lettered: 3,
        disabled: 1,
    };
    assert_eq!(o.day.deliveries, day);
    assert_eq!(o.hours.len(), 24);
    let two_hours_ago = Activity {
        failed: 2,
        dead_lettered: 1,
        ..Activity::default()
    };
    let bars: Vec<Activity> = o.hours.iter().map(|h| h.activity).collect();
    let mut expected = vec![Activity::default(); 24];
    expected[21] = two_hours_ago;
    expected[23] = hour;
    assert_eq!(bars, expected);
    assert_eq!(
        o.current.backlog,
        Backlog {
            due: Count::of(2),
            oldest_due: Some(ago(50)),
        }
    );
    assert_eq!(o.current.endpoints_disabled, Count::of(2));
    // The backlog without some endpoints' deliveries (the backlog bound's read): without
    // Three's, the leased one and the unleased one, nothing is due; without One's, all of it.
    let without = |endpoint| async move { store.backlog(now, &[endpoint]).await.unwrap() };
    assert_eq!(without(three_endpoint.id).await, Backlog::default());
    assert_eq!(without(one_endpoint.id).await, o.current.backlog);
    let one_each = Held {
        quarantined: Count::of(1),
        uncertain: Count::of(1),
    };
    assert_eq!(o.current.held, one_each);
    for window in [&o.hour, &o.day] {
        assert_eq!(
            window.inbound.accepted,
            Count::of(2),
            "the duplicate stores nothing"
        );
        assert_eq!(window.inbound.held, one_each);
    }
    let complete = |pairs: &[(&str, u64)]| Rejections {
        by_reason: reasons(pairs),
        complete: true,
    };
    assert_eq!(
        o.hour.inbound.rejections,
        complete(&[("signature_mismatch", 2)])
    );
    assert_eq!(
        o.day.inbound.rejections,
        complete(&[("signature_mismatch", 2), ("timestamp_too_old", 1)])
    );

    // A source that keeps 2 rejections takes 3 in the hour: its log lost one.
    let flooded = super::inbound_work::source_with(store, Vec::new()).await;
    for _ in 0..3 {
        let refused = rejection(flooded.id, "body_too_large", ago(3));
        store.record_rejection(refused, 2).await.unwrap();
    }
    let o = overview(store, now).await;
    let lower_bound = Rejections {
        by_reason: reasons(&[("body_too_large", 2), ("signature_mismatch", 2)]),
        complete: false,
    };
    assert_eq!(o.hour.inbound.rejections, lower_bound);
    assert!(!o.day.inbound.rejections.complete);

    // Two hours on: the inbound traffic has left the hour but not the day, and the delivery
    // due in 10 minutes has joined the backlog.
    let later = overview(store, now + TimeDelta::hours(2)).await;
    assert_eq!(later.hour.inbound.accepted, Count::of(0));
    assert_eq!(later.hour.inbound.held, Held::default());
    assert_eq!(later.hour.inbound.rejections, complete(&[]));
    assert_eq!(later.day.inbound.accepted, Count::of(2));
    assert_eq!(later.current.backlog.due, Count::of(3));
    assert_eq!(
        later.current.held, one_each,
        "they still wait for an operator"
    );
}

/// Retention deletes the activity minutes older than two days, and no others.
pub async fn retention_deletes_activity_minutes_older_than_two_days(store: &dyn Store) {
    let now = overview_time();
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let old = now - TimeDelta::hours(50);
    let recent = now - TimeDelta::hours(47);
    message(store, app.id, old).await;
    let c = claim(store, old, 1).await;
    let failed = done(
        &c[0],
        Some(500),
        NextState::RetryAt {
            at: recent,
            client_errors: 0,
        },
        old,
    );
    assert_eq!(record(store, vec![failed]).await, [STORED]);
    let c = claim(store, recent, 1).await;
    let ok = done(&c[0], Some(200), NextState::Delivered, recent);
    assert_eq!(record(store, vec![ok]).await, [STORED]);
    let failed_once = |o: &Overview| o.day.deliveries.failed;
    let delivered_once = |o: &Overview| o.day.deliveries.delivered;
    assert_eq!(failed_once(&overview(store, old).await), 1);
    assert_eq!(delivered_once(&overview(store, recent).await), 1);

    // Response bodies are all kept, and payloads have not expired.
    let keep_responses = DateTime::UNIX_EPOCH;
    let purged = store.purge_expired(now, keep_responses, 100).await.unwrap();
    assert_eq!(purged, 1, "the one minute older than two days");
    assert_eq!(failed_once(&overview(store, old).await), 0);
    assert_eq!(delivered_once(&overview(store, recent).await), 1);
    assert_eq!(
        store.purge_expired(now, keep_responses, 100).await.unwrap(),
        0
    );
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_overview {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            the_overview_counts_each_figure_in_the_windows_it_falls_in,
            retention_deletes_activity_minutes_older_than_two_days,
        );
    };
}
