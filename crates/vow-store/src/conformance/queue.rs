//! Cases about the [`DeliveryQueue`](crate::DeliveryQueue), and the fixtures they share.
//!
//! Times are explicit everywhere (`t(secs)`): messages are created at a chosen `t`, so their
//! deliveries are due then; claims and records pass their own `now`. Nothing sleeps.
//!
//! Readings of the contract these cases fix (where `queue.rs` leaves room):
//! - Fencing is by token only: a record whose lease expired but was *not* taken over still
//!   lands (`LeaseLost` means another claim, a resend/replay, or a deleted delivery intervened).
//! - `last_status` follows the recorded attempt (`None` when it got no response); an outcome
//!   without an attempt row leaves `last_status` and `attempts` as they were.
//! - `dead_letter_reason` describes the current state: set by a dead-letter, cleared by any other
//!   outcome and by resend and replay. `last_status` survives resend and replay (replay filters
//!   on it).
//! - Consecutive dead-letters are counted while the endpoint is enabled (one that lands after
//!   it was disabled does not count), and the dead-letter that disables it restarts the count,
//!   so an endpoint an operator re-enables gets a fresh `disable_after` budget. Disabling moves the endpoint's
//!   pending deliveries that hold no lease to `held`; leased ones (even with an expired lease,
//!   whose worker may still record) come back through their worker (claimed with
//!   `disabled: true`, recorded as `Hold`).
//! - `next_due` is the earliest instant a claim could take something: `next_attempt_at` of an
//!   unleased pending delivery, or the later of `next_attempt_at` and `lease_until` of a leased
//!   one.
//! - `replay` and `endpoint_stats` of an endpoint the application does not have are
//!   `NotFound("endpoint")`; `resend` checks the message first (`NotFound("message")`).
//! - `endpoint_stats`: `sending` = pending with an unexpired lease at `now`; `pending` = the
//!   other pending ones plus held ones (so the four counts partition the deliveries).
//! - Attempt filters `before`/`after` are strict, like the message filters.
//!
//! # Layout
//! - `claims`: what a claim takes, in what order, and what it carries.
//! - `leases`: concurrent claims, take-over and fencing, renewal, `next_due`.
//! - `outcomes`: each `NextState`, the counters, auto-disabling.
//! - `batches`: several outcomes in one record: applied in order, each lease once.
//! - `attempts`: listing attempts, isolation between applications.
//! - `retention`: expunge, cascades, purges.
//! - `operators`: resend, endpoint stats.
//! - `replay`: replay, its filters and dry runs.
//! - `attempted`: attempted destinations and messages, a message to one endpoint.
//! - `dead_letter_alerts`: dead-letters noted and counted per endpoint; alerts raised once.
//! - `pace`: send slots of throttled endpoints: spacing, concurrency, one pace per endpoint.
//! - this file: the fixtures the cases share.

mod attempted;
mod attempts;
mod batches;
mod claims;
mod dead_letter_alerts;
mod leases;
mod operators;
mod outcomes;
mod pace;
mod replay;
mod retention;

pub use attempted::*;
pub use attempts::*;
pub use batches::*;
pub use claims::*;
pub use dead_letter_alerts::*;
pub use leases::*;
pub use operators::*;
pub use outcomes::*;
pub use pace::*;
pub use replay::*;
pub use retention::*;

use crate::Store;
use chrono::{DateTime, Duration, Utc};
use vow_core::{AppId, AttemptId, EndpointId, MessageId};

use super::support::*;
use crate::queue::{
    Attempt, AttemptFilter, AttemptOutcome, AttemptTrigger, ClaimRequest, ClaimedDelivery,
    EndpointRoom, NewAttempt, NextState, Recorded,
};
use crate::{Delivery, NewMessage, Order, Seek};

/// The lease every fixture claim takes.
pub(crate) const LEASE_SECS: i64 = 60;

