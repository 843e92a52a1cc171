//! The axum side (feature `axum`): [`Receiver::accept_http`] over a `HeaderMap` and the raw
//! `Bytes` a handler extracts, and the JSON answers. A [`Rejection`] is
//! `{"code": "<reason>", "detail": "<what is wrong>"}` with 400, 401 or 500 (whose detail stays
//! generic: the cause is logged); an [`Outcome`] is `{"status": "processed" | "duplicate"}`
//! with 200, `{"status": "quarantined"}` with 202, the app's own answer when its closure failed,
//! or `{"code": "store_unavailable", …}` with 503. No answer holds a secret, a signature or the
//! body.
//!
//! ```no_run
//! # use std::sync::{Arc, Mutex};
//! # use axum::{body::Bytes, http::{HeaderMap, StatusCode}, response::{IntoResponse, Response}};
//! # use vow_receiver::{sqlite, Receiver};
//! # async fn handler(receiver: Receiver, db: Arc<Mutex<rusqlite::Connection>>, headers: HeaderMap, body: Bytes) -> Response {
//! let delivery = match receiver.accept_http(&headers, body, "", chrono::Utc::now()) {
//!     Ok(delivery) => delivery,
//!     Err(rejection) => return rejection.into_response(), // 400 / 401, nothing stored
//! };
//! // Parse `delivery.body()` here, after verification, then make the change:
//! sqlite::process_shared(&db, delivery, |conn| {
//!     conn.execute("UPDATE balances SET balance = balance + 5 WHERE account = 'a1'", [])
//!         .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)
//! })
//! .await
//! .into_response() // 200 processed / duplicate, 202 quarantined
//! # }
//! ```

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde_json::json;
use vow_signature::provider::{ErrorKind, HeaderFn};

use crate::{Delivery, Outcome, Receiver, Rejection};

impl Receiver {
    /// [`Receiver::accept`] over an axum `HeaderMap` (the first of repeated headers).
    pub fn accept_http(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        url: &str,
        now: DateTime<Utc>,
    ) -> Result<Delivery, Rejection> {
        let lookup = HeaderFn::new(|name: &str| headers.get(name).map(|v| v.as_bytes()));
        self.accept(&lookup, body, url, now)
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::BAD_REQUEST);
        let detail = if self.kind() == ErrorKind::Misconfigured {
            tracing::error!(error = %chain(&self), "the webhook receiver cannot verify deliveries");
            "The receiver cannot verify deliveries; its operator must fix its configuration."
                .to_owned()
        } else {
            tracing::warn!(reason = self.reason(), detail = %self, "webhook delivery rejected");
            self.to_string()
        };
        let body = json!({ "code": self.reason(), "detail": detail });
        (status, Json(body)).into_response()
    }
}

impl<T, E: IntoResponse> IntoResponse for Outcome<T, E> {
    fn into_response(self) -> Response {
        let status = match self.status() {
            Some(status) => StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            None => StatusCode::INTERNAL_SERVER_ERROR,
        };
        match self {
            Self::Failed(e) => e.into_response(),
            Self::StoreFailed(error) => {
                tracing::error!(error = %chain(&error), "webhook claims failed; answered 503");
                let detail = "The delivery was not recorded; deliver it again later.";
                let body = json!({ "code": "store_unavailable", "detail": detail });
                (status, Json(body)).into_response()
            }
            other => (status, Json(json!({ "status": other.as_str() }))).into_response(),
        }
    }
}

/// `error` and its causes, joined by `: `, for the logs.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}
