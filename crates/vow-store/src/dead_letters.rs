//! The dead-letter rate alert's memory: when each endpoint's deliveries were dead-lettered, and
//! which endpoints have their alert raised.
//!
//! Recording an outcome that dead-letters a delivery
//! ([`DeliveryOutcomes::record_attempts`](crate::queue::DeliveryOutcomes::record_attempts))
//! also notes the dead-letter's time, in the same transaction, so a window's count per endpoint
//! is a range read ([`DeadLetterAlerts::dead_letters_since`]). Retention deletes the notes
//! older than [`KEPT`](crate::overview::KEPT), so a window is at most a day.
//!
//! An alert is a row: raising inserts it (or raises it again) and clearing stamps it cleared,
//! and each tells whether it did, so of several nodes checking at once one raises (and one
//! clears) each alert. A raise is refused unless it is later than the last clear: a node whose
//! check began before another node's clear counted dead-letters that have since left the window.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{AppId, EndpointId};

use crate::StoreResult;

/// An endpoint's dead-letters in a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetterCount {
    /// The endpoint's application.
    pub app_id: AppId,
    /// The endpoint.
    pub endpoint_id: EndpointId,
    /// Its deliveries dead-lettered in the window.
    pub count: u64,
}

/// An endpoint whose dead-letter alert is raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaisedAlert {
    /// The endpoint's application.
    pub app_id: AppId,
    /// The endpoint.
    pub endpoint_id: EndpointId,
    /// When the alert was raised.
    pub raised_at: DateTime<Utc>,
}

/// Dead-letter counts per endpoint, and the raised alerts.
#[async_trait]
pub trait DeadLetterAlerts: Send + Sync + 'static {
    /// Per existing endpoint with any, its deliveries dead-lettered at or after `since`.
    async fn dead_letters_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<DeadLetterCount>>;

    /// Raises the alert of `endpoint` at `now` unless it is raised or was cleared at or after
    /// `now`; whether this call raised it (false too when the endpoint is gone).
    async fn raise_dead_letter_alert(
        &self,
        app: AppId,
        endpoint: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Every raised alert not cleared since.
    async fn raised_dead_letter_alerts(&self) -> StoreResult<Vec<RaisedAlert>>;

    /// Clears the raised alert of `endpoint` at `now`; whether this call cleared it.
    async fn clear_dead_letter_alert(
        &self,
        endpoint: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
}