/// A claim at `now` of at most `limit` deliveries, leased for [`LEASE_SECS`].
pub(crate) fn claim_at(now: DateTime<Utc>, limit: usize) -> ClaimRequest {
    ClaimRequest {
        now,
        lease: Duration::seconds(LEASE_SECS),
        limit,
        room: EndpointRoom::unlimited(),
    }
}

/// Claims at `t(secs)`, at most 100.
pub(crate) async fn claim(store: &dyn Store, secs: i64) -> Vec<ClaimedDelivery> {
    store
        .claim_deliveries(&claim_at(t(secs), 100))
        .await
        .expect("claim deliveries")
}

/// The message ids of claimed deliveries, in the order claimed.
pub(crate) fn claimed_messages(claimed: &[ClaimedDelivery]) -> Vec<MessageId> {
    claimed.iter().map(|c| c.delivery.msg_id).collect()
}

/// Creates a message of `app` at `t(secs)` (so its deliveries are due then); returns its id.
pub(crate) async fn message_at(store: &dyn Store, app: AppId, secs: i64) -> MessageId {
    message_of_type(store, app, secs, "user.created").await
}

/// As [`message_at`], with an event type.
pub(crate) async fn message_of_type(
    store: &dyn Store,
    app: AppId,
    secs: i64,
    event_type: &str,
) -> MessageId {
    let new = NewMessage {
        now: t(secs),
        ..new_message(app, event_type)
    };
    created(store, new).await
}

/// Creates `new`; returns its id.
pub(crate) async fn created(store: &dyn Store, new: NewMessage) -> MessageId {
    let made = store.create_message(new).await.expect("create a message");
    made.message.id
}

/// The delivery of `msg` to `ep`.
pub(crate) async fn delivery(
    store: &dyn Store,
    app: AppId,
    msg: MessageId,
    ep: EndpointId,
) -> Delivery {
    let all = store
        .list_deliveries(app, msg)
        .await
        .expect("list deliveries");
    all.into_iter()
        .find(|d| d.endpoint_id == ep)
        .expect("the message has a delivery to the endpoint")
}

/// An attempt started at `t(secs)` that got `status` (or, with `None`, timed out).
pub(crate) fn attempt(status: Option<u16>, secs: i64) -> NewAttempt {
    NewAttempt {
        id: AttemptId::new(),
        started_at: t(secs),
        url: "https://example.com/hook".into(),
        response_status: status,
        response: match status {
            Some(code) => format!("{{\"status\":{code}}}"),
            None => "timed out after 10s".into(),
        },
        duration_ms: 42,
        success: status.is_some_and(|s| (200..300).contains(&s)),
        error: status.is_none().then(|| "timeout".to_string()),
        trigger: AttemptTrigger::Scheduled,
    }
}

/// The outcome of attempting `claimed` at `t(secs)` with a `status` response (`None`: no
/// attempt row at all).
pub(crate) fn outcome(
    claimed: &ClaimedDelivery,
    status: Option<u16>,
    next: NextState,
    secs: i64,
) -> AttemptOutcome {
    AttemptOutcome {
        delivery_id: claimed.delivery.id,
        lease: claimed.lease.clone(),
        attempt: status.map(|s| attempt(Some(s), secs)),
        next,
        now: t(secs),
    }
}

/// Records `outcomes` with a `disable_after` of 3.
pub(crate) async fn record(store: &dyn Store, outcomes: Vec<AttemptOutcome>) -> Vec<Recorded> {
    store
        .record_attempts(outcomes, 3)
        .await
        .expect("record outcomes")
}

/// A dead-letter that does not disable the endpoint by itself.
pub(crate) fn dead_letter(reason: &str) -> NextState {
    NextState::DeadLetter {
        reason: reason.into(),
        disable_endpoint: false,
    }
}

