//! The answers an `Idempotency-Key` request gets, on `vow_idempotency::http`: problems (counted
//! in vow's metrics), stored responses as sent, `Idempotency-Expires`; plus [`json`], how vow
//! renders a create's answer for storing.

use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use vow_idempotency::http;
use vow_idempotency::Problem;
use vow_store::idempotency::StoredResponse;

use crate::error::{ApiError, ApiResult, ErrorReport};

pub use vow_idempotency::http::{response as stored, with_expires as expiring};

/// A problem as `application/problem+json` (with `Retry-After` when it says to retry later),
/// counted by type.
pub fn problem(p: Problem) -> Response {
    count(&p);
    p.into_response()
}

/// Counts an answered problem by type.
pub(super) fn count(p: &Problem) {
    metrics::counter!(crate::metrics::IDEMPOTENCY_PROBLEMS, "type" => p.name()).increment(1);
}

/// `status` with `value` as its JSON body, as a response to store: what every create renders.
pub fn json<T: serde::Serialize>(
    status: StatusCode,
    value: &T,
    resource: Option<String>,
) -> StoredResponse {
    match serde_json::to_vec(value) {
        Ok(body) => StoredResponse {
            status: status.as_u16(),
            headers: vec![(CONTENT_TYPE.as_str().into(), "application/json".into())],
            body,
            resource,
        },
        // Cannot happen for vow's DTOs (string keys, no failing Serialize impls).
        Err(e) => {
            tracing::error!(error = %e, "could not render a response");
            StoredResponse {
                status: StatusCode::INTERNAL_SERVER_ERROR.as_u16(),
                headers: Vec::new(),
                body: Vec::new(),
                resource,
            }
        }
    }
}

/// `response` as a [`StoredResponse`] (its content type and body), and the response to send,
/// with the error report the request middleware logs from kept on it.
pub async fn to_stored(response: Response) -> ApiResult<(StoredResponse, Response)> {
    let report = response.extensions().get::<ErrorReport>().cloned();
    let kept = http::into_stored(response, &[CONTENT_TYPE])
        .await
        .map_err(|e| ApiError::Internal(Box::new(e)))?;
    let mut out = stored(kept.clone());
    if let Some(report) = report {
        out.extensions_mut().insert(report);
    }
    Ok((kept, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header::RETRY_AFTER;

    #[test]
    fn an_in_progress_problem_says_when_to_retry() {
        let out = problem(Problem::InProgress { retry_after: 3 });
        assert_eq!(out.status(), StatusCode::CONFLICT);
        assert_eq!(out.headers()[RETRY_AFTER], "3");
        assert_eq!(
            out.headers()[CONTENT_TYPE],
            vow_idempotency::problem::CONTENT_TYPE
        );
    }

    #[tokio::test]
    async fn a_stored_error_keeps_its_report_for_the_log() {
        let err = ApiError::not_found("Endpoint").into_response();
        let (kept, out) = to_stored(err).await.unwrap();
        assert_eq!(kept.status, 404);
        assert_eq!(
            kept.headers,
            [("content-type".into(), "application/json".into())]
        );
        assert!(out.extensions().get::<ErrorReport>().is_some());
        assert_eq!(out.status(), StatusCode::NOT_FOUND);
    }
}
