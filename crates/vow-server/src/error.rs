//! The API's one error type and its wire format.
//!
//! Bodies follow Svix: `{"code": "...", "detail": "..."}`, and for validation failures (422)
//! `{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}`. [`ApiError`] does not log: it
//! leaves an [`ErrorReport`] on the response, and the request middleware logs it once, with the
//! request id and the whole cause chain, and gives every 5xx body that request id instead of
//! internals.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use vow_store::StoreError;

/// One problem with one input field (Svix's `ValidationError`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[schema(as = ValidationError)]
pub struct ValidationItem {
    /// Where: `["body", "eventType"]`, `["query", "limit"]`, `["path", "app_id"]`.
    pub loc: Vec<String>,
    /// What is wrong.
    pub msg: String,
    /// Machine-readable kind (`value_error.missing`, `type_error`, …).
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    pub kind: String,
}

impl ValidationItem {
    /// A problem at `loc` (e.g. `&["body", "name"]`).
    pub fn new(loc: &[&str], msg: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            loc: loc.iter().map(|s| s.to_string()).collect(),
            msg: msg.into(),
            kind: kind.into(),
        }
    }
}

/// Everything an API handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request cannot be read at all (malformed JSON, bad header).
    #[error("{detail}")]
    BadRequest {
        /// Stable code.
        code: &'static str,
        /// Explanation.
        detail: String,
    },
    /// 401: missing or wrong credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: the credentials are valid but do not reach this (an app portal token outside its
    /// application, or a read-only one writing).
    #[error("{0}")]
    Forbidden(String),
    /// 404: the named thing does not exist (for this caller).
    #[error("{0}")]
    NotFound(String),
    /// 409: the write clashes with existing state.
    #[error("{0}")]
    Conflict(String),
    /// 413: the body is over the limit.
    #[error("request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// 415: the body is not JSON.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: the body, query or path parsed but is not valid.
    #[error("validation failed")]
    Validation(Vec<ValidationItem>),
    /// 503 with `Retry-After`: the store cannot be reached, or is over its write capacity;
    /// retrying later may work.
    #[error("the store is unavailable")]
    Unavailable(#[source] StoreError),
    /// 500: a bug or an unexpected failure.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The code of a 503 refused by graceful overload ([`StoreError::Overloaded`]).
pub const OVERLOADED: &str = "overloaded";

impl ApiError {
    /// 422 with a single item.
    pub fn invalid(loc: &[&str], msg: impl Into<String>, kind: impl Into<String>) -> Self {
        ApiError::Validation(vec![ValidationItem::new(loc, msg, kind)])
    }

    /// 404 for a missing thing (`"Application"`).
    pub fn not_found(what: &str) -> Self {
        ApiError::NotFound(format!("{what} not found"))
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest { code, .. } => code,
            ApiError::Unauthorized(_) => "authentication_failed",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::Conflict(_) => "conflict",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Validation(_) => "validation",
            ApiError::Unavailable(StoreError::Overloaded { .. }) => OVERLOADED,
            ApiError::Unavailable(_) => "store_unavailable",
            ApiError::Internal(_) => "internal_error",
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => ApiError::not_found(&capitalize(what)),
            StoreError::Conflict(detail) => ApiError::Conflict(detail),
            e @ (StoreError::Unavailable(_) | StoreError::Overloaded { .. }) => {
                ApiError::Unavailable(e)
            }
            e => ApiError::Internal(Box::new(e)),
        }
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// What went wrong, attached to an error response for the middleware to log and finish.
#[derive(Debug, Clone)]
pub struct ErrorReport {
    /// The error and its causes, outermost first.
    pub chain: Vec<String>,
    /// Stable code, for 5xx bodies.
    pub code: &'static str,
    /// Seconds to wait before retrying, for a 503 (`Retry-After`).
    pub retry_after: Option<u64>,
}

/// The body of every error but a validation failure (Svix's `HttpErrorOut`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpErrorOut {
    /// Stable, machine-readable code (`not_found`, `conflict`, `store_unavailable`, …).
    code: String,
    /// What went wrong, for a person.
    detail: String,
    /// On 5xx only: the request's id, to quote when reporting it (the logs carry the cause).
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
}

impl HttpErrorOut {
    /// The body of a 5xx, which names the request instead of internals.
    pub fn server_error(code: &str, detail: &str, request_id: &str) -> Self {
        Self {
            code: code.to_string(),
            detail: detail.to_string(),
            request_id: Some(request_id.to_string()),
        }
    }
}

/// The body of a 422 (Svix's `HTTPValidationError`): every problem found, by field.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = HTTPValidationError)]
pub struct ValidationOut {
    detail: Vec<ValidationItem>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut chain = vec![self.to_string()];
        let mut source = std::error::Error::source(&self);
        while let Some(cause) = source {
            chain.push(cause.to_string());
            source = cause.source();
        }
        let retry_after = match &self {
            ApiError::Unavailable(cause) => cause.retry_after_secs(),
            _ => None,
        };
        let report = ErrorReport {
            chain,
            code: self.code(),
            retry_after,
        };
        let mut response = match &self {
            ApiError::Validation(items) => (
                status,
                Json(ValidationOut {
                    detail: items.clone(),
                }),
            )
                .into_response(),
            // 5xx bodies are written by the middleware, which knows the request id.
            _ if status.is_server_error() => status.into_response(),
            _ => (
                status,
                Json(HttpErrorOut {
                    code: self.code().to_string(),
                    detail: self.to_string(),
                    request_id: None,
                }),
            )
                .into_response(),
        };
        response.extensions_mut().insert(report);
        response
    }
}

/// Result of an API handler.
pub type ApiResult<T> = Result<T, ApiError>;
