//! `Idempotency-Key` as the IETF draft (draft-ietf-httpapi-idempotency-key-header-07) and Stripe
//! describe it, for any HTTP service.
//!
//! The pure parts need no IO: reading the header ([`IdempotencyKey`]), the request's fingerprint
//! and what differs between two requests ([`fingerprint`]), the problem types a service answers
//! with ([`Problem`]), and the record's types and decision ([`record`]). The record store, which
//! commits the stored response in the same transaction as the write it protects (ADR 6), is
//! behind the features `sqlite` (rusqlite) and `postgres` (sqlx).
//!
//! # Layout
//! - [`key`]: the header's two forms (sf-string or token), validated; a hash of it for logs.
//! - [`fingerprint`]: canonical JSON, the versioned SHA-256 fingerprint, and the JSON pointers at
//!   which two bodies differ.
//! - [`problem`]: the problem types, with stable URIs documented in `docs/problems.md`.
//! - [`record`]: scope, stored response, lease token, settings, and [`record::decide`].
//! - `sqlite`, `postgres`: `SCHEMA`, `begin`, `fence`, `complete`, `release`, `purge`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod columns;
pub mod error;
pub mod fingerprint;
pub mod key;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod problem;
pub mod record;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use error::Error;
pub use fingerprint::{Fingerprint, FINGERPRINT_VERSION};
pub use key::{IdempotencyKey, KeyError};
pub use problem::Problem;
pub use record::{Begun, LeaseToken, Scope, Settings, StoredResponse};
