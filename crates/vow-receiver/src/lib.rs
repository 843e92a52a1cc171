//! Seed 004's webhook consumer as a library: **verify** the exact raw bytes, **claim** the event
//! id, and make the **business change in the app's own database transaction**, so that a
//! delivery's side effect happens exactly once however often, and however concurrently, the
//! provider delivers it — and the 2xx goes out only once the claim and the change are durable.
//!
//! 1. [`Receiver::accept`] (or `Receiver::accept_http` in axum) verifies the request with
//!    [`vow_signature::provider::verify`] — any of the source's secrets, a tolerance both ways,
//!    constant-time comparisons — before the body is parsed at all ([`Rejection`]: 400
//!    unreadable, 401 not authentic or stale, nothing stored). Only then is the [`Identity`]
//!    read (source, account, event id; see [`Locator`]) and the [`PayloadDigest`] (SHA-256 of
//!    the raw bytes) taken: a [`Delivery`].
//! 2. `sqlite::process` / `postgres::process` open ONE transaction, claim the identity with a
//!    single `INSERT … ON CONFLICT DO NOTHING` (no check-then-insert), run the app's closure in
//!    that transaction and commit both ([`Outcome::Processed`], 200). A conflict with the same
//!    digest is a redelivery ([`Outcome::Duplicate`], 200, nothing done); with another digest,
//!    the new payload is quarantined ([`Outcome::Quarantined`], 202, not applied). A closure
//!    that fails rolls the claim back with its own writes, so the redelivery processes the
//!    event. A delivery without an event id is processed every time: a body hash is never an
//!    identity, since two events can have identical bodies.
//!
//! Where each scheme's event id is by default ([`Locator::event_id_of`], from
//! [`vow_signature::provider::Scheme::event_id_at`], the table vow's server uses too; override
//! with [`Config::with_event_id`]); where two are named, the first one present wins:
//!
//! | Scheme | Event id |
//! |---|---|
//! | Standard Webhooks / Svix, generic HMAC with an id header | the signed id (`webhook-id` / `svix-id`) |
//! | Stripe | body `/id` (`evt_…`) |
//! | Discord | body `/id` |
//! | Slack (Events API), Square, Paddle | body `/event_id` |
//! | GitHub | `X-GitHub-Delivery` |
//! | Shopify | `X-Shopify-Event-Id`, then `X-Shopify-Webhook-Id` |
//! | Linear | `Linear-Delivery` |
//! | Twilio | `I-Twilio-Idempotency-Token` |
//! | the seed styles | `X-Delivery-Id` |
//! | generic HMAC without an id header | none: configure one, or every delivery is processed |
//!
//! # Schema
//!
//! `sqlite::SCHEMA` / `postgres::SCHEMA` create two tables; the host runs them with its own
//! migrations, in the database of its business tables (that is what lets one transaction hold
//! both).
//!
//! - `receiver_claims (source, account, event_id, digest, received_at)`, primary key
//!   `(source, account, event_id)`: at most one row per identity, written only in the
//!   transaction of the business change. It has no state column because it needs none: the row
//!   exists exactly when the change committed (a claim whose change rolls back is rolled back
//!   with it), so its presence *is* the state "processed". An event without an account has
//!   `account = ''`.
//! - `receiver_quarantine (source, account, event_id, digest, payload, received_at)`, primary
//!   key `(source, account, event_id, digest)`: each other payload sent under a processed id,
//!   raw bytes kept for an operator, stored once however often it is redelivered. A separate
//!   table rather than a state column on the claims, so the claim's primary key stays the one
//!   unique constraint that decides, and any number of conflicting payloads fit beside it.
//!
//! A quarantine must not be lost with a business transaction that is never made: the
//! transaction is rolled back first (it holds nothing but the attempted claim), and the
//! payload is then stored on its own (SQLite: in autocommit, refused inside a transaction;
//! PostgreSQL: on a pool connection) before the 202 goes out. A crash in between loses
//! nothing: no 2xx was sent, so the provider delivers again and the payload is quarantined then.
//!
//! # Layout
//!
//! - [`receiver`]: [`Config`], [`Locator`], [`ConfigError`], [`Receiver`] and its `accept`.
//! - [`event`]: [`Identity`], [`PayloadDigest`], [`Delivery`], [`Decision`].
//! - [`rejection`]: [`Rejection`] with its HTTP class, status and stable code.
//! - [`outcome`]: [`Outcome`] and its status.
//! - [`error`]: the store's [`Error`].
//! - `sqlite` (feature `sqlite`): `SCHEMA`, `claim`, `quarantine`, `process`, and, with `axum`,
//!   `process_shared` on an `Arc<Mutex<rusqlite::Connection>>`.
//! - `postgres` (feature `postgres`): `SCHEMA`, `claim`, `quarantine`, `process` on a `PgPool`.
//! - `http` (feature `axum`): `Receiver::accept_http` and the JSON answers of [`Rejection`] and
//!   [`Outcome`].
//!
//! `examples/receiver-credit` is an axum app built on it.

pub mod error;
pub mod event;
#[cfg(feature = "axum")]
pub mod http;
pub mod outcome;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod receiver;
pub mod rejection;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use error::Error;
pub use event::{Decision, Delivery, Identity, PayloadDigest};
pub use outcome::Outcome;
pub use receiver::{Config, ConfigError, Locator, Receiver};
pub use rejection::{Field, Rejection, MAX_IDENTITY_LEN};
