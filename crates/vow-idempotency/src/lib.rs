//! `Idempotency-Key` as the IETF draft (draft-ietf-httpapi-idempotency-key-header-07) and Stripe
//! describe it, for any HTTP service.
//!
//! The pure parts need no IO: reading the header ([`IdempotencyKey`]), the request's fingerprint
//! and what differs between two requests ([`fingerprint`]), the problem types a service answers
//! with ([`Problem`]), and the record's types and decision ([`record`]). The record store, which
//! commits the stored response in the same transaction as the write it protects (ADR 6), is
//! behind the features `sqlite` (rusqlite) and `postgres` (sqlx). The feature `axum` adds the HTTP
//! glue ([`http`]): the one keyed flow on any record store a host implements (vow's server runs
//! it over its own), and, with a store feature, the entry point a handler calls to run an
//! operation at most once, its writes in the transaction that completes the record
//! (`http::sqlite::run`, `http::postgres::run`; `examples/jobs-api` is one such service).
//!
//! # Layout
//! - [`key`]: the header's two forms (sf-string or token), validated; a hash of it for logs.
//! - `canonical`: canonical JSON read from the body's text, numbers exact.
//! - [`fingerprint`]: the versioned SHA-256 fingerprint (method, target, query, canonical body),
//!   what differs between two requests, and version 1's rules for the records it wrote.
//! - [`problem`]: the problem types, with stable URIs documented in `docs/problems.md`.
//! - [`record`]: scope, stored response, lease token, settings, and [`record::decide`].
//! - [`status`]: what a client may ask about its key ([`KeyStatus`]).
//! - `sqlite`, `postgres`: `SCHEMA`, `begin`, `fence`, `complete`, `release`, `purge`, `status`,
//!   `oldest_in_progress`; `postgres` also claims keys inside the host's write (`Claim`,
//!   `claim_completed`), many in one statement for a host that batches requests (`claim_many`,
//!   `unclaim`), or folded into that host's one write (`Claim::MANY_CTE`).
//! - `http` (feature `axum`): the key and `Prefer: wait` from a `HeaderMap`, problem, replay and
//!   `Idempotency-Expires` responses, and the vocabulary of the entry points (`Request`, `Done`,
//!   `Failure`, `Outcome`).
//!   - `http/next.rs`: what a begun record says to do (`next`), and the `Prefer: wait` polling
//!     (`begin_until`).
//!   - `http/keyed.rs`: what the flow works with: `Head` (a request's key, wait, target and
//!     query, replay window), `Keyed`, the `RecordStore` trait a host implements, `Owner`,
//!     `Ended`, `Settled`, `Event`.
//!   - `http::flow`: the one keyed flow (in flight here, claim in the write or begin and wait,
//!     complete, store a final refusal, release), which vow's server runs too.
//!   - `http::in_flight`: the keyed requests running in this process.
//!   - `http/route.rs`: `Route`, a keyed route's template and the query it reads.
//!   - `http/once.rs`: both entry points' `run` on the flow.
//!   - `http::sqlite` (with `sqlite`): `run` over a `WithConnection` (e.g.
//!     `Arc<Mutex<rusqlite::Connection>>`).
//!   - `http::postgres` (with `postgres`): `run` over a `PgPool`, the operation a
//!     `for<'c> FnOnce(&'c mut PgConnection) -> BoxFuture<'c, _>`.

mod canonical;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod columns;
pub mod error;
pub mod fingerprint;
#[cfg(feature = "axum")]
pub mod http;
pub mod key;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod problem;
pub mod record;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod status;

pub use error::Error;
pub use fingerprint::{Fingerprint, FINGERPRINT_VERSION};
pub use key::{IdempotencyKey, KeyError};
pub use problem::Problem;
pub use record::{Begun, LeaseToken, Recorded, Scope, Settings, StoredResponse};
pub use status::{KeyState, KeyStatus};
