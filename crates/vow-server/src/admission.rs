//! Backpressure from the delivery backlog: the CPU side of graceful overload.
//!
//! The store's own bound (`overload_max_wait_ms`) refuses what the store cannot commit. On a
//! small machine ingest can still take the cores the deliveries need while the store keeps up:
//! acks stay fast and the due backlog grows as deliveries slow (10,000 msg/s offered to one
//! endpoint on 2 cores delivered 2,134/s; BENCHMARKS.md, issue 18). With
//! `overload_max_due_deliveries` set, [`Admission::watch`] reads the due backlog ten times a
//! second and refuses a share of the intake routes (`POST /api/v1/app/{app}/msg`,
//! `POST /in/...`) before their body is read ([`shed`]: 503, `Retry-After`, code
//! `overloaded`): none below half the limit, all at the limit, in proportion between. So
//! the accepted rate settles near what deliveries drain, and the cores go to delivering what
//! was acknowledged. (Refusing all or nothing would let the full offered rate in between
//! bursts of refusals, and those bursts of twice the capacity are what made acks slow.)
//!
//! Off by default: the backlog of one slow or throttled endpoint is a backlog too, and would
//! refuse every application's messages.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use rand::Rng;
use tokio_util::sync::CancellationToken;
use vow_store::{Store, StoreError};

use crate::error::ApiError;

/// Gauge: the share of intake refused now, 0 to 1 (absent while the bound is off).
pub const REFUSED_SHARE: &str = "vow_intake_refused_share";

/// How often the backlog is read.
const EVERY: Duration = Duration::from_millis(100);

/// [`Admission`]'s share when every intake request is refused.
const ALL: u32 = 1 << 16;

/// The share of intake requests refused now, from the last due backlog read.
#[derive(Debug, Default)]
pub struct Admission {
    /// Refused out of [`ALL`].
    refused: AtomicU32,
}

impl Admission {
    /// The share of new messages and inbound deliveries refused now, from 0 to 1.
    pub fn refused_share(&self) -> f64 {
        f64::from(self.refused.load(Ordering::Relaxed)) / f64::from(ALL)
    }

    /// Whether to refuse one intake request now: a draw against [`Admission::refused_share`].
    fn refuses(&self) -> bool {
        let refused = self.refused.load(Ordering::Relaxed);
        refused >= ALL || (refused > 0 && rand::thread_rng().gen_range(0..ALL) < refused)
    }

    /// Sets [`Admission::refused_share`] from a due backlog of `due` against `limit`: none at
    /// or below half the limit, all at the limit, rising in proportion between.
    pub fn observe(&self, due: u64, limit: u64) {
        let from = limit / 2;
        let refused = if due >= limit {
            ALL
        } else if due <= from {
            0
        } else {
            let share = (due - from) * u64::from(ALL) / (limit - from);
            u32::try_from(share).unwrap_or(ALL)
        };
        self.refused.store(refused, Ordering::Relaxed);
        metrics::gauge!(REFUSED_SHARE).set(self.refused_share());
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

/// Refuses an intake request drawn for refusal, before anything else reads it.
pub async fn shed(State(admission): State<Arc<Admission>>, req: Request, next: Next) -> Response {
    if admission.refuses() && is_intake(req.method(), req.uri().path()) {
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
    fn the_refused_share_rises_from_half_the_limit_to_all_at_it() {
        let a = Admission::default();
        for (due, share) in [
            (0, 0.0),
            (50, 0.0),
            (75, 0.5),
            (90, 0.8),
            (100, 1.0),
            (5000, 1.0),
        ] {
            a.observe(due, 100);
            assert!((a.refused_share() - share).abs() < 1e-4, "due {due}");
        }
        a.observe(10, 100);
        assert_eq!(a.refused_share(), 0.0, "falls again as the backlog does");
        a.observe(2, 3);
        assert_eq!(a.refused_share(), 0.5, "a limit of 3 refuses half at 2");
    }

    #[test]
    fn requests_are_refused_in_the_share_drawn() {
        let a = Admission::default();
        let refused = |a: &Admission| (0..20_000).filter(|_| a.refuses()).count();
        assert_eq!(refused(&a), 0);
        a.observe(100, 100);
        assert_eq!(refused(&a), 20_000);
        a.observe(75, 100);
        let half = refused(&a);
        assert!(
            (9_000..=11_000).contains(&half),
            "{half} of 20,000 at one half"
        );
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
