//! What travels over a `vow tail` stream: `event: ready` first (the cursor the stream started
//! after), then one `event: attempt` per attempt, its SSE `id` the attempt's id and its data a
//! [`TailEvent`] (JSON). Comments keep an idle stream alive.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_store::queue::TailedAttempt;

/// The server-sent event name of the first event of a stream.
pub const READY_EVENT: &str = "ready";

/// The server-sent event name of an attempt.
pub const ATTEMPT_EVENT: &str = "attempt";

/// The `ready` event's data: where the stream starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ready {
    /// Attempts with ids after this one are streamed.
    pub after: String,
}

/// One attempt as the stream carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TailEvent {
    /// The attempt's id.
    pub id: String,
    /// When it started.
    pub time: DateTime<Utc>,
    /// The application.
    pub app_id: String,
    /// The endpoint.
    pub endpoint_id: String,
    /// The URL attempted.
    pub url: String,
    /// The message.
    pub msg_id: String,
    /// The message's event type.
    pub event_type: String,
    /// The response's status, if one came.
    pub status: Option<u16>,
    /// Why no response came, if none did.
    pub error: Option<String>,
    /// `success` (a 2xx) or `fail`.
    pub outcome: Outcome,
    /// How long it took, in milliseconds.
    pub ms: u64,
    /// 1 for the delivery's first attempt, 2 for the next, ...
    pub attempt: u32,
    /// When the delivery is tried again, if it waits for a retry.
    pub next_attempt: Option<DateTime<Utc>>,
}

/// How an attempt went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A 2xx response.
    Success,
    /// Anything else.
    Fail,
}

impl Outcome {
    /// `success` or `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Fail => "fail",
        }
    }

    /// The outcome named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Outcome::Success, Outcome::Fail]
            .into_iter()
            .find(|o| o.as_str() == s)
    }

    /// Whether it is a success.
    pub fn success(self) -> bool {
        self == Outcome::Success
    }
}

impl From<TailedAttempt> for TailEvent {
    fn from(a: TailedAttempt) -> Self {
        Self {
            id: a.id.to_string(),
            time: a.started_at,
            app_id: a.app_id.to_string(),
            endpoint_id: a.endpoint_id.to_string(),
            url: a.url,
            msg_id: a.msg_id.to_string(),
            event_type: a.event_type,
            status: a.response_status,
            error: a.error,
            outcome: if a.success {
                Outcome::Success
            } else {
                Outcome::Fail
            },
            ms: a.duration_ms,
            attempt: a.attempt,
            next_attempt: a.next_attempt_at,
        }
    }
}

/// A source stream's `status`: only `fail`.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Failures {
    /// Only the refusals and failed forwards.
    Fail,
}
