//! Test support (feature `testing`): a brand-new, migrated schema per call.
//!
//! [`fresh_store`] makes a schema of its own (`vow_pg_testing::fresh_schema`, on the server
//! `VOW_TEST_DATABASE_URL` names), migrates it, and returns its
//! store and URL (with `options=-c search_path=…`), for tests that start `vow` processes against
//! it. Tests never share rows and may run in parallel; when PostgreSQL cannot be reached, the
//! test fails, it never skips silently.

use vow_pg_testing::fresh_schema;

use crate::PgStore;

/// How long a pooled connection may idle and still be handed out untested (the store's own).
pub const TRUSTED_IDLE: std::time::Duration = crate::TRUSTED_IDLE;

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

/// SQL that adds messages numbered `from` to `to` to `app_1`, each with one delivery to `ep_1`
/// (see [`ONE_APP_AND_ENDPOINT`]) in `status` (an SQL expression of the number, `i`), due a
/// millisecond apart from an hour ago.
pub fn deliveries_to_ep_1(from: u32, to: u32, status: &str) -> String {
    format!(
        "INSERT INTO messages (id, app_id, event_type, payload_expires_at, created_at)
         SELECT 'msg_' || lpad(i::text, 26, '0'), 'app_1', 't', now(), now()
         FROM generate_series({from}, {to}) AS i;
         INSERT INTO deliveries (id, app_id, msg_id, endpoint_id, status, next_attempt_at,
                                 created_at)
         SELECT 'dlv_' || lpad(i::text, 26, '0'), 'app_1', 'msg_' || lpad(i::text, 26, '0'),
                'ep_1', {status}, now() - interval '1 hour' + i * interval '1 ms', now()
         FROM generate_series({from}, {to}) AS i;"
    )
}
