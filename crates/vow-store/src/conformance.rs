//! The behaviour suite every [`crate::Store`] backend must pass.
//!
//! Each case is a `pub async fn case_name(store: &dyn Store)` whose name is a sentence; it drives the store through the
//! traits only and asserts on what is stored afterwards (rows read back, deliveries counted), not
//! merely on `Ok`. [`conformance_suite!`](crate::conformance_suite) expands into one
//! `#[tokio::test]` per case for a backend, given an async expression that builds a fresh, empty,
//! migrated store; each module lists its own cases in a `__conformance_cases_<module>!` macro at
//! its end, which the suite calls. Cases assume the store is empty when they start
//! (event types are global, so listings count them all), and every case gets its own store.
//!
//! Backends must agree on a few representation details the cases check:
//! - times round-trip to the microsecond (what a create returns equals what a get returns);
//! - text keys (ids, event-type names) are ordered bytewise, as `String`'s `Ord` orders them
//!   (PostgreSQL: `COLLATE "C"`);
//! - a message payload is returned byte for byte as given;
//! - `Conflict` sentences name what clashed: "uid", "name", "eventId".
//!
//! # Layout
//! - `apps`: applications, their uid, cascade on delete, paging.
//! - `event_types`: event types, archiving, expunge, paging by name.
//! - `endpoints`: endpoints, isolation between applications, secrets and rotation, paging.
//! - `fanout`: which endpoints get a delivery row for a new message, `Pending` or `Held`.
//! - `idempotency`: `Idempotency-Key` records: begin, the completing create, replay, release,
//!   fencing, and lifetimes (lease, replay, tombstone) that follow the settings given.
//! - `idempotency_identity`: what a record takes for the same request (exact numbers, the query,
//!   version 1 records).
//! - `inbound`: sources and the atomic claim of inbound events (duplicates, quarantine),
//!   rejections, retention ([`crate::InboundStore`]).
//! - `inbound_keyed`: the inbound operations as keyed API writes (the `*_keyed` store methods): a claim
//!   commits with its record or leases nothing; a lost lease leaves no record.
//! - `inbound_activity`: a source's activity for `vow tail --source`: order, cursor, paging,
//!   failures, isolation.
//! - `inbound_rejections`: the bounded rejection log: the newest rows, exact counts by reason.
//! - `inbound_guard`: the replay guard; operators' decisions per destination.
//! - `inbound_recording`: recording an attempt and settling an expired lease alike on every
//!   backend: dead-letters out of attempts, the last error, final outcomes, who may claim.
//! - `inbound_replays`: bulk replays of a source's dead letters: dry run, time range,
//!   destination, skipped events, other sources untouched, stats by the replay's id.
//! - `inbound_work`: processing them: push and pull claims, outcomes per destination, retries,
//!   dead letters and replay, expired leases, resolutions, ordering by version.
//! - `messages`: `eventId` uniqueness (also concurrent), isolation, listing filters and paging.
//! - `overview`: the console's Overview: every figure exactly, in the windows it falls in;
//!   retention of its activity minutes.
//! - `relay_listeners`: when relay targets were last connected; taking the stale ones once.
//! - `sessions`: console sessions and app-portal tokens: expiry, ending, purge, their application.
//! - `settings`: the admin token hash and ping.
//! - `queue`: the [`DeliveryQueue`](crate::DeliveryQueue): claims and leases, recording outcomes, auto-disabling,
//!   attempts, resend and replay, stats, expunge and retention (see its own layout).
//! - `support`: shared fixtures (fixed times, minimal rows, paging and concurrency helpers).

mod apps;
mod endpoints;
mod event_types;
mod fanout;
mod idempotency;
mod idempotency_identity;
mod inbound;
mod inbound_activity;
mod inbound_guard;
mod inbound_keyed;
mod inbound_recording;
mod inbound_rejections;
mod inbound_replays;
mod inbound_work;
mod messages;
mod overview;
mod queue;
mod relay_listeners;
mod sessions;
mod settings;
mod support;

pub use apps::*;
pub use endpoints::*;
pub use event_types::*;
pub use fanout::*;
pub use idempotency::*;
pub use idempotency_identity::*;
pub use inbound::*;
pub use inbound_activity::*;
pub use inbound_guard::*;
pub use inbound_keyed::*;
pub use inbound_recording::*;
pub use inbound_rejections::*;
pub use inbound_replays::*;
pub use inbound_work::*;
pub use messages::*;
pub use overview::*;
pub use queue::*;
pub use relay_listeners::*;
pub use sessions::*;
pub use settings::*;

