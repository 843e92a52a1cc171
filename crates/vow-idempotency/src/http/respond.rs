//! The headers and answers of `Idempotency-Key` over HTTP: reading the key and
//! `Prefer: wait=N`, a [`Problem`] as `application/problem+json`, a [`StoredResponse`] back as a
//! response (a replay carries `Idempotent-Replayed: true`), `Idempotency-Expires` (an HTTP-date,
//! IMF-fixdate, RFC 9110 §5.6.7, like `Expires`), [`answer`] for a begun record, and a response
//! as it can be stored ([`into_stored`]).

use std::time::Duration;

use axum::body::Body;
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use super::next::{next, Next};
use crate::problem::{self, Problem};
use crate::record::{Begun, LeaseToken, Settings, StoredResponse};
use crate::IdempotencyKey;

/// The request header that carries the key.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The response header that marks a replay (`true`).
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The response header that says until when the key's outcome is replayed (an HTTP-date).
pub const IDEMPOTENCY_EXPIRES: HeaderName = HeaderName::from_static("idempotency-expires");

/// The longest `Prefer: wait` honoured.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// The request's key: `None` without the header; [`Problem::KeyInvalid`] when a value does not
/// parse or the header is repeated (every value is read, so a repeat is never ignored).
pub fn key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, Problem> {
    let values = headers.get_all(IDEMPOTENCY_KEY).into_iter();
    IdempotencyKey::from_values(values.map(HeaderValue::as_bytes))
        .map_err(|e| Problem::KeyInvalid(e.to_string()))
}

/// The request's `Prefer: wait=N` (RFC 7240 §4.3), capped at [`MAX_WAIT`]; `None` without it.
/// Preferences are separated by commas, each with its parameters after `;`; names are
/// case-insensitive, the value may be quoted, and the first well-formed `wait` wins.
pub fn prefer_wait(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get_all("prefer")
        .into_iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|preference| {
            let token = preference.split(';').next()?;
            let (name, value) = token.split_once('=')?;
            if !name.trim().eq_ignore_ascii_case("wait") {
                return None;
            }
            let secs = value.trim().trim_matches('"').parse::<u64>().ok()?;
            Some(Duration::from_secs(secs).min(MAX_WAIT))
        })
}

/// A problem as `application/problem+json` with its status, and `Retry-After` when it says to
/// retry later.
impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::BAD_REQUEST);
        let mut out = (status, self.body().to_string()).into_response();
        let headers = out.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static(problem::CONTENT_TYPE),
        );
        if let Problem::InProgress { retry_after } = self {
            headers.insert(RETRY_AFTER, HeaderValue::from(retry_after));
        }
        out
    }
}

/// A stored response as sent: its status, headers and body. A header that is not valid HTTP (a
/// corrupt row) is left out; a status that is not one is 500.
pub fn response(stored: StoredResponse) -> Response {
    let mut out = Response::new(Body::from(stored.body));
    *out.status_mut() =
        StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in &stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            out.headers_mut().append(name, value);
        }
    }
    out
}

/// A replay of `stored`: [`response`] with `Idempotent-Replayed: true` and
/// `Idempotency-Expires: <expires_at>`.
pub fn replay(stored: StoredResponse, expires_at: DateTime<Utc>) -> Response {
    let mut out = with_expires(response(stored), expires_at);
    out.headers_mut()
        .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    out
}

/// `out` with `Idempotency-Expires: <expires_at as an HTTP-date>`.
pub fn with_expires(mut out: Response, expires_at: DateTime<Utc>) -> Response {
    if let Ok(value) = HeaderValue::try_from(http_date(expires_at)) {
        out.headers_mut().insert(IDEMPOTENCY_EXPIRES, value);
    }
    out
}

/// `t` as an HTTP-date (IMF-fixdate), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// What a request that began its record gets ([`next`]): the lease token if it owns the
/// record, else the response to send: a replay, or the problem (reused 422, in progress 409
/// with `Retry-After` of at most one lease, expired 422).
#[allow(
    clippy::result_large_err,
    reason = "the error is the response the caller sends at once; boxing it gains nothing"
)]
pub fn answer(begun: Begun, settings: &Settings) -> Result<LeaseToken, Response> {
    match next(begun, settings) {
        Next::Run { token, .. } => Ok(token),
        Next::Replay {
            response,
            expires_at,
        } => Err(replay(response, expires_at)),
        Next::Refuse(problem) => Err(problem.into_response()),
    }
}

