//! The HTTP side of `Idempotency-Key` for an axum service (feature `axum`), independent of the
//! store (`respond.rs`): reading the key and `Prefer: wait=N` from the request headers, answering a
//! [`Problem`](crate::Problem) as `application/problem+json`, turning a
//! [`StoredResponse`](crate::StoredResponse) back into a response
//! (a replay carries `Idempotent-Replayed: true`), `Idempotency-Expires`, and [`answer`], which
//! maps a [`Begun`](crate::Begun) to the response a request that does not own the key gets ([`next`], the
//! decision itself, and [`begin_until`], the `Prefer: wait` polling).
//!
//! On these stands the one keyed flow, [`flow::run`]: on any [`RecordStore`] a host implements
//! (with an optional claim of the key in the write's own transaction), with the in-flight
//! registry ([`InFlight`]), the request read from its head ([`Head`]: the key, `Prefer: wait`,
//! the [`Route`]'s target and query in the fingerprint, a route's replay window). vow's server
//! runs it over its store.
//!
//! [`Request`], [`Done`], [`Failure`] and [`Outcome`] are the vocabulary of the "run this
//! operation at most once" entry points built on that flow, one a store: `sqlite::run` (features
//! `axum` + `sqlite`) and `postgres::run` (`axum` + `postgres`). A handler:
//! 1. reads the key with [`key`] (400 on a bad header, before anything else is done);
//! 2. validates its body (a validation failure is never stored);
//! 3. calls `run` with a [`Request`] (or `None` when the request has no key) and a closure that
//!    makes the business writes on the connection it is given, inside the transaction that also
//!    completes the record, and returns the value plus the response to store ([`Done`]);
//! 4. answers with the [`Outcome`] (it is `IntoResponse` when the closure's error is).
//!
//! `Idempotency-Expires` is an HTTP-date (IMF-fixdate, RFC 9110 §5.6.7), like `Expires`.

pub mod flow;
pub mod in_flight;
mod keyed;
mod next;
mod once;
#[cfg(feature = "postgres")]
pub mod postgres;
mod respond;
mod route;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use in_flight::InFlight;
pub use keyed::{Ended, Event, Fresh, Head, Keyed, Owner, RecordStore, Settled};
pub use next::{begin_until, next, Next, POLL};
pub use once::{Done, Failure, Outcome, Request};
pub use respond::{
    answer, http_date, into_stored, key, prefer_wait, replay, response, with_expires,
    IDEMPOTENCY_EXPIRES, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, MAX_WAIT,
};
pub use route::Route;
