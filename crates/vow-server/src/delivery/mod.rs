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
//! - [`attempt`]: one attempt, classified by `vow_core::retry` into the row and next state.
//! - [`throttle`]: per-endpoint pacing.
//! - [`backoff`]: the pause between retries of a failing store call.
//! - [`operational`]: operational webhooks (`endpoint.disabled`, `message.attempt.*`).
//! - [`dispatcher`]: the claim loop, in-flight bookkeeping, heartbeat and recorder.

pub mod attempt;
pub mod backoff;
pub mod dispatcher;
pub mod operational;
pub mod request;
pub mod throttle;

use std::time::Duration;

pub use dispatcher::Dispatcher;
use vow_core::RetrySchedule;

/// How the delivery workers of one process behave.
#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// Retry schedule for endpoints without their own.
    pub schedule: RetrySchedule,
    /// Per-attempt timeout for endpoints without their own.
    pub timeout: Duration,
    /// Attempts in flight per process.
    pub max_in_flight: usize,
    /// Attempts in flight per endpoint.
    pub max_per_endpoint: usize,
    /// Deliveries claimed per claim.
    pub claim_batch: usize,
    /// Lease length; renewed every third of it while an attempt runs.
    pub lease: Duration,
    /// Consecutive dead-letters that disable an endpoint (0 = never).
    pub disable_after: u32,
    /// How often an idle worker looks for work that another process queued.
    pub poll_interval: Duration,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        Self {
            schedule: RetrySchedule::default(),
            timeout: Duration::from_secs(10),
            max_in_flight: 256,
            max_per_endpoint: 32,
            claim_batch: 256,
            lease: Duration::from_secs(30),
            disable_after: 3,
            poll_interval: Duration::from_millis(500),
        }
    }
}
