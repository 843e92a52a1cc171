//! One delivery attempt: sign, POST through the SSRF-guarded client (or hand it to the
//! `vow listen` of a relay endpoint, [`crate::relay`]), classify with the outcome policy, and
//! describe what to record. Never fails: every problem becomes an outcome.
//!
//! Each attempt is a `delivery.attempt` span, a child of its message's stored trace context,
//! whose own context goes to the endpoint as `traceparent` ([`trace_context`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, SubsecRound, Utc};
use vow_core::retry::{decide, AttemptContext, AttemptResult, Decision};
use vow_core::{AttemptId, RetrySchedule};
use vow_egress::{EgressClient, EgressError};
use vow_store::queue::{AttemptOutcome, AttemptTrigger, ClaimedDelivery, NewAttempt, NextState};

use tracing::{Instrument, Span};

use super::request;
use crate::relay::{self, Handed, Hub};
use crate::telemetry::trace_context::{self, traced};

/// What an attempt needs besides the delivery.
#[derive(Clone)]
pub struct AttemptEnv {
    /// The outbound client.
    pub egress: EgressClient,
    /// The schedule for endpoints without their own.
    pub schedule: RetrySchedule,
    /// The timeout for endpoints without their own.
    pub timeout: Duration,
    /// The `vow listen` connections relay endpoints are attempted through.
    pub relay: Arc<Hub>,
}

/// Attempts `claimed` once, at logical time `now` (the wall clock in production; tests move it
/// forward to reach retries), and returns what to record.
pub async fn run(
    env: &AttemptEnv,
    claimed: &ClaimedDelivery,
    now: DateTime<Utc>,
) -> AttemptOutcome {
    let span = traced(|| {
        tracing::info_span!(
            "delivery.attempt",
            endpoint_id = %claimed.delivery.endpoint_id,
            msg_id = %claimed.delivery.msg_id,
            attempt = claimed.delivery.attempts + 1,
            outcome = tracing::field::Empty,
            status_code = tracing::field::Empty,
        )
    });
    trace_context::follow(&span, claimed.traceparent.as_deref());
    let outcome = attempt(env, claimed, now, &span)
        .instrument(span.clone())
        .await;
    span.record("outcome", outcome.next.kind());
    if let Some(status) = outcome.attempt.as_ref().and_then(|a| a.response_status) {
        span.record("status_code", status);
    }
    outcome
}

/// [`run`] within `span`.
async fn attempt(
    env: &AttemptEnv,
    claimed: &ClaimedDelivery,
    now: DateTime<Utc>,
    span: &Span,
) -> AttemptOutcome {
    let started_at = now.trunc_subsecs(6);
    let outcome =
        |attempt: Option<NewAttempt>, next: NextState, at: DateTime<Utc>| AttemptOutcome {
            delivery_id: claimed.delivery.id,
            lease: claimed.lease.clone(),
            attempt,
            next,
            now: at,
        };
    let target = &claimed.endpoint;
    if target.disabled {
        return outcome(None, NextState::Hold, started_at);
    }
    let Some(payload) = &claimed.payload else {
        let next = NextState::DeadLetter {
            reason: "the payload expired before it could be delivered".into(),
            disable_endpoint: false,
        };
        return outcome(None, next, started_at);
    };
    let timestamp = u64::try_from(started_at.timestamp()).unwrap_or_default();
    let clock = std::time::Instant::now();
    let sent = send(env, claimed, payload, timestamp, span).await;
    let elapsed = clock.elapsed();
    let finished =
        (started_at + chrono::Duration::from_std(elapsed).unwrap_or_default()).trunc_subsecs(6);
    let Some(sent) = sent else {
        let expected = env.relay.expected(&Handed::delivery(claimed).target);
        return outcome(None, relay::waiting(claimed, finished, expected), finished);
    };
    let (result, attempt) = describe(&sent, elapsed);
    let attempt = NewAttempt {
        id: AttemptId::new(),
        started_at,
        url: target.url.clone(),
        trigger: if claimed.delivery.manual {
            AttemptTrigger::Manual
        } else {
            AttemptTrigger::Scheduled
        },
        ..attempt
    };
    let ctx = AttemptContext {
        attempt: claimed.delivery.attempts + 1,
        client_errors_before: claimed.delivery.client_errors,
    };
    let schedule = target
        .options
        .retry_schedule
        .as_ref()
        .unwrap_or(&env.schedule);
    let decision = decide(&result, ctx, schedule, finished, &mut rand::thread_rng());
    let client_errors = claimed.delivery.client_errors + u32::from(result.is_client_error());
    let next = match decision {
        Decision::Delivered => NextState::Delivered,
        Decision::RetryAt(at) => NextState::RetryAt {
            at: at.trunc_subsecs(6),
            client_errors,
        },
        Decision::DeadLetter { reason } => NextState::DeadLetter {
            reason: reason.to_string(),
            disable_endpoint: false,
        },
        Decision::DeadLetterAndDisable { reason } => NextState::DeadLetter {
            reason: reason.to_string(),
            disable_endpoint: true,
        },
    };
    outcome(Some(attempt), next, finished)
}

