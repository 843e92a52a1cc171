//! The behaviour suite every [`crate::Store`] backend must pass.
//!
//! Each case is a `pub async fn case_name(store: &dyn Store)` (or `store: &dyn Backend` when it
//! also needs the [`DeliveryQueue`]) whose name is a sentence; it drives the store through the
//! traits only and asserts on what is stored afterwards (rows read back, deliveries counted), not
//! merely on `Ok`. [`conformance_suite!`](crate::conformance_suite) expands into one
//! `#[tokio::test]` per case for a backend, given an async expression that builds a fresh, empty,
//! migrated store. Cases assume the store is empty when they start
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
//! - `inbound_rejections`: the bounded rejection log: the newest rows, exact counts by reason.
//! - `inbound_guard`: the replay guard; operators' decisions per destination.
//! - `inbound_work`: processing them: push and pull claims, outcomes per destination, retries,
//!   dead letters and replay, expired leases, resolutions, ordering by version.
//! - `messages`: `eventId` uniqueness (also concurrent), isolation, listing filters and paging.
//! - `settings`: the admin token hash and ping.
//! - `queue`: the [`DeliveryQueue`]: claims and leases, recording outcomes, auto-disabling,
//!   attempts, resend and replay, stats, expunge and retention (see its own layout).
//! - `support`: shared fixtures (fixed times, minimal rows, paging and concurrency helpers).

mod apps;
mod endpoints;
mod event_types;
mod fanout;
mod idempotency;
mod idempotency_identity;
mod inbound;
mod inbound_guard;
mod inbound_keyed;
mod inbound_rejections;
mod inbound_work;
mod messages;
mod queue;
mod settings;
mod support;

pub use apps::*;
pub use endpoints::*;
pub use event_types::*;
pub use fanout::*;
pub use idempotency::*;
pub use idempotency_identity::*;
pub use inbound::*;
pub use inbound_guard::*;
pub use inbound_keyed::*;
pub use inbound_rejections::*;
pub use inbound_work::*;
pub use messages::*;
pub use queue::*;
pub use settings::*;

use crate::{DeliveryQueue, Store};

/// What the suite runs against: a store that is also a delivery queue. Every backend type that
/// implements both traits is one (blanket impl), so a backend passes `&store` and it coerces to
/// `&dyn Backend` (queue cases) or `&dyn Store` (the others). Queue cases hand `store` to helpers
/// taking `&dyn Store` through trait upcasting.
pub trait Backend: Store + DeliveryQueue {}

impl<T: Store + DeliveryQueue> Backend for T {}

