//! [`DeliverySettings`]: how the delivery workers of one process behave (the inbound
//! forwarder shares them).

use std::time::Duration;

use vow_core::RetrySchedule;

use crate::worker::Timing;

/// How the delivery workers of one process behave.
#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// Retry schedule for endpoints without their own.
    pub schedule: RetrySchedule,
    /// Per-attempt timeout for endpoints without their own.
    pub timeout: Duration,
    /// Deliveries in flight per process: claimed, until their outcomes are recorded.
    pub max_in_flight: usize,
    /// Requests in flight per endpoint: an attempt's slot frees as its response is in.
    pub max_per_endpoint: usize,
    /// Deliveries an endpoint may hold claimed, in multiples of `max_per_endpoint`: the ones
    /// beyond its slots wait in this process for a slot, so its next requests need not wait for
    /// a claim's round trip.
    pub claim_ahead: usize,
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
            claim_ahead: 1,
            claim_batch: 256,
            lease: Duration::from_secs(30),
            disable_after: 3,
            poll_interval: Duration::from_millis(500),
        }
    }
}

impl DeliverySettings {
    /// The lease, timeout and poll interval, as the worker loop takes them.
    pub fn timing(&self) -> Timing {
        Timing {
            lease: self.lease,
            timeout: self.timeout,
            poll_interval: self.poll_interval,
        }
    }
}