/// Signs `payload` and sends it with `span`'s trace context: an HTTP request, or for a relay
/// endpoint a request handed to its `vow listen` ([`crate::relay`]). `None`: a relay endpoint
/// with no listener connected (nothing was sent).
async fn send(
    env: &AttemptEnv,
    claimed: &ClaimedDelivery,
    payload: &str,
    timestamp: u64,
    span: &Span,
) -> Option<Result<vow_egress::EgressResponse, EgressError>> {
    let target = &claimed.endpoint;
    let msg_id = claimed.delivery.msg_id.to_string();
    let mut headers = match request::headers(
        target.options.signature_style,
        &msg_id,
        timestamp,
        payload.as_bytes(),
        &target.secrets,
        &target.headers,
    ) {
        Ok(headers) => headers,
        Err(e) => {
            return Some(Err(EgressError::InvalidUrl {
                reason: e.to_string(),
            }))
        }
    };
    trace_context::outbound(span, claimed.traceparent.as_deref(), &mut headers);
    let timeout = target
        .options
        .timeout_ms
        .map_or(env.timeout, |ms| Duration::from_millis(ms.into()));
    if relay::is_relay(&target.url) {
        let handed = Handed::delivery(claimed);
        return env
            .relay
            .attempt(handed, &headers, payload.as_bytes(), timeout)
            .await;
    }
    Some(match url::Url::parse(&target.url) {
        Ok(url) => {
            let body = Bytes::copy_from_slice(payload.as_bytes());
            env.egress.post(&url, headers, body, Some(timeout)).await
        }
        Err(e) => Err(EgressError::InvalidUrl {
            reason: e.to_string(),
        }),
    })
}

/// The policy's view of a send, and the attempt row's response fields.
fn describe<'a>(
    sent: &'a Result<vow_egress::EgressResponse, EgressError>,
    elapsed: Duration,
) -> (AttemptResult<'a>, NewAttempt) {
    let mut row = NewAttempt {
        id: AttemptId::new(),
        started_at: Utc::now(),
        url: String::new(),
        response_status: None,
        response: String::new(),
        duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        success: false,
        error: None,
        trigger: AttemptTrigger::Scheduled,
    };
    let result = match sent {
        Ok(resp) => {
            row.response_status = Some(resp.status);
            row.response = String::from_utf8_lossy(&resp.body_prefix).into_owned();
            row.success = (200..300).contains(&resp.status);
            row.duration_ms = u64::try_from(resp.latency.as_millis()).unwrap_or(u64::MAX);
            AttemptResult::Response {
                status: resp.status,
                retry_after: resp.retry_after(),
            }
        }
        Err(e) => {
            row.error = Some(e.to_string());
            row.response = e.to_string();
            match e {
                EgressError::Refused(_) | EgressError::InvalidUrl { .. } => AttemptResult::Refused,
                EgressError::Timeout { .. } => AttemptResult::Timeout,
                _ => AttemptResult::ConnectFailed,
            }
        }
    };
    (result, row)
}
