//! A pool on a fresh schema of the test PostgreSQL server, for this crate's tests and
//! `examples/receiver-credit`'s (which include this file).

use sqlx::PgPool;

/// A pool of `size` connections whose `search_path` is a new schema `vow_test_<random>` of the
/// server named by `VOW_TEST_DATABASE_URL` (`vow_pg_testing::pool`). Panics, so the test fails,
/// when the server cannot be reached.
pub async fn fresh_schema(size: u32) -> PgPool {
    vow_pg_testing::pool(size).await
}
