//! A pool on a fresh schema of the test PostgreSQL server, for this crate's tests and
//! `examples/receiver-credit`'s (which include this file).

use std::str::FromStr;

use rand::distributions::Alphanumeric;
use rand::Rng;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

/// A pool of `size` connections whose `search_path` is a new schema `vow_test_<random>` of the
/// server named by `VOW_TEST_DATABASE_URL` (default
/// `postgres://postgres@127.0.0.1:5432/postgres`). Panics, so the test fails, when the server
/// cannot be reached.
pub async fn fresh_schema(size: u32) -> PgPool {
    let server = std::env::var("VOW_TEST_DATABASE_URL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let name: String = rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(16)
        .map(|c| char::from(c).to_ascii_lowercase())
        .collect();
    let name = format!("vow_test_{name}");
    let options = PgConnectOptions::from_str(&server).expect("VOW_TEST_DATABASE_URL is a URL");
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options.clone())
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL is not reachable: {e}"));
    sqlx::query(&format!("CREATE SCHEMA \"{name}\""))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    PgPoolOptions::new()
        .max_connections(size)
        .connect_with(options.options([("search_path", name.as_str())]))
        .await
        .unwrap()
}
