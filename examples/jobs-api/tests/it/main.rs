//! jobs-api over HTTP: a real server on port 0, driven with reqwest, its rows counted in the
//! database. Every behaviour in [`jobs`] runs twice, as `sqlite::<name>` (a database file in a
//! temporary directory) and `postgres::<name>` (a fresh schema `vow_test_<random>` of the server
//! named by `VOW_TEST_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/postgres`; CI
//! drops `vow_test_%` schemas). The PostgreSQL tests fail, never skip, when it cannot be reached.

mod app;
mod jobs;

/// A `sqlite` and a `postgres` test for each behaviour `jobs::<name>(&TestApp)`.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    crate::jobs::$name(&crate::app::TestApp::sqlite().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    crate::jobs::$name(&crate::app::TestApp::postgres().await).await;
                }
            )*
        }
    };
}

on_both_stores!(
    the_seed_scenario_answers_job_1_job_1_422_and_job_2,
    a_replay_is_marked_and_says_when_the_key_expires,
    the_same_key_with_another_body_is_422_with_the_differing_pointers_and_creates_nothing,
    without_a_key_every_post_is_a_new_job_and_no_record_is_kept,
    an_invalid_key_is_400_and_nothing_is_stored,
    a_body_that_is_not_a_json_object_is_400_and_nothing_is_stored,
    a_key_in_progress_is_409_with_retry_after_and_creates_nothing,
    fifty_concurrent_identical_posts_create_one_job_and_each_gets_it_or_a_409,
    fifty_concurrent_identical_posts_that_prefer_to_wait_all_get_the_same_job,
    a_write_that_fails_is_not_stored_and_the_retry_with_the_key_creates_the_job,
    past_its_ttl_a_key_is_422_expired_and_never_creates_a_second_job,
    without_the_records_table_a_keyed_post_is_503_and_creates_nothing,
);