/// Instantiates the conformance suite for a backend: one
/// `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` per case, named after it.
///
/// The argument is an expression evaluating to a future of `(store, guard)`: `store` is any type
/// implementing [`Store`](crate::Store) and [`DeliveryQueue`](crate::DeliveryQueue) (so
/// [`Backend`]), fresh and migrated; `guard` is whatever must live until the test ends (a
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
        $crate::conformance_suite!(@cases ($make)
            // applications
            an_application_is_read_back_by_id_and_by_uid,
            updating_an_application_replaces_its_fields,
            deleting_an_application_removes_everything_under_it,
            an_application_uid_conflict_writes_nothing,
            a_missing_application_is_not_found,
            applications_page_through_in_both_directions_without_gaps,
            // event types
            an_event_type_is_created_read_back_and_updated,
            archived_event_types_are_listed_only_when_asked,
            an_event_type_name_conflict_writes_nothing,
            an_expunged_event_type_is_gone_and_its_name_is_free,
            event_types_page_through_by_name_in_both_directions,
            // endpoints and secrets
            an_endpoint_round_trips_every_field,
            an_endpoint_update_replaces_every_field,
            an_endpoint_uid_conflict_writes_nothing,
            an_endpoint_is_invisible_through_another_application,
            an_endpoint_of_a_missing_application_is_not_found,
            deleting_an_endpoint_removes_its_deliveries,
            endpoints_page_through_in_both_directions_without_gaps,
            the_current_secret_comes_first_and_a_rotated_one_lasts_until_its_deadline,
            // messages and deliveries
            a_message_fans_out_to_every_endpoint_without_filters,
            event_type_filters_choose_the_endpoints,
            channel_filters_choose_the_endpoints,
            a_disabled_endpoint_gets_a_held_delivery,
            a_duplicate_event_id_is_a_conflict_and_writes_nothing,
            another_application_may_reuse_an_event_id,
            a_message_for_a_deleted_application_is_not_found_and_writes_nothing,
            a_message_is_read_back_by_id_and_by_event_id_with_its_payload_verbatim,
            a_message_is_invisible_through_another_application,
            listing_messages_filters_by_event_type_channel_and_time,
            messages_are_listed_newest_first_and_page_without_gaps,
            concurrent_creates_with_one_event_id_store_exactly_one_message,
            // idempotency records
            an_idempotent_create_commits_its_response_and_the_same_request_replays_it,
            a_released_record_frees_its_key_and_a_live_one_is_in_progress,
            purging_turns_an_expired_record_into_a_tombstone_then_frees_the_key,
            a_fenced_or_failed_idempotent_create_writes_nothing,
            a_create_that_claims_its_key_in_its_transaction_commits_or_writes_nothing,
            a_message_create_that_creates_its_application_writes_both_or_neither,
            an_idempotent_endpoint_create_commits_with_its_record_and_a_fenced_one_writes_nothing,
            a_keys_status_follows_its_record_and_the_oldest_claim_is_reported,
            a_claims_lease_lasts_as_long_as_its_settings_say,
            a_completed_record_expires_and_its_tombstone_ends_as_its_settings_say,
            without_a_tombstone_a_key_is_free_as_soon_as_its_record_expires,
            a_keys_record_tells_requests_apart_exactly_and_keeps_judging_version_1_records,
            // settings
            the_first_admin_token_hash_wins,
            a_fresh_store_answers_a_ping,
            // delivery queue: claims and leases
            a_claim_takes_only_due_pending_unleased_deliveries_earliest_first,
            a_claim_skips_the_endpoints_it_is_told_to_skip,
            a_claim_gives_each_endpoint_at_most_its_room,
            a_claim_carries_the_payload_the_event_type_and_the_endpoint_target,
            an_expired_or_expunged_payload_is_claimed_as_none,
            a_claim_with_a_limit_of_zero_takes_nothing,
            concurrent_claims_never_return_the_same_delivery,
            an_expired_lease_is_taken_over_and_the_old_owner_can_no_longer_record,
            renewing_a_lease_keeps_the_delivery_from_being_claimed,
            next_due_is_the_earliest_time_a_claim_can_take_something,
            next_due_is_a_lease_end_that_comes_before_the_next_due_delivery,
            // delivery queue: outcomes
            a_delivered_outcome_stores_the_attempt_and_finishes_the_delivery,
            a_retry_outcome_reschedules_the_delivery_with_its_counters,
            a_dead_letter_keeps_its_reason_and_last_status,
            a_hold_puts_the_delivery_back_to_held_without_an_attempt,
            an_endpoint_is_disabled_at_the_threshold_of_consecutive_dead_letters,
            a_gone_endpoint_is_disabled_at_once_and_its_waiting_deliveries_are_held,
            // delivery queue: several outcomes in one record
            a_batch_records_each_lease_once_and_only_under_its_token,
            dead_letters_in_one_batch_are_counted_in_its_order,
            a_gone_endpoint_is_disabled_with_auto_disabling_off_and_reported_once_per_batch,
            // delivery queue: attempts, expunge, retention
            attempts_are_listed_by_message_and_by_endpoint_with_paging_and_filters,
            attempts_are_invisible_through_another_application,
            expunging_a_message_removes_its_payload_and_its_attempts_responses,
            expunging_an_attempt_removes_only_its_response,
            deleting_an_endpoint_or_an_application_removes_its_attempts,
            purging_respects_the_deadlines_and_the_batch_size,
            purging_with_a_batch_of_zero_changes_nothing,
            // delivery queue: operators
            resend_resets_an_existing_delivery_and_creates_a_missing_one,
            resend_of_a_missing_message_or_endpoint_is_not_found,
            replay_makes_failed_deliveries_pending_again_spaced_in_creation_order,
            replay_filters_by_time_event_type_and_last_status_and_a_dry_run_changes_nothing,
            replay_through_another_application_is_not_found_even_as_a_dry_run,
            endpoint_stats_count_deliveries_by_state_within_the_window,
            // delivery queue: attempted destinations and messages, send-example
            attempted_destinations_are_the_messages_endpoints_with_their_status,
            attempted_messages_are_an_endpoints_messages_filtered_by_status_and_fields,
            a_message_to_one_endpoint_is_delivered_there_only,
            // inbound: sources, claims, quarantine, rejections, retention
            a_source_round_trips_updates_and_deletes_with_its_events,
            sources_page_through_in_both_directions_without_gaps,
            concurrent_claims_of_one_event_id_store_exactly_one_row,
            a_reused_id_with_another_payload_is_quarantined_once,
            events_without_an_id_are_never_deduplicated,
            an_event_keeps_its_exact_bytes_headers_and_pointers,
            a_quarantined_event_is_released_or_discarded_once,
            rejections_are_recorded_and_listed_per_source,
            purging_removes_old_content_but_keeps_the_claims,
            the_rejection_log_keeps_the_newest_rows_and_exact_counts,
            concurrent_rejections_are_each_counted_and_the_log_stays_bounded,
            an_idempotent_source_create_commits_with_its_record,
            // inbound: processing
            push_and_pull_claims_take_their_own_sources_events_under_a_lease,
            a_retry_reaches_only_the_destinations_still_owed_the_event,
            an_exhausted_event_is_dead_lettered_and_replay_forwards_it_again,
            an_expired_lease_is_uncertain_unless_the_destination_is_idempotent,
            a_pull_consumer_claims_completes_and_fails_under_its_lease,
            older_versions_of_an_entity_are_superseded_and_one_runs_at_a_time,
            renewing_an_inbound_lease_keeps_it_held,
            a_keyed_pull_claim_commits_with_its_record_or_leases_nothing,
            // inbound: the replay guard, decisions per destination
            a_replay_guard_refuses_seen_content_under_a_new_id_within_its_window,
            concurrent_replays_under_new_ids_store_one_event,
            replay_and_resolve_act_on_each_destination_on_its_own,
        );
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
    /// Every `pub async fn` case in the submodules is listed in `conformance_suite!`, so no case
    /// is silently left out of the backends' test runs.
    #[test]
    fn every_case_is_in_the_macro() {
        let macro_text = include_str!("conformance.rs");
        let modules = [
            include_str!("conformance/apps.rs"),
            include_str!("conformance/endpoints.rs"),
            include_str!("conformance/event_types.rs"),
            include_str!("conformance/fanout.rs"),
            include_str!("conformance/idempotency.rs"),
            include_str!("conformance/inbound.rs"),
            include_str!("conformance/inbound_keyed.rs"),
            include_str!("conformance/inbound_rejections.rs"),
            include_str!("conformance/inbound_guard.rs"),
            include_str!("conformance/inbound_work.rs"),
            include_str!("conformance/messages.rs"),
            include_str!("conformance/settings.rs"),
            include_str!("conformance/queue/claims.rs"),
            include_str!("conformance/queue/leases.rs"),
            include_str!("conformance/queue/outcomes.rs"),
            include_str!("conformance/queue/batches.rs"),
            include_str!("conformance/queue/attempts.rs"),
            include_str!("conformance/queue/retention.rs"),
            include_str!("conformance/queue/operators.rs"),
            include_str!("conformance/queue/replay.rs"),
            include_str!("conformance/queue/attempted.rs"),
        ];
        let mut count = 0;
        for source in modules {
            for line in source.lines() {
                if let Some(rest) = line.strip_prefix("pub async fn ") {
                    let name = rest.split('(').next().unwrap_or_default();
                    assert!(
                        macro_text.contains(&format!("            {name},\n")),
                        "case `{name}` is missing from conformance_suite!"
                    );
                    count += 1;
                }
            }
        }
        assert!(count >= 55, "found only {count} cases");
    }
}
