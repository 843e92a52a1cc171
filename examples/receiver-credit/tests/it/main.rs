//! receiver-credit over HTTP: a real server on port 0, driven with reqwest, its balances and
//! claim rows counted in the database. Every behaviour in [`credit`] runs twice, as
//! `sqlite::<name>` (a database file in a temporary directory) and `postgres::<name>` (a fresh
//! schema `vow_test_<random>` of the server named by `VOW_TEST_DATABASE_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`). The PostgreSQL tests fail, never skip, when
//! it cannot be reached.

mod app;
mod credit;
#[path = "../../../../crates/vow-receiver/tests/it/pg.rs"]
mod pg;

/// A `sqlite` and a `postgres` test for each behaviour `credit::<name>(&TestApp)`.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    crate::credit::$name(&crate::app::TestApp::sqlite().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    crate::credit::$name(&crate::app::TestApp::postgres().await).await;
                }
            )*
        }
    };
}

on_both_stores!(
    fifty_concurrent_deliveries_of_one_signed_event_credit_the_account_once,
    a_stripe_event_redelivered_with_fresh_signatures_is_credited_once,
    a_changed_payload_under_a_credited_id_is_quarantined_with_202_and_not_applied,
    a_bad_signature_is_401_and_writes_nothing,
    a_missing_signature_header_is_400_and_writes_nothing,
    an_expired_timestamp_is_401_and_writes_nothing,
    an_event_without_an_id_is_credited_every_time,
    a_crash_between_the_commit_and_the_response_makes_the_redelivery_a_duplicate,
    a_failed_credit_rolls_back_its_claim_and_the_redelivery_credits_once,
    an_authentic_event_that_is_not_a_valid_credit_is_422_and_writes_nothing,
    an_event_of_another_type_is_acknowledged_once_and_credits_nothing,
    a_secret_being_rotated_out_still_verifies,
);
