//! `Idempotency-Key` as the IETF draft (draft-ietf-httpapi-idempotency-key-header-07) and Stripe
//! describe it, for any HTTP service.
//!
//! This crate holds the parts that need no IO: reading the header ([`IdempotencyKey`]), the
//! request's fingerprint and what differs between two requests ([`fingerprint`]), and the problem
//! types a service answers with ([`Problem`]). vow's API builds the stored records and the
//! transaction that commits them with the write on top of these.
//!
//! # Layout
//! - [`key`]: the header's two forms (sf-string or token), validated; a hash of it for logs.
//! - [`fingerprint`]: canonical JSON, the versioned SHA-256 fingerprint, and the JSON pointers at
//!   which two bodies differ.
//! - [`problem`]: the problem types, with stable URIs documented in `docs/problems.md`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod fingerprint;
pub mod key;
pub mod problem;

pub use fingerprint::{Fingerprint, FINGERPRINT_VERSION};
pub use key::{IdempotencyKey, KeyError};
pub use problem::Problem;
