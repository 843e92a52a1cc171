//! Cases about process-wide settings and health.

use crate::Store;

use super::support::join_all;

/// The first admin token hash stored wins; later inits (also concurrent ones) get it back.
pub async fn the_first_admin_token_hash_wins(store: &dyn Store) {
    assert_eq!(store.admin_token_hash().await.unwrap(), None);
    let results = join_all(
        ["hash-a", "hash-b", "hash-c", "hash-d"]
            .iter()
            .map(|h| store.init_admin_token_hash(h))
            .collect(),
    )
    .await;
    let results: Vec<String> = results.into_iter().map(Result::unwrap).collect();
    let winner = results[0].clone();
    assert!(["hash-a", "hash-b", "hash-c", "hash-d"].contains(&winner.as_str()));
    assert!(
        results.iter().all(|r| *r == winner),
        "every init agrees: {results:?}"
    );
    assert_eq!(store.init_admin_token_hash("later").await.unwrap(), winner);
    assert_eq!(store.admin_token_hash().await.unwrap(), Some(winner));
}

/// A fresh store answers a ping and names its backend.
pub async fn a_fresh_store_answers_a_ping(store: &dyn Store) {
    store.ping().await.unwrap();
    assert!(!store.backend().is_empty());
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_settings {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            the_first_admin_token_hash_wins,
            a_fresh_store_answers_a_ping,
        );
    };
}