/// The attempts of a message, oldest id first.
pub(crate) async fn attempts_of(store: &dyn Store, app: AppId, msg: MessageId) -> Vec<Attempt> {
    let filter = AttemptFilter {
        msg_id: Some(msg),
        ..AttemptFilter::default()
    };
    let seek = Seek::for_iterator(None, Order::Ascending, 1000);
    store
        .list_attempts(app, &filter, &seek)
        .await
        .expect("list attempts")
}

/// `Stored` without disabling anything.
pub(crate) const STORED: Recorded = Recorded::Stored {
    endpoint_disabled: false,
};

/// Claims, at `t(secs)`, the due deliveries to every endpoint but `skip`.
pub(crate) async fn claim_skipping(
    store: &dyn Store,
    secs: i64,
    skip: &[EndpointId],
) -> Vec<ClaimedDelivery> {
    let req = ClaimRequest {
        room: EndpointRoom::skipping(skip.iter().copied()),
        ..claim_at(t(secs), 100)
    };
    store.claim_deliveries(&req).await.unwrap()
}

/// Records `outcomes` with auto-disabling off.
pub(crate) async fn record_all(store: &dyn Store, outcomes: Vec<AttemptOutcome>) {
    let n = outcomes.len();
    let results = store.record_attempts(outcomes, 0).await.unwrap();
    assert_eq!(results, vec![STORED; n]);
}

/// Records one attempt (started at `t(started)`, answered with `status`) for every due
/// delivery at `t(at)`, retrying them at `t(retry)`; returns the attempts written, in claim
/// order. Each attempt of the round starts one second after the previous one.
pub(crate) async fn round(
    store: &dyn Store,
    at: i64,
    started: i64,
    status: u16,
    next: impl Fn() -> NextState,
) -> Vec<Attempt> {
    round_answered(store, at, started, Some(status), None, next).await
}

/// As [`round`], with no answer at all when `status` is `None`, each response's body being
/// `response` when given.
pub(crate) async fn round_answered(
    store: &dyn Store,
    at: i64,
    started: i64,
    status: Option<u16>,
    response: Option<&str>,
    next: impl Fn() -> NextState,
) -> Vec<Attempt> {
    let claimed = claim(store, at).await;
    let mut outcomes = Vec::new();
    let mut written = Vec::new();
    for (i, c) in claimed.iter().enumerate() {
        let mut o = outcome(c, None, next(), at);
        let a = o.attempt.insert(attempt(status, at));
        a.started_at = t(started + i as i64);
        if let Some(body) = response {
            a.response = body.to_string();
        }
        written.push(Attempt {
            id: a.id,
            app_id: c.delivery.app_id,
            msg_id: c.delivery.msg_id,
            endpoint_id: c.delivery.endpoint_id,
            delivery_id: c.delivery.id,
            attempt: a.clone(),
        });
        outcomes.push(o);
    }
    let n = outcomes.len();
    assert_eq!(record(store, outcomes).await, vec![STORED; n]);
    written
}

pub(crate) fn retry_at(secs: i64) -> impl Fn() -> NextState {
    move || NextState::RetryAt {
        at: t(secs),
        client_errors: 0,
    }
}

/// Which attempts a filter should select.
pub(crate) type Keep<'a> = Box<dyn Fn(&Attempt) -> bool + 'a>;

/// The ids of `attempts` matching `keep`, sorted ascending (the keyset order).
pub(crate) fn ids_where(attempts: &[Attempt], keep: impl Fn(&Attempt) -> bool) -> Vec<String> {
    let mut ids: Vec<String> = attempts
        .iter()
        .filter(|a| keep(a))
        .map(|a| a.id.to_string())
        .collect();
    ids.sort();
    ids
}

pub(crate) async fn listed(store: &dyn Store, app: AppId, filter: AttemptFilter) -> Vec<String> {
    let seek = Seek::for_iterator(None, Order::Ascending, 1000);
    let rows = store.list_attempts(app, &filter, &seek).await.unwrap();
    rows.into_iter().map(|a| a.id.to_string()).collect()
}
