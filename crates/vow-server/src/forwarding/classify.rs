//! What one forward's result means (issue 5, item 6): a pure function of the response or the
//! error, and whether the destination is idempotent.
//!
//! - 2xx → `completed`; 408, 429 and 5xx (and anything else that is not a 4xx) → `retryable`;
//!   any other 4xx → `rejected`.
//! - No response: a failure before the whole request was sent (DNS, connect, refused by the
//!   SSRF guard, a timeout while connecting) → `retryable`; a timeout or a broken connection
//!   after it was sent → `uncertain` (the destination may have acted), or `retryable` when
//!   the destination is idempotent.
//! - A `vow-outcome: retryable|rejected|uncertain` response header overrides all of that.

use vow_egress::{EgressError, EgressResponse};
use vow_store::inbound::processing::{DestinationResult, Outcome};

/// The response header a destination classifies its own answer with.
pub const OUTCOME_HEADER: &str = "vow-outcome";

/// Characters of a response body kept in an error, at most.
const BODY_IN_ERROR: usize = 200;

/// The outcome of one forward (its destination left for the caller to fill in).
pub fn classify(sent: &Result<EgressResponse, EgressError>, idempotent: bool) -> DestinationResult {
    let (outcome, status, error) = match sent {
        Ok(resp) => {
            let said = resp
                .header(OUTCOME_HEADER)
                .and_then(|v| Outcome::parse(v.trim()))
                .filter(|o| {
                    matches!(
                        o,
                        Outcome::Retryable | Outcome::Rejected | Outcome::Uncertain
                    )
                });
            let by_status = match resp.status {
                200..=299 => Outcome::Completed,
                408 | 429 => Outcome::Retryable,
                400..=499 => Outcome::Rejected,
                _ => Outcome::Retryable,
            };
            let outcome = said.unwrap_or(by_status);
            let error = (outcome != Outcome::Completed).then(|| {
                let body = String::from_utf8_lossy(&resp.body_prefix);
                let body: String = body.chars().take(BODY_IN_ERROR).collect();
                match said {
                    Some(o) => format!(
                        "HTTP {} ({OUTCOME_HEADER}: {}): {body}",
                        resp.status,
                        o.as_str()
                    ),
                    None => format!("HTTP {}: {body}", resp.status),
                }
            });
            (outcome, Some(resp.status), error)
        }
        Err(e) => {
            let after_sending = matches!(
                e,
                EgressError::Timeout { sent: true } | EgressError::Transport { sent: true, .. }
            );
            let outcome = match (after_sending, idempotent) {
                (true, false) => Outcome::Uncertain,
                _ => Outcome::Retryable,
            };
            (outcome, None, Some(e.to_string()))
        }
    };
    DestinationResult {
        destination: None,
        outcome,
        status,
        error,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::http::HeaderMap;
    use bytes::Bytes;

    use super::*;

    fn response(status: u16, outcome: Option<&str>) -> Result<EgressResponse, EgressError> {
        let mut headers = HeaderMap::new();
        if let Some(o) = outcome {
            headers.insert(OUTCOME_HEADER, o.parse().unwrap());
        }
        Ok(EgressResponse {
            status,
            headers,
            body_prefix: Bytes::from_static(b"nope"),
            body_truncated: false,
            latency: Duration::from_millis(3),
        })
    }

    fn outcome(sent: Result<EgressResponse, EgressError>, idempotent: bool) -> Outcome {
        classify(&sent, idempotent).outcome
    }

    #[test]
    fn statuses_classify_as_the_issue_says() {
        for (status, want) in [
            (200, Outcome::Completed),
            (204, Outcome::Completed),
            (400, Outcome::Rejected),
            (404, Outcome::Rejected),
            (410, Outcome::Rejected),
            (408, Outcome::Retryable),
            (429, Outcome::Retryable),
            (500, Outcome::Retryable),
            (503, Outcome::Retryable),
            (302, Outcome::Retryable),
        ] {
            assert_eq!(outcome(response(status, None), false), want, "{status}");
        }
        let rejected = classify(&response(422, None), false);
        assert_eq!(
            (rejected.status, rejected.error.as_deref()),
            (Some(422), Some("HTTP 422: nope"))
        );
        assert_eq!(classify(&response(200, None), false).error, None);
    }

    #[test]
    fn the_destination_may_classify_its_own_answer() {
        assert_eq!(
            outcome(response(500, Some("rejected")), false),
            Outcome::Rejected
        );
        assert_eq!(
            outcome(response(400, Some("retryable")), false),
            Outcome::Retryable
        );
        assert_eq!(
            outcome(response(202, Some("uncertain")), false),
            Outcome::Uncertain
        );
        assert_eq!(
            outcome(response(400, Some(" retryable ")), false),
            Outcome::Retryable
        );
        // Only the three classes are taken; anything else leaves the status to decide.
        assert_eq!(
            outcome(response(500, Some("completed")), false),
            Outcome::Retryable
        );
        assert_eq!(
            outcome(response(500, Some("maybe")), false),
            Outcome::Retryable
        );
    }

    #[test]
    fn no_response_is_retryable_before_sending_and_uncertain_after() {
        let before = || Err(EgressError::Timeout { sent: false });
        let after = || Err(EgressError::Timeout { sent: true });
        assert_eq!(outcome(before(), false), Outcome::Retryable);
        assert_eq!(outcome(after(), false), Outcome::Uncertain);
        assert_eq!(outcome(after(), true), Outcome::Retryable, "idempotent");
        let invalid = Err(EgressError::InvalidUrl {
            reason: "no host".into(),
        });
        assert_eq!(outcome(invalid, false), Outcome::Retryable);
        let broken = Err(EgressError::Transport {
            sent: true,
            reason: "reset".into(),
            source: "reset".into(),
        });
        assert_eq!(outcome(broken, false), Outcome::Uncertain);
    }
}