/// Instantiates the conformance suite for a backend: one
/// `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` per case, named after it.
///
/// The argument is an expression evaluating to a future of `(store, guard)`: `store` is any type
/// implementing [`Store`](crate::Store) (every trait of the store), fresh and migrated; `guard` is whatever must live until the test ends (a
/// temporary directory, a throwaway database, or `()`). It is evaluated once per
/// case; the store is dropped before the guard. The calling crate needs `tokio` (features
/// `macros`, `rt-multi-thread`) among its dev-dependencies.
///
/// ```ignore
/// // crates/vow-store-sqlite/tests/it/conformance.rs
/// vow_store::conformance_suite!(async { vow_store_sqlite::testing::fresh_store() });
///
/// // A backend whose setup is async:
/// vow_store::conformance_suite!(async {
///     let db = my_backend::testing::fresh_database().await;
///     (db.store(), db)
/// });
/// ```
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr $(,)?) => {
        $crate::__conformance_cases_apps!($make);
        $crate::__conformance_cases_event_types!($make);
        $crate::__conformance_cases_endpoints!($make);
        $crate::__conformance_cases_fanout!($make);
        $crate::__conformance_cases_messages!($make);
        $crate::__conformance_cases_idempotency!($make);
        $crate::__conformance_cases_idempotency_identity!($make);
        $crate::__conformance_cases_settings!($make);
        $crate::__conformance_cases_sessions!($make);
        $crate::__conformance_cases_relay_listeners!($make);
        $crate::__conformance_cases_queue_claims!($make);
        $crate::__conformance_cases_queue_leases!($make);
        $crate::__conformance_cases_queue_outcomes!($make);
        $crate::__conformance_cases_queue_batches!($make);
        $crate::__conformance_cases_queue_attempts!($make);
        $crate::__conformance_cases_queue_retention!($make);
        $crate::__conformance_cases_queue_operators!($make);
        $crate::__conformance_cases_queue_replay!($make);
        $crate::__conformance_cases_queue_attempted!($make);
        $crate::__conformance_cases_queue_dead_letter_alerts!($make);
        $crate::__conformance_cases_queue_pace!($make);
        $crate::__conformance_cases_inbound!($make);
        $crate::__conformance_cases_inbound_activity!($make);
        $crate::__conformance_cases_inbound_rejections!($make);
        $crate::__conformance_cases_inbound_work!($make);
        $crate::__conformance_cases_inbound_keyed!($make);
        $crate::__conformance_cases_inbound_guard!($make);
        $crate::__conformance_cases_inbound_recording!($make);
        $crate::__conformance_cases_inbound_replays!($make);
        $crate::__conformance_cases_overview!($make);
    };
    (@cases ($make:expr) $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (store, guard) = $make.await;
                $crate::conformance::$case(&store).await;
                drop(store);
                drop(guard);
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Every `pub async fn` case of a conformance module is in that module's own case list, and
    /// `conformance_suite!` runs every module's list, so no case is silently left out of the
    /// backends' test runs.
    #[test]
    fn every_case_is_run_by_the_macro() {
        let suite = include_str!("conformance.rs");
        let mut count = 0;
        for path in rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/conformance")) {
            let source = std::fs::read_to_string(&path).expect("a conformance module reads");
            let cases: Vec<&str> = source
                .lines()
                .filter_map(|line| line.strip_prefix("pub async fn "))
                .map(|rest| rest.split(['(', '<']).next().unwrap_or_default())
                .collect();
            if cases.is_empty() {
                continue;
            }
            let list = source
                .split("macro_rules! __conformance_cases_")
                .nth(1)
                .unwrap_or_else(|| panic!("{} has cases but no case list", path.display()));
            let name = list.split_whitespace().next().unwrap_or_default();
            assert!(
                suite.contains(&format!("$crate::__conformance_cases_{name}!($make);")),
                "conformance_suite! does not run the cases of {}",
                path.display()
            );
            for case in cases {
                assert!(
                    list.contains(&format!("            {case},\n")),
                    "case `{case}` is missing from the case list of {}",
                    path.display()
                );
                count += 1;
            }
        }
        assert!(count >= 104, "found only {count} cases");
    }

    fn rust_files(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).expect("the conformance folder reads") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                files.extend(rust_files(&path));
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
        files
    }
}
