//! Cases about when relay targets were last connected ([`crate::RelayListeners`]).

use std::collections::BTreeSet;

use vow_core::{AppId, DestinationId, EndpointId, SourceId};

use super::support::{join_all, t};
use crate::relay::RelayTarget;
use crate::Store;

fn endpoint() -> RelayTarget {
    RelayTarget::Endpoint {
        app: AppId::new(),
        id: EndpointId::new(),
    }
}

fn destination() -> RelayTarget {
    RelayTarget::Destination {
        source: SourceId::new(),
        id: DestinationId::new(),
    }
}

/// Only targets not seen since the cut-off are taken, each once, in batches; a renewal keeps a
/// target; what a taken target was (kind and owner) reads back whole.
pub async fn stale_relays_are_taken_once_and_a_renewal_keeps_one(store: &dyn Store) {
    let (a, b, c) = (endpoint(), destination(), endpoint());
    store.relays_seen(&[a, b, c], t(0)).await.unwrap();
    assert!(store.take_stale_relays(t(0), 10).await.unwrap().is_empty());
    // `c` is renewed (twice: a renewal of a renewed one is fine).
    store.relays_seen(&[c], t(5)).await.unwrap();
    store.relays_seen(&[c], t(10)).await.unwrap();
    let first = store.take_stale_relays(t(8), 1).await.unwrap();
    let second = store.take_stale_relays(t(8), 10).await.unwrap();
    assert_eq!(first.len(), 1, "a batch of one");
    let taken: BTreeSet<RelayTarget> = first.into_iter().chain(second).collect();
    assert_eq!(taken, BTreeSet::from([a, b]));
    assert!(
        store.take_stale_relays(t(8), 10).await.unwrap().is_empty(),
        "each is taken once"
    );
    assert_eq!(store.take_stale_relays(t(11), 10).await.unwrap(), vec![c]);
}

/// Several takers at once (as several nodes sweep) never take one target twice.
pub async fn concurrent_takers_split_the_stale_relays(store: &dyn Store) {
    let targets: Vec<RelayTarget> = (0..40).map(|_| endpoint()).collect();
    store.relays_seen(&targets, t(0)).await.unwrap();
    let takes: Vec<_> = (0..4)
        .map(|_| async {
            let mut mine = Vec::new();
            loop {
                let got = store.take_stale_relays(t(1), 3).await.unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got);
            }
        })
        .collect();
    let all: Vec<RelayTarget> = join_all(takes).await.into_iter().flatten().collect();
    assert_eq!(all.len(), targets.len(), "none twice, none missed");
    let unique: BTreeSet<RelayTarget> = all.into_iter().collect();
    assert_eq!(unique, targets.into_iter().collect());
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_relay_listeners {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            stale_relays_are_taken_once_and_a_renewal_keeps_one,
            concurrent_takers_split_the_stale_relays,
        );
    };
}
