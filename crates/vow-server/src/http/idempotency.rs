//! `Idempotency-Key` on `POST /api/v1/app/{app_id}/msg` (ADR 6; problems in `docs/problems.md`).
//!
//! [`key`] reads the header (400 `idempotency-key-invalid` when it does not parse; the key is
//! never echoed). [`create_message`] runs after the body is validated and the application
//! resolved: it begins the record under (principal `admin`, application id, `POST`, [`ROUTE`],
//! key), so an application's uid and id share keys, and then:
//! - owner: creates the message and completes the record in one store transaction, answering
//!   the rendered response with `Idempotency-Expires`; an infrastructure failure (503, 500)
//!   releases the record first, so a retry runs;
//! - replay: the stored status, headers and body, with `Idempotent-Replayed: true` and
//!   `Idempotency-Expires`;
//! - reused: 422 with `differences`; in progress (or fenced by a takeover): 409 with
//!   `Retry-After`; expired: 422.
//!
//! A business refusal of the create itself (404: no such application; 409: the `eventId` is
//! taken) is final: it is stored on the record, and a retry with the key replays it.
//!
//! With `Prefer: wait=N` (N capped at 30), a request that finds the key in progress waits up to
//! N s for that request's outcome and replays it, before answering 409.
//!
//! `Idempotency-Expires` is an HTTP-date (IMF-fixdate, RFC 9110 §5.6.7), like `Expires`.

use axum::body::Body;
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use vow_idempotency::{fingerprint, problem, IdempotencyKey, Problem};
use vow_store::idempotency::{settings, Begun, Completion, Fingerprint, Render, Scope};
use vow_store::{CreatedMessage, NewMessage, StoreError};

use crate::error::{ApiError, ApiResult};
use crate::http::AppState;

/// The route template the records are scoped to and fingerprinted with.
pub const ROUTE: &str = "/api/v1/app/{app_id}/msg";

/// The one principal there is: the admin token.
const PRINCIPAL: &str = "admin";

/// The request header.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The request's key: `None` without the header; [`Problem::KeyInvalid`] (answer it with
/// [`problem`]) when it does not parse or is repeated.
pub fn key(headers: &axum::http::HeaderMap) -> Result<Option<IdempotencyKey>, Problem> {
    let values = headers
        .get_all(IDEMPOTENCY_KEY)
        .iter()
        .map(|v| v.as_bytes());
    IdempotencyKey::from_values(values).map_err(|e| Problem::KeyInvalid(e.to_string()))
}

/// Creates `new` at most once per `key` (see the module docs). `raw` is the body as sent;
/// `render` makes the 202 response the handler answers with, stored for replay; `created` runs
/// after a create commits (not on a replay).
pub async fn create_message(
    state: &AppState,
    (key, wait): (IdempotencyKey, Option<Duration>),
    raw: &[u8],
    new: NewMessage,
    render: Render,
    created: impl FnOnce(&CreatedMessage),
) -> ApiResult<Response> {
    let scope = Scope {
        principal: PRINCIPAL.into(),
        application: Some(new.app_id.to_string()),
        method: "POST".into(),
        route: ROUTE.into(),
        key,
    };
    let fingerprint = Fingerprint::of("POST", ROUTE, raw);
    let body = serde_json::from_slice::<Value>(raw)
        .map(|json| fingerprint::canonical(&json))
        .unwrap_or_else(|_| String::from_utf8_lossy(raw).into_owned());
    let begun = begin_waiting(state, &scope, &fingerprint, &body, new.now, wait).await?;
    let token = match begun {
        Begun::Owner(token) => token,
        Begun::Replay {
            response,
            expires_at,
        } => {
            metrics::counter!(crate::metrics::IDEMPOTENT_REPLAYS).increment(1);
            let mut out = stored(response)?;
            out.headers_mut().insert(
                HeaderName::from_static("idempotent-replayed"),
                HeaderValue::from_static("true"),
            );
            return Ok(expiring(out, expires_at));
        }
        Begun::Reused { differences } => return Ok(problem(Problem::KeyReused { differences })),
        Begun::InProgress { retry_after_secs } => {
            // The owner's `now` can be a hair later than this request's (they raced), which
            // would make the lease look longer than it is: never more than a whole lease.
            return Ok(problem(Problem::InProgress {
                retry_after: retry_after_secs.min(settings().lease.as_secs()),
            }));
        }
        Begun::Expired { .. } => return Ok(problem(Problem::KeyExpired)),
        other => {
            return Err(ApiError::Internal(
                format!("unknown idempotency outcome {other:?}").into(),
            ))
        }
    };
    let now = new.now;
    let expires_at = settings().deadlines(now).expires_at;
    let completion = Completion {
        scope: scope.clone(),
        token: token.clone(),
        render,
    };
    match state.store.create_message_idempotent(new, completion).await {
        Ok((message, response)) => {
            created(&message);
            Ok(expiring(stored(response)?, expires_at))
        }
        // Another request took the record over: it runs (or ran) the operation.
        Err(StoreError::Fenced) => Ok(problem(Problem::InProgress { retry_after: 1 })),
        // A business outcome (no such application, a repeated eventId) is final: stored, so a
        // retry with the key replays it instead of running again.
        Err(e @ (StoreError::NotFound(_) | StoreError::Conflict(_))) => {
            let answer = ApiError::from(e).into_response();
            let final_answer = store_final(state, &scope, &token, answer, now).await?;
            Ok(expiring(final_answer, expires_at))
        }
        Err(e) => {
            if matches!(e, StoreError::Unavailable(_) | StoreError::Backend(_)) {
                if let Err(release) = state.store.release_idempotent(&scope, &token).await {
                    tracing::warn!(error = %release, key = %scope.key.hash(),
                        "could not release an idempotency record; it frees when its lease ends");
                }
            }
            Err(e.into())
        }
    }
}

