//! A brand-new PostgreSQL schema per test, for every vow crate whose suite runs on PostgreSQL.
//!
//! [`fresh_schema`] creates the schema `vow_test_<random>` on the server named by
//! `VOW_TEST_DATABASE_URL` (default [`DEFAULT_SERVER_URL`]) and returns a URL whose connections
//! use it as their `search_path`, so tests never share rows and may run in parallel; [`pool`]
//! connects to a new one. A schema is far cheaper than a database to create and to drop (no
//! checkpoint); the schemas are left behind, and CI drops `vow_test_*` before each run. When
//! PostgreSQL cannot be reached it panics: a test that needs the database fails, it never skips
//! silently.

use std::error::Error;
use std::time::Duration;

use rand::distributions::Alphanumeric;
use rand::Rng;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection, PgPool};
use url::Url;

/// The server used when `VOW_TEST_DATABASE_URL` is not set.
pub const DEFAULT_SERVER_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The server the tests run on: `VOW_TEST_DATABASE_URL`, or [`DEFAULT_SERVER_URL`].
pub fn server_url() -> String {
    std::env::var("VOW_TEST_DATABASE_URL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_SERVER_URL.to_string())
}

/// A schema made for one test.
#[derive(Debug, Clone)]
pub struct Schema {
    /// Its name, `vow_test_<16 random lowercase letters and digits>`.
    pub name: String,
    /// The server's URL with `options=-c search_path=<name>`: connections made with it (a pool,
    /// a `vow` process) use the schema.
    pub url: String,
}

impl Schema {
    /// Fails the test: could not `what` (e.g. "migrate") this schema, because of `cause` and
    /// its sources.
    pub fn fail(&self, what: &str, cause: &dyn Error) -> ! {
        panic!(
            "could not {what} test schema {}: {}",
            self.name,
            chain(cause)
        )
    }
}

/// Creates a new schema on [`server_url`]. Panics, with the cause, when the server cannot be
/// reached or refuses.
pub async fn fresh_schema() -> Schema {
    fresh_schema_on(&server_url()).await
}

/// A pool of `size` connections on a new schema ([`fresh_schema`]).
pub async fn pool(size: u32) -> PgPool {
    let schema = fresh_schema().await;
    PgPoolOptions::new()
        .max_connections(size)
        .connect(&schema.url)
        .await
        .unwrap_or_else(|e| schema.fail("connect to", &e))
}

/// [`fresh_schema`] on the server at `server`.
pub async fn fresh_schema_on(server: &str) -> Schema {
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
    Schema {
        name,
        url: url.to_string(),
    }
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
         at one (e.g. {DEFAULT_SERVER_URL})."
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
        fresh_schema_on("postgres://postgres@127.0.0.1:1/postgres").await;
    }

    #[test]
    fn a_password_is_never_shown() {
        let url = Url::parse("postgres://vow:hunter2@db:5432/vow").unwrap();
        assert_eq!(redacted(&url), "postgres://vow:redacted@db:5432/vow");
    }

    #[tokio::test]
    async fn each_schema_is_new_and_its_url_uses_it() {
        let (a, b) = (fresh_schema().await, fresh_schema().await);
        assert_ne!(a.name, b.name);
        let mut conn = PgConnection::connect(&a.url).await.unwrap();
        let current: String = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(current, a.name);
    }
}
