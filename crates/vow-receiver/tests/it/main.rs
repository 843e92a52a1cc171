//! vow-receiver's store and HTTP behaviour. The store tests assert the durable rows (claims,
//! quarantine, the side effects of a business table), not only the outcomes: `sqlite` against a
//! database file, `postgres` in a fresh schema `vow_test_<random>` of the server named by
//! `VOW_TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`; CI drops
//! `vow_test_%` schemas), failing, never skipping, when it cannot be reached.

mod common;
#[cfg(feature = "axum")]
mod http;
#[cfg(feature = "postgres")]
pub mod pg;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