/// Begins the record; while another request holds it and `wait` allows, polls until that
/// request's outcome is stored (a replay), its lease ends (this request takes over), or the
/// wait is over (409).
async fn begin_waiting(
    state: &AppState,
    scope: &Scope,
    fingerprint: &Fingerprint,
    body: &str,
    now: DateTime<Utc>,
    wait: Option<Duration>,
) -> ApiResult<Begun> {
    let until = tokio::time::Instant::now() + wait.unwrap_or_default();
    let mut at = now;
    loop {
        let begun = state
            .store
            .begin_idempotent(scope, fingerprint, body, at)
            .await?;
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if !matches!(begun, Begun::InProgress { .. }) || left.is_zero() {
            return Ok(begun);
        }
        if at == now {
            metrics::counter!(crate::metrics::IDEMPOTENT_WAITS).increment(1);
        }
        tokio::time::sleep(WAIT_POLL.min(left)).await;
        at = state.now();
    }
}

/// How often a waiting request looks at the record again.
const WAIT_POLL: Duration = Duration::from_millis(50);

/// The longest `Prefer: wait` honoured.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// `Prefer: wait=N` (RFC 7240), capped at 30 s; `None` without it.
pub fn prefer_wait(headers: &axum::http::HeaderMap) -> Option<Duration> {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split([',', ';']))
        .filter_map(|pref| {
            let (name, value) = pref.trim().split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("wait")
                .then(|| value.trim().trim_matches('"').parse::<u64>().ok())?
        })
        .map(|secs| Duration::from_secs(secs).min(MAX_WAIT))
        .next()
}

/// Stores `answer` as the record's final response and gives it back unchanged (its extensions,
/// which the request middleware logs from, included).
async fn store_final(
    state: &AppState,
    scope: &Scope,
    token: &vow_store::idempotency::LeaseToken,
    answer: Response,
    now: DateTime<Utc>,
) -> ApiResult<Response> {
    let (parts, body) = answer.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| ApiError::Internal(Box::new(e)))?;
    let headers = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|ct| vec![(CONTENT_TYPE.as_str().to_owned(), ct.to_owned())])
        .unwrap_or_default();
    let response = vow_store::idempotency::StoredResponse {
        status: parts.status.as_u16(),
        headers,
        body: bytes.to_vec(),
        resource: None,
    };
    match state
        .store
        .complete_idempotent(scope, token, response, now)
        .await
    {
        Ok(()) | Err(StoreError::Fenced) => {}
        Err(e) => tracing::warn!(error = %e, key = %scope.key.hash(),
            "could not store a final outcome; a retry will run the request again"),
    }
    Ok(Response::from_parts(parts, Body::from(bytes)))
}

/// A stored response as sent: its status, headers and body.
pub fn stored(response: vow_store::idempotency::StoredResponse) -> ApiResult<Response> {
    let internal = |e: axum::http::Error| ApiError::Internal(Box::new(e));
    let mut out = Response::builder().status(response.status);
    for (name, value) in &response.headers {
        out = out.header(name.as_str(), value.as_str());
    }
    out.body(Body::from(response.body)).map_err(internal)
}

/// `out` with `Idempotency-Expires: <HTTP-date>`.
fn expiring(mut out: Response, expires_at: DateTime<Utc>) -> Response {
    let date = expires_at.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
    if let Ok(value) = HeaderValue::from_str(&date) {
        out.headers_mut()
            .insert(HeaderName::from_static("idempotency-expires"), value);
    }
    out
}

/// A problem as `application/problem+json`, with `Retry-After` when it says to retry later.
pub fn problem(p: Problem) -> Response {
    metrics::counter!(crate::metrics::IDEMPOTENCY_PROBLEMS, "type" => p.name()).increment(1);
    let status = StatusCode::from_u16(p.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut out = Response::new(Body::from(p.body().to_string()));
    *out.status_mut() = status;
    out.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(problem::CONTENT_TYPE),
    );
    if let Problem::InProgress { retry_after } = p {
        out.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(retry_after));
    }
    out
}