/// `response` as it can be stored for replay: its status, the headers named in `keep` that it
/// has, and its whole body (read here, so a body that fails to read is an error). No resource
/// reference.
pub async fn into_stored(
    response: Response,
    keep: &[HeaderName],
) -> Result<StoredResponse, axum::Error> {
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await?;
    let headers = keep
        .iter()
        .flat_map(|name| {
            let values = parts.headers.get_all(name).into_iter();
            values.filter_map(|v| Some((name.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        })
        .collect();
    Ok(StoredResponse {
        status: parts.status.as_u16(),
        headers,
        body: body.to_vec(),
        resource: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header::LOCATION;
    use serde_json::{json, Value};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::try_from(*name).unwrap(),
                HeaderValue::try_from(*value).unwrap(),
            );
        }
        map
    }

    async fn body_json(out: Response) -> Value {
        let bytes = axum::body::to_bytes(out.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn a_key_is_read_bare_or_quoted_and_none_without_the_header() {
        let bare = key(&headers(&[("idempotency-key", "order-1")])).unwrap();
        let quoted = key(&headers(&[("Idempotency-Key", "\"order-1\"")])).unwrap();
        assert_eq!(bare, quoted);
        assert_eq!(bare.unwrap().as_str(), "order-1");
        assert_eq!(key(&HeaderMap::new()), Ok(None));
    }

    #[test]
    fn a_repeated_empty_long_or_invisible_key_is_invalid() {
        let long = "k".repeat(256);
        let cases: [&[(&str, &str)]; 4] = [
            &[("idempotency-key", "a"), ("idempotency-key", "a")],
            &[("idempotency-key", "")],
            &[("idempotency-key", long.as_str())],
            &[("idempotency-key", "a b")],
        ];
        for case in cases {
            let got = key(&headers(case));
            assert!(matches!(got, Err(Problem::KeyInvalid(_))), "{case:?}");
        }
        let mut latin1 = HeaderMap::new();
        latin1.insert(
            IDEMPOTENCY_KEY,
            HeaderValue::from_bytes(b"caf\xe9").unwrap(),
        );
        assert!(matches!(key(&latin1), Err(Problem::KeyInvalid(_))));
    }

    #[test]
    fn prefer_wait_is_read_among_other_preferences_and_capped_at_30_s() {
        let wait = |value: &str| prefer_wait(&headers(&[("prefer", value)]));
        assert_eq!(wait("wait=5"), Some(Duration::from_secs(5)));
        assert_eq!(
            wait("respond-async, WAIT = \"7\""),
            Some(Duration::from_secs(7))
        );
        assert_eq!(wait("wait=10; x=1"), Some(Duration::from_secs(10)));
        assert_eq!(wait("wait=600"), Some(MAX_WAIT));
        assert_eq!(wait("wait=0"), Some(Duration::ZERO));
        assert_eq!(wait("wait=soon, wait=3"), Some(Duration::from_secs(3)));
        for none in ["respond-async", "wait", "wait=-1", "return=minimal; wait=4"] {
            assert_eq!(wait(none), None, "{none}");
        }
        let two = headers(&[("prefer", "handling=lenient"), ("prefer", "wait=2")]);
        assert_eq!(prefer_wait(&two), Some(Duration::from_secs(2)));
        assert_eq!(prefer_wait(&HeaderMap::new()), None);
    }

    #[tokio::test]
    async fn a_problem_is_problem_json_with_its_status_and_type() {
        let out = Problem::KeyReused {
            differences: vec!["/amount".into()],
        }
        .into_response();
        assert_eq!(out.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(out.headers()[CONTENT_TYPE], "application/problem+json");
        assert!(out.headers().get(RETRY_AFTER).is_none());
        let body = body_json(out).await;
        assert_eq!(body["type"], "urn:vow:problem:idempotency-key-reused");
        assert_eq!(body["differences"], json!(["/amount"]));
    }

    #[tokio::test]
    async fn an_in_progress_problem_says_when_to_retry() {
        let out = Problem::InProgress { retry_after: 7 }.into_response();
        assert_eq!(out.status(), StatusCode::CONFLICT);
        assert_eq!(out.headers()[RETRY_AFTER], "7");
        let body = body_json(out).await;
        assert_eq!(body["type"], "urn:vow:problem:idempotency-key-in-progress");
        let unavailable = Problem::StoreUnavailable.into_response();
        assert_eq!(unavailable.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    fn stored() -> StoredResponse {
        StoredResponse {
            status: 202,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("location".into(), "/jobs/job_1".into()),
                ("bad name".into(), "dropped".into()),
            ],
            body: br#"{"id":"job_1"}"#.to_vec(),
            resource: Some("job_1".into()),
        }
    }

    #[tokio::test]
    async fn a_replay_is_the_stored_response_marked_replayed_with_its_expiry() {
        let expires_at = DateTime::from_timestamp(784_111_777, 0).unwrap();
        let out = replay(stored(), expires_at);
        assert_eq!(out.status(), StatusCode::ACCEPTED);
        assert_eq!(out.headers()[LOCATION], "/jobs/job_1");
        assert_eq!(out.headers()[IDEMPOTENT_REPLAYED], "true");
        assert_eq!(
            out.headers()[IDEMPOTENCY_EXPIRES],
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(out.headers().len(), 4, "the invalid header is left out");
        assert_eq!(body_json(out).await, json!({"id": "job_1"}));
    }

    #[tokio::test]
    async fn a_response_stores_its_status_kept_headers_and_body() {
        let original = response(stored());
        let kept = into_stored(original, &[CONTENT_TYPE, RETRY_AFTER])
            .await
            .unwrap();
        assert_eq!(kept.status, 202);
        assert_eq!(
            kept.headers,
            [("content-type".to_owned(), "application/json".to_owned())]
        );
        assert_eq!(kept.body, stored().body);
        assert_eq!(kept.resource, None);
    }

    #[tokio::test]
    async fn only_the_owner_gets_a_token_and_a_waiter_never_waits_longer_than_a_lease() {
        let settings = Settings::default();
        let token = LeaseToken("t".into());
        assert_eq!(
            answer(Begun::Owner(token.clone()), &settings).unwrap(),
            token
        );
        let waiting = answer(
            Begun::InProgress {
                retry_after_secs: 31,
            },
            &settings,
        )
        .unwrap_err();
        assert_eq!(waiting.headers()[RETRY_AFTER], "30");
        let expired = answer(Begun::Expired { resource: None }, &settings).unwrap_err();
        assert_eq!(expired.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let body = body_json(expired).await;
        assert_eq!(body["type"], "urn:vow:problem:idempotency-key-expired");
        let replayed = answer(
            Begun::Replay {
                response: stored(),
                expires_at: Utc::now(),
            },
            &settings,
        )
        .unwrap_err();
        assert_eq!(replayed.headers()[IDEMPOTENT_REPLAYED], "true");
    }
}
