//! Delivery: the workers that turn delivery rows into signed HTTP attempts.
//!
//! The store is the queue. A [`Dispatcher`] claims due deliveries in batches with an expiring
//! lease, runs each attempt as a task (bounded per process and per endpoint, paced by
//! `throttleRate`), and hands outcomes to a recorder that writes them back in batches, fenced by
//! the lease token. A heartbeat renews the leases of attempts still running, so a slow attempt is
//! not taken over, while a crashed process's leases expire and another worker retries them:
//! at-least-once delivery, with the same `webhook-id` every time.
//!
//! # Layout
//! - [`request`]: the signature and custom headers of one attempt.
//! - [`attempt`]: one attempt (HTTP, or through a relay endpoint's `vow listen`), classified by
//!   `vow_core::retry` into the row and next state.
//! - [`throttle`]: per-endpoint pacing, shared through the store by every process.
//! - [`operational`]: operational webhooks (`endpoint.disabled`, `message.attempt.*`).
//! - [`alert`]: the dead-letter rate alert, raised and cleared once across nodes.
//! - [`settings`]: [`DeliverySettings`], how the workers of one process behave.
//! - [`dispatcher`]: deliveries as [`crate::worker`] work: in-flight bookkeeping and the recorder.

pub mod alert;
pub mod attempt;
pub mod dispatcher;
pub mod operational;
pub mod request;
pub mod settings;
pub mod throttle;

pub use dispatcher::Dispatcher;
pub use settings::DeliverySettings;
