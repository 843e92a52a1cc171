//! Backpressure from the delivery backlog: the CPU side of graceful overload.
//!
//! The store's own bound (`overload_max_wait_ms`) refuses what the store cannot commit. On a
//! small machine ingest can still take the cores the deliveries need while the store keeps up:
//! acks stay fast and the due backlog grows as deliveries slow (10,000 msg/s offered to one
//! endpoint on 2 cores delivered 2,134/s; BENCHMARKS.md, issue 18). With
//! `overload_max_due_deliveries` set, [`Admission::watch`] reads the due backlog four times a
//! second; from when it reaches the limit until it falls below three quarters of it, the
//! intake routes (`POST /api/v1/app/{app}/msg`, `POST /in/...`) are refused before their body
//! is read ([`shed`]: 503, `Retry-After`, code `overloaded`), so the cores go to delivering
//! what was acknowledged.
//!
//! Off by default: the backlog of one slow or throttled endpoint is a backlog too, and would
//! refuse every application's messages.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use vow_store::{Store, StoreError};

use crate::error::ApiError;

/// How often the backlog is read.
const EVERY: Duration = Duration::from_millis(250);

/// Whether the intake routes are refused now.
#[derive(Debug, Default)]
pub struct Admission {
    shedding: AtomicBool,
}

impl Admission {
    /// Whether new messages and inbound deliveries are refused now.
    pub fn shedding(&self) -> bool {
        self.shedding.load(Ordering::Relaxed)
    }

    /// Updates [`Admission::shedding`] from a due backlog of `due` against `limit`: on at the
    /// limit, off below three quarters of it, unchanged between.
    pub fn observe(&self, due: u64, limit: u64) {
        if due >= limit {
            self.shedding.store(true, Ordering::Relaxed);
        } else if due < limit - limit / 4 {
            self.shedding.store(false, Ordering::Relaxed);
        }
    }

    /// Reads `store`'s due backlog every [`EVERY`] and observes it against `limit`, until
    /// `shutdown`. A failed read changes nothing (the store's own errors answer requests).
    pub async fn watch(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        now: impl Fn() -> DateTime<Utc> + Send,
        limit: u64,
        shutdown: CancellationToken,
    ) {
        loop {
            match store.backlog(now()).await {
                Ok(backlog) => self.observe(backlog.due.value, limit),
                Err(e) => tracing::warn!(error = %e, "could not read the delivery backlog"),
            }
            tokio::select! {
                () = tokio::time::sleep(EVERY) => {},
                () = shutdown.cancelled() => return,
            }
        }
    }
}

/// Refuses an intake request while shedding, before anything else reads it.
pub async fn shed(State(admission): State<Arc<Admission>>, req: Request, next: Next) -> Response {
    if admission.shedding() && is_intake(req.method(), req.uri().path()) {
        return ApiError::from(StoreError::overloaded()).into_response();
    }
    next.run(req).await
}

/// Whether `method path` offers new work: a message create or an inbound delivery.
fn is_intake(method: &Method, path: &str) -> bool {
    if method != Method::POST {
        return false;
    }
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    matches!(segments.as_slice(), ["", "api", "v1", "app", app, "msg"] if !app.is_empty())
        || matches!(segments.as_slice(), ["", "in", _, ..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shedding_starts_at_the_limit_and_stops_below_three_quarters() {
        let a = Admission::default();
        a.observe(99, 100);
        assert!(!a.shedding());
        a.observe(100, 100);
        assert!(a.shedding());
        a.observe(80, 100);
        assert!(a.shedding(), "between: unchanged");
        a.observe(74, 100);
        assert!(!a.shedding());
        a.observe(80, 100);
        assert!(!a.shedding(), "between: unchanged");
    }

    #[test]
    fn only_message_creates_and_inbound_deliveries_are_intake() {
        for (method, path, intake) in [
            (Method::POST, "/api/v1/app/app_1/msg", true),
            (Method::POST, "/api/v1/app/app_1/msg/", true),
            (Method::POST, "/in/src_1", true),
            (Method::POST, "/in/t/token", true),
            (Method::GET, "/api/v1/app/app_1/msg", false),
            (Method::POST, "/api/v1/app", false),
            (Method::POST, "/api/v1/app/app_1/endpoint", false),
            (Method::POST, "/api/v1/app/app_1/msg/msg_1/resend", false),
            (Method::POST, "/api/v1/app//msg", false),
            (Method::POST, "/inbox", false),
        ] {
            assert_eq!(is_intake(&method, path), intake, "{method} {path}");
        }
    }
}
