//! A source's activity as a feed tails it ([`super::feed::Tailed`], by
//! [`ActivityKey`]) and as its stream carries it: `event: activity`, its SSE `id` the key and
//! its data an [`ActivityLine`] (JSON): an event as it arrived, a destination's outcome as
//! recorded, a refused request.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_store::inbound::activity::{Activity, ActivityFilter, ActivityKey};
use vow_store::inbound::processing::Forward;
use vow_store::{InboundStore, StoreResult};

use super::feed::Tailed;

/// The server-sent event name of a source's activity.
pub const ACTIVITY_EVENT: &str = "activity";

/// A source's activity that `filter` selects.
pub struct SourceActivity {
    /// Where it is read.
    pub inbound: Arc<dyn InboundStore>,
    /// Which.
    pub filter: ActivityFilter,
}

impl Tailed for SourceActivity {
    type Row = Activity;
    type Key = ActivityKey;

    fn key(row: &Activity) -> ActivityKey {
        row.key()
    }

    async fn page(&self, after: &ActivityKey, limit: usize) -> StoreResult<Vec<Activity>> {
        self.inbound.tail_inbound(&self.filter, after, limit).await
    }
}

/// One thing that happened at a source, as the stream carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityLine {
    /// Its place in the activity (the SSE id).
    pub key: String,
    /// When it was written.
    pub time: DateTime<Utc>,
    /// A refused request, a quarantined arrival, a forward not completed.
    pub failed: bool,
    /// What happened.
    #[serde(flatten)]
    pub what: What,
}

/// What happened, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum What {
    /// An event arrived and was stored.
    Event {
        /// The stored event's id (`inevt_…`).
        id: String,
        /// The provider's event id, if it had one.
        provider_event_id: Option<String>,
        /// `received`, or `quarantined` (its id was stored with another payload).
        arrival: String,
        /// Its state when it was read.
        state: String,
        /// The body's size in bytes.
        size: u64,
    },
    /// A destination's outcome of an event was recorded.
    Forward {
        /// The event (`inevt_…`).
        id: String,
        /// The provider's event id, if it had one.
        provider_event_id: Option<String>,
        /// The destination (`dst_…`), or `pull` for a pull consumer.
        destination: String,
        /// `completed`, `retryable`, `rejected`, `uncertain` or `dead_lettered`.
        outcome: String,
        /// The last response status, if one came.
        status: Option<u16>,
        /// Attempts made there so far.
        attempts: u32,
        /// The last problem, if any.
        error: Option<String>,
    },
    /// A request was refused.
    Rejection {
        /// The rejection's id (`inrej_…`).
        id: String,
        /// Why (`signature_mismatch`, `timestamp_too_old`, …).
        reason: String,
        /// The status answered.
        status: u16,
    },
}

impl From<Activity> for ActivityLine {
    fn from(row: Activity) -> Self {
        let (key, failed) = (row.key(), row.failed());
        let what = match row {
            Activity::Event(e) => What::Event {
                id: e.id.to_string(),
                provider_event_id: e.event_id,
                arrival: if e.conflicts_with.is_some() {
                    "quarantined"
                } else {
                    "received"
                }
                .to_string(),
                state: e.state.as_str().to_string(),
                size: e.size,
            },
            Activity::Forward(f) => {
                let Forward {
                    outcome,
                    attempts,
                    status,
                    error,
                    ..
                } = f.forward;
                What::Forward {
                    id: f.event.to_string(),
                    provider_event_id: f.provider_event_id,
                    destination: key.part.clone(),
                    outcome: outcome.as_str().to_string(),
                    status,
                    attempts,
                    error,
                }
            }
            Activity::Rejection(r) => What::Rejection {
                id: r.id.to_string(),
                reason: r.reason,
                status: r.status,
            },
        };
        Self {
            key: key.to_string(),
            time: key.at,
            failed,
            what,
        }
    }
}
