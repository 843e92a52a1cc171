//! What every handler and worker can reach: [`AppState`] (the stores, the wake-ups, the
//! settings, the clock), [`ApiSettings`] (with the console's and the app portal's settings) and
//! the API's [`Clock`]. Below `http`, `metrics` and the
//! workers, so each of them can use it without importing another.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use vow_store::Store;

use crate::delivery::operational::Operational;
use vow_idempotency::http::InFlight;

/// What every handler can reach: [`Shared`] behind one `Arc`, so the clone axum makes for each
/// request and each middleware is one reference count, not one per field.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    /// The state of the handlers sharing `shared`.
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The stores, wake-ups, settings and clock the handlers share ([`AppState`]).
pub struct Shared {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The delivery queue (the same backend as `store`).
    pub queue: Arc<dyn vow_store::DeliveryQueue>,
    /// Inbound sources and events (the same backend as `store`).
    pub inbound: Arc<dyn vow_store::InboundStore>,
    /// API settings.
    pub settings: Arc<ApiSettings>,
    /// Wakes this process's delivery workers when work becomes due.
    pub wake: Arc<tokio::sync::Notify>,
    /// Wakes this process's inbound workers when an inbound event becomes due.
    pub inbound_wake: Arc<tokio::sync::Notify>,
    /// Where operational events go, when an operational webhook URL is configured.
    pub operational: Option<Operational>,
    /// The time handlers work in ([`AppState::now`]).
    pub clock: Clock,
    /// The keyed requests running on this node (`vow_idempotency::http::in_flight`).
    pub in_flight: Arc<InFlight>,
    /// The `vow listen` connections of this process ([`crate::relay`]).
    pub relay: Arc<crate::relay::Hub>,
    /// Whether this process's workers run and whether it is stopping (`/health/ready`).
    pub readiness: Arc<crate::readiness::Readiness>,
    /// Whether the intake routes are refused for the delivery backlog ([`crate::admission`]).
    pub admission: Arc<crate::admission::Admission>,
}

/// The time the API works in: the wall clock at the store's (microsecond) precision, moved by an
/// offset that only tests set ([`Clock::advance`]), so that a test reaches an expiry hours away
/// without waiting for it. Clones share the offset.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_micros: Arc<AtomicI64>,
}

impl Clock {
    /// The wall clock plus the offset, truncated to microseconds.
    pub fn now(&self) -> DateTime<Utc> {
        let offset = TimeDelta::microseconds(self.offset_micros.load(Ordering::Relaxed));
        (Utc::now() + offset).trunc_subsecs(6)
    }

    /// Moves this clock (and every clone of it) `by` ahead (tests).
    pub fn advance(&self, by: TimeDelta) {
        let micros = by.num_microseconds().expect("a test's step fits in i64 µs");
        self.offset_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

/// Settings the handlers need.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Default grace period of a rotated-out secret.
    pub secret_rotation_grace: Duration,
    /// Days a payload is kept when a message does not say.
    pub payload_retention_days: i64,
    /// Route names on which `Idempotency-Key` is required (see [`crate::http::idempotency::ROUTES`]).
    pub idempotency_required: Vec<String>,
    /// When a pull consumer's retryable failure is due again (the delivery schedule).
    pub retry_schedule: vow_core::RetrySchedule,
    /// How long `Idempotency-Key` records live (lease, replay, tombstone).
    pub idempotency: vow_store::idempotency::Settings,
    /// Rejection rows kept per source.
    pub rejections_kept: u32,
    /// How console sessions are kept.
    pub console: ConsoleSettings,
    /// How app portal tokens are issued, and how the portal's pages are framed and branded.
    pub portal: PortalSettings,
}

/// How console sessions are kept.
#[derive(Debug, Clone)]
pub struct ConsoleSettings {
    /// How long a session lasts after login.
    pub session_ttl: Duration,
    /// Whether the cookie is marked `Secure` (vow is reached over TLS).
    pub secure_cookies: bool,
}

impl Default for ConsoleSettings {
    fn default() -> Self {
        Self {
            session_ttl: Duration::from_secs(12 * 3600),
            secure_cookies: false,
        }
    }
}

/// How app portal tokens are issued, and how the portal's pages are framed and branded (the
/// `public_url` and `portal_*` settings, validated).
#[derive(Debug, Clone)]
pub struct PortalSettings {
    /// How long a token lasts when its request names no `expiry` (`portal_token_hours`).
    pub token_ttl: Duration,
    /// Where vow is reached from outside, without a trailing slash (`public_url`): the base of
    /// portal links. `None`: `http://` and the request's `Host`.
    pub public_url: Option<String>,
    /// The `frame-ancestors` source list of the portal pages' Content-Security-Policy: who may
    /// embed them in a frame (`'none'`: nobody).
    pub frame_ancestors: String,
    /// The name the portal pages show.
    pub brand_name: String,
    /// The portal pages' accent colour, `#rrggbb`.
    pub brand_accent: String,
}

impl Default for PortalSettings {
    fn default() -> Self {
        Self {
            token_ttl: Duration::from_secs(24 * 3600),
            public_url: None,
            frame_ancestors: "'none'".into(),
            brand_name: "vow".into(),
            brand_accent: "#2563eb".into(),
        }
    }
}

impl ApiSettings {
    /// Whether a request to `route` (e.g. `message.create`) must carry `Idempotency-Key`.
    pub fn requires_idempotency_key(&self, route: &str) -> bool {
        self.idempotency_required.iter().any(|r| r == route)
    }
}

impl Shared {
    /// The current time, at the store's (microsecond) precision ([`Clock::now`]).
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}
