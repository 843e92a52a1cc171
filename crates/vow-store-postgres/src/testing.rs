//! Test support (feature `testing`): a brand-new, migrated schema per call.
//!
//! [`fresh_store`] makes a schema of its own (`vow_pg_testing::fresh_schema`, on the server
//! `VOW_TEST_DATABASE_URL` names), migrates it, and returns its
//! store and URL (with `options=-c search_path=…`), for tests that start `vow` processes against
//! it. Tests never share rows and may run in parallel; when PostgreSQL cannot be reached, the
//! test fails, it never skips silently.

use vow_pg_testing::fresh_schema;

use crate::PgStore;

/// The pool size of a test store.
const TEST_POOL_SIZE: u32 = 4;

/// Creates and migrates a new schema; returns its store and URL. Panics, with the cause, when
/// the server cannot be reached or refuses.
pub async fn fresh_store() -> (PgStore, String) {
    let schema = fresh_schema().await;
    let store = PgStore::connect(&schema.url, TEST_POOL_SIZE)
        .await
        .unwrap_or_else(|e| schema.fail("connect to", &e));
    store
        .migrate()
        .await
        .unwrap_or_else(|e| schema.fail("migrate", &e));
    (store, schema.url)
}

/// SQL that adds application `app_1` with one endpoint, `ep_1`, for tests that fill tables
/// with rows of their own.
pub const ONE_APP_AND_ENDPOINT: &str =
    "INSERT INTO applications (id, name, metadata, created_at, updated_at)
     VALUES ('app_1', 'a', '{}', now(), now());
     INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
                            created_at, updated_at)
     VALUES ('ep_1', 'app_1', 'https://example.com/', '', false, '{}', '{}', now(), now());";
