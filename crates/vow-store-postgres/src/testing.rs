//! Test support (feature `testing`): a brand-new, migrated schema per call.
//!
//! [`fresh_store`] creates the schema `vow_test_<random>` in the database named by
//! `VOW_TEST_DATABASE_URL` (default [`DEFAULT_SERVER_URL`]) and connects with that schema as the
//! `search_path`, so tests never share rows and may run in parallel. It returns the URL too
//! (with `options=-c search_path=…`), for tests that start `vow` processes against it. A schema
//! is far cheaper than a database to create and to drop (no checkpoint); the schemas are left
//! behind and CI drops `vow_test_*` before each run. When PostgreSQL cannot be reached it
//! panics: a test that needs the database fails, it never skips silently.

use std::error::Error;
use std::time::Duration;

use rand::distributions::Alphanumeric;
use rand::Rng;
use sqlx::{Connection, PgConnection};
use url::Url;

use crate::PgStore;

/// The server used when `VOW_TEST_DATABASE_URL` is not set.
pub const DEFAULT_SERVER_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The pool size of a test store.
const TEST_POOL_SIZE: u32 = 4;

/// Creates and migrates a new schema; returns its store and URL. Panics, with the cause, when
/// the server cannot be reached or refuses.
pub async fn fresh_store() -> (PgStore, String) {
    let server = std::env::var("VOW_TEST_DATABASE_URL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_SERVER_URL.to_string());
    fresh_store_on(&server).await
}

/// [`fresh_store`] on the server at `server`.
async fn fresh_store_on(server: &str) -> (PgStore, String) {
    let mut url =
        Url::parse(server).unwrap_or_else(|e| panic!("VOW_TEST_DATABASE_URL is not a URL ({e})"));
    let shown = redacted(&url);

    let name = format!("vow_test_{}", random_suffix());
    let mut admin = tokio::time::timeout(Duration::from_secs(10), PgConnection::connect(server))
        .await
        .unwrap_or_else(|_| unreachable_server(&shown, &"no answer within 10 s"))
        .unwrap_or_else(|e| unreachable_server(&shown, &e));
    sqlx::query(&format!("CREATE SCHEMA \"{name}\""))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "could not create test schema {name} on {shown}: {}",
                chain(&e)
            )
        });
    let _ = admin.close().await;

    url.query_pairs_mut()
        .append_pair("options", &format!("-c search_path={name}"));
    let store = PgStore::connect(url.as_str(), TEST_POOL_SIZE)
        .await
        .unwrap_or_else(|e| panic!("could not connect to test schema {name}: {}", chain(&e)));
    store
        .migrate()
        .await
        .unwrap_or_else(|e| panic!("could not migrate test schema {name}: {}", chain(&e)));
    (store, url.to_string())
}

/// 16 random lowercase letters and digits (identifiers are folded to lowercase anyway).
fn random_suffix() -> String {
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(16)
        .map(|c| char::from(c).to_ascii_lowercase())
        .collect()
}

fn unreachable_server(shown: &str, cause: &dyn std::fmt::Display) -> ! {
    panic!(
        "PostgreSQL is not reachable at {shown}: {cause}\n\
         These tests need a running PostgreSQL server: start one, or point VOW_TEST_DATABASE_URL \
         at one (e.g. postgres://postgres@127.0.0.1:5432/postgres)."
    )
}

/// `url` without its password, for messages.
fn redacted(url: &Url) -> String {
    let mut shown = url.clone();
    if shown.password().is_some() {
        let _ = shown.set_password(Some("redacted"));
    }
    shown.to_string()
}

/// An error and its causes, `: `-separated.
fn chain(err: &dyn Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    #[should_panic(expected = "PostgreSQL is not reachable at postgres://postgres@127.0.0.1:1/")]
    async fn an_unreachable_server_fails_the_test_loudly() {
        fresh_store_on("postgres://postgres@127.0.0.1:1/postgres").await;
    }

    #[test]
    fn a_password_is_never_shown() {
        let url = Url::parse("postgres://vow:hunter2@db:5432/vow").unwrap();
        assert_eq!(redacted(&url), "postgres://vow:redacted@db:5432/vow");
    }
}
