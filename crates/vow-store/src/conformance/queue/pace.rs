//! Cases about pacing throttled endpoints ([`reserve_send_slot`]): the slots are `1 / rate`
//! apart, concurrent reservations never share one, and each endpoint has a pace of its own.
//!
//! The store reserves by its own clock, so these cases bound each wait by the time the
//! reservations took (`elapsed`): the `k`-th slot is `k / rate` after the first, so its wait is
//! at most that, and at least that minus how much later it was asked for.
//!
//! [`reserve_send_slot`]: crate::queue::DeliveryClaims::reserve_send_slot

use std::time::{Duration, Instant};

use super::*;
use crate::{EndpointFields, Store};

/// A throttled endpoint of a new application.
async fn throttled_endpoint(store: &dyn Store, rate: u16) -> EndpointId {
    let app = create_app(store, "Paced").await;
    let fields = EndpointFields {
        throttle_rate: Some(rate),
        ..endpoint_fields("https://example.com/paced")
    };
    create_endpoint_with(store, app.id, fields).await.id
}

/// Whether each of `waits`, in ascending order, is the wait for the slot `k * gap` after the
/// first, asked for at most `elapsed` after it.
fn spaced(waits: &[Duration], gap: Duration, elapsed: Duration) -> bool {
    let mut sorted = waits.to_vec();
    sorted.sort();
    sorted.iter().enumerate().all(|(k, wait)| {
        let slot = gap * u32::try_from(k).expect("a few slots");
        *wait <= slot && *wait >= slot.saturating_sub(elapsed)
    })
}

/// One after another, the slots of an endpoint are `1 / rate` apart, the first is now; another
/// endpoint, paced at another rate, starts now too and keeps its own spacing.
pub async fn reserved_send_slots_are_spaced_by_the_rate_and_each_endpoint_has_its_own(
    store: &dyn Store,
) {
    let (ten, two) = (
        throttled_endpoint(store, 10).await,
        throttled_endpoint(store, 2).await,
    );
    let started = Instant::now();
    let mut at_ten = Vec::new();
    for _ in 0..4 {
        at_ten.push(store.reserve_send_slot(ten, 10).await.unwrap());
    }
    let mut at_two = Vec::new();
    for _ in 0..2 {
        at_two.push(store.reserve_send_slot(two, 2).await.unwrap());
    }
    let elapsed = started.elapsed();
    assert_eq!(at_ten[0], Duration::ZERO, "an idle endpoint sends now");
    assert!(
        spaced(&at_ten, Duration::from_millis(100), elapsed),
        "{at_ten:?} after {elapsed:?}"
    );
    assert_eq!(
        at_two[0],
        Duration::ZERO,
        "the other endpoint is not held back"
    );
    assert!(
        spaced(&at_two, Duration::from_millis(500), elapsed),
        "{at_two:?} after {elapsed:?}"
    );
}

/// Reservations made at once (as the workers of several processes make them) each get a slot
/// of their own: no two sends share one.
pub async fn concurrent_send_slot_reservations_never_share_a_slot(store: &dyn Store) {
    let ep = throttled_endpoint(store, 10).await;
    let started = Instant::now();
    let waits: Vec<Duration> = join_all((0..12).map(|_| store.reserve_send_slot(ep, 10)).collect())
        .await
        .into_iter()
        .map(|wait| wait.expect("a concurrent reservation succeeds"))
        .collect();
    let elapsed = started.elapsed();
    assert!(
        spaced(&waits, Duration::from_millis(100), elapsed),
        "{waits:?} after {elapsed:?}"
    );
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_queue_pace {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            reserved_send_slots_are_spaced_by_the_rate_and_each_endpoint_has_its_own,
            concurrent_send_slot_reservations_never_share_a_slot,
        );
    };
}
