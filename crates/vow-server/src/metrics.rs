//! Prometheus metrics: the names vow records, the process-wide recorder, and `GET /metrics`
//! (behind the admin token, like the API).
//!
//! Record with the `metrics` macros and the names below; [`recorder`] installs the Prometheus
//! recorder once per process, so several servers in one process (tests) share it.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Counter: delivery attempts recorded, by `outcome` (`delivered`, `retry`, `dead_lettered`,
/// `held`).
pub const ATTEMPTS: &str = "vow_delivery_attempts_total";
/// Counter: deliveries dead-lettered (the schedule ran out, or a permanent failure).
pub const DEAD_LETTERED: &str = "vow_deliveries_dead_lettered_total";
/// Counter: endpoints disabled by the delivery policy (410 Gone, or consecutive dead letters).
pub const ENDPOINTS_DISABLED: &str = "vow_endpoints_disabled_total";
/// Counter: outcomes not recorded because another worker had taken the lease over.
pub const LEASES_LOST: &str = "vow_delivery_leases_lost_total";
/// Counter: `vow listen` relay targets removed because their listener was gone, by `kind`
/// (`endpoint`, `destination`).
pub const RELAYS_EXPIRED: &str = "vow_relay_targets_expired_total";
/// Gauge: deliveries this process has claimed and not yet recorded.
pub const IN_FLIGHT: &str = "vow_deliveries_in_flight";
/// Counter: messages accepted through the API.
pub const MESSAGES: &str = "vow_messages_created_total";
/// Counter: responses replayed for a repeated `Idempotency-Key`.
pub const IDEMPOTENT_REPLAYS: &str = "vow_idempotency_replays_total";
/// Counter: idempotency problems answered, by `type` (`idempotency-key-reused`,
/// `idempotency-key-in-progress`, ...; see `docs/problems.md`).
pub const IDEMPOTENCY_PROBLEMS: &str = "vow_idempotency_problems_total";
/// Counter: requests that waited (`Prefer: wait`) for another request with their key.
pub const IDEMPOTENT_WAITS: &str = "vow_idempotency_waits_total";
/// Counter: `Idempotency-Key` claims taken over after their first request's lease ran out
/// (that request crashed or hung before committing).
pub const IDEMPOTENT_TAKEOVERS: &str = "vow_idempotency_takeovers_total";
/// Gauge: seconds since the oldest `Idempotency-Key` claim still in progress began (0 when
/// none), read from the store at each scrape: a request stuck or abandoned shows here.
pub const IDEMPOTENCY_OLDEST_IN_PROGRESS: &str = "vow_idempotency_oldest_in_progress_seconds";
/// Counter: inbound requests refused, by `reason` (`signature_mismatch`, `timestamp_too_old`,
/// `missing_header`, `body_too_large`, `unknown_source`, ...).
pub const INBOUND_REJECTIONS: &str = "vow_inbound_rejections_total";
/// Counter: inbound deliveries claimed as new events.
pub const INBOUND_RECEIVED: &str = "vow_inbound_received_total";
/// Counter: inbound deliveries that repeated a stored event (same id, same payload).
pub const INBOUND_DUPLICATES: &str = "vow_inbound_duplicates_total";
/// Counter: inbound deliveries quarantined (a stored event id with a different payload).
pub const INBOUND_QUARANTINED: &str = "vow_inbound_quarantined_total";
/// Counter: forwards of inbound events recorded, by outcome.
pub const INBOUND_FORWARDS: &str = "vow_inbound_forwards_total";
/// Counter: inbound events superseded by a newer version of their entity.
pub const INBOUND_SUPERSEDED: &str = "vow_inbound_superseded_total";
/// Counter: inbound events whose lease ran out before their outcome was recorded.
pub const INBOUND_EXPIRED_LEASES: &str = "vow_inbound_expired_leases_total";

/// Histogram: seconds each delivery attempt's request took, by `outcome` (as [`ATTEMPTS`]).
pub const ATTEMPT_SECONDS: &str = "vow_delivery_attempt_seconds";
/// Histogram: seconds from a delivery's creation (its message's acceptance) to the end of the
/// attempt that delivered it; operators' resends and replays are left out.
pub const END_TO_END_SECONDS: &str = "vow_delivery_end_to_end_seconds";
/// Histogram: seconds each API, console and ingest request took, by `method`, `route` (its
/// template, e.g. `/api/v1/app/{app_id}/msg`: the ack latency of a message is this route's
/// `POST`) and `status`.
pub const REQUEST_SECONDS: &str = "vow_http_request_seconds";
/// Gauge: pending deliveries due now, read at each scrape (capped at 10,000).
pub const DUE: &str = "vow_deliveries_due";
/// Gauge: seconds the oldest due delivery has waited, read at each scrape (0 when none).
pub const OLDEST_DUE: &str = "vow_deliveries_oldest_due_seconds";

/// Gauge: dead-letters in the alert window, all endpoints, as of the last check.
pub const DEAD_LETTERS_IN_WINDOW: &str = "vow_dead_letters_in_window";
/// Gauge: endpoints whose dead-letter alert is raised, as of the last check.
pub const DEAD_LETTER_ALERTS_RAISED: &str = "vow_dead_letter_alerts_raised";
/// Counter: dead-letter alerts this process raised and cleared, by `event`.
pub const DEAD_LETTER_ALERTS: &str = "vow_dead_letter_alerts_total";

/// Counter: requests refused with 503 and `Retry-After` because the store was over its write
/// capacity or the due delivery backlog over its bound (graceful overload).
pub const REQUESTS_SHED: &str = "vow_requests_shed_total";
/// Gauge: the endpoints the backlog bound leaves out now because they hold up their own
/// deliveries (named beside its recorder, [`crate::admission`]).
pub use crate::admission::LEFT_OUT as INTAKE_SLOW_ENDPOINTS;
/// Gauge: the share of new messages and inbound deliveries refused now for the due delivery
/// backlog, 0 to 1 (named beside its recorder, [`crate::admission`]).
pub use crate::admission::REFUSED_SHARE as INTAKE_REFUSED_SHARE;

/// Counter: rows retention removed or cleared, by `what` (`messages`: whole messages with their
/// deliveries and attempts; `content`: payloads, response bodies, activity minutes and
/// dead-letter notes; `idempotency_records`; `inbound_payloads`; `sessions`).
pub const RETENTION_PURGED: &str = "vow_retention_purged_total";
/// Histogram: seconds each retention sweep took, pauses between its batches included.
pub const RETENTION_SWEEP_SECONDS: &str = "vow_retention_sweep_seconds";

/// Buckets (seconds) of the request and attempt histograms.
const FAST_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Buckets (seconds) of the end-to-end histogram: retries reach hours.
const DELAY_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
    3600.0, 21600.0, 86400.0,
];

/// The Prometheus recorder, installed as the global `metrics` recorder on first use. When
/// another recorder was installed first (by an embedding program), vow's metrics go there and
/// `/metrics` renders only what reaches this one.
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(ATTEMPT_SECONDS.into()), FAST_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(REQUEST_SECONDS.into()), FAST_BUCKETS)
            })
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(END_TO_END_SECONDS.into()), DELAY_BUCKETS)
            })
            .expect("the bucket lists are not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed; /metrics will be empty");
        }
        describe();
        handle
    })
}

fn describe() {
    describe_histogram!(
        ATTEMPT_SECONDS,
        Unit::Seconds,
        "Delivery attempt request time, by outcome."
    );
    describe_histogram!(
        END_TO_END_SECONDS,
        Unit::Seconds,
        "Delivery creation to delivered, operators' resends and replays left out."
    );
    describe_histogram!(
        REQUEST_SECONDS,
        Unit::Seconds,
        "HTTP request time, by method, route template and status."
    );
    describe_gauge!(DUE, "Pending deliveries due now (capped at 10,000).");
    describe_gauge!(
        OLDEST_DUE,
        Unit::Seconds,
        "How long the oldest due delivery has waited."
    );
    describe_gauge!(
        DEAD_LETTERS_IN_WINDOW,
        "Deliveries dead-lettered within the dead-letter alert's window, all endpoints."
    );
    describe_gauge!(
        DEAD_LETTER_ALERTS_RAISED,
        "Endpoints whose dead-letter rate alert is raised."
    );
    describe_counter!(
        DEAD_LETTER_ALERTS,
        "Dead-letter rate alerts this process raised or cleared, by event."
    );
    describe_counter!(
        REQUESTS_SHED,
        "Requests refused with 503 and Retry-After because the store was over its write capacity or the due backlog over its bound."
    );
    describe_gauge!(
        INTAKE_REFUSED_SHARE,
        "Share of new messages and inbound deliveries refused now for the due delivery backlog, 0 to 1."
    );
    describe_gauge!(
        INTAKE_SLOW_ENDPOINTS,
        "Endpoints whose due deliveries the backlog bound leaves out now: most of their claims wait for or are in a request to them."
    );
    describe_counter!(
        RETENTION_PURGED,
        "Rows retention removed or cleared, by what (messages are counted whole)."
    );
    describe_histogram!(
        RETENTION_SWEEP_SECONDS,
        Unit::Seconds,
        "Retention sweep time, pauses between batches included."
    );
    describe_counter!(ATTEMPTS, "Delivery attempts recorded, by outcome.");
    describe_counter!(DEAD_LETTERED, "Deliveries dead-lettered.");
    describe_counter!(
        RELAYS_EXPIRED,
        "`vow listen` relay targets removed because their listener was gone, by kind."
    );
    describe_counter!(
        ENDPOINTS_DISABLED,
        "Endpoints disabled by the delivery policy."
    );
    describe_counter!(
        LEASES_LOST,
        "Outcomes dropped because the lease was taken over."
    );
    describe_gauge!(
        IN_FLIGHT,
        "Deliveries claimed by this process and not yet recorded."
    );
    describe_counter!(MESSAGES, "Messages accepted through the API.");
    describe_counter!(
        IDEMPOTENT_REPLAYS,
        "Responses replayed for a repeated Idempotency-Key."
    );
    describe_counter!(
        IDEMPOTENCY_PROBLEMS,
        "Idempotency problems answered, by type."
    );
    describe_counter!(
        IDEMPOTENT_WAITS,
        "Requests that waited for another with their key."
    );
    describe_counter!(
        IDEMPOTENT_TAKEOVERS,
        "Idempotency-Key claims taken over after their lease ran out."
    );
    describe_gauge!(
        IDEMPOTENCY_OLDEST_IN_PROGRESS,
        "Age in seconds of the oldest Idempotency-Key claim still in progress."
    );
    describe_counter!(INBOUND_REJECTIONS, "Inbound requests refused, by reason.");
    describe_counter!(
        INBOUND_RECEIVED,
        "Inbound deliveries claimed as new events."
    );
    describe_counter!(
        INBOUND_DUPLICATES,
        "Inbound deliveries repeating a stored event."
    );
    describe_counter!(
        INBOUND_QUARANTINED,
        "Inbound deliveries quarantined: a stored event id with another payload."
    );
    describe_counter!(
        INBOUND_FORWARDS,
        "Forwards of inbound events to destinations, by outcome."
    );
    describe_counter!(
        INBOUND_SUPERSEDED,
        "Inbound events superseded by a newer version of their entity."
    );
    describe_counter!(
        INBOUND_EXPIRED_LEASES,
        "Inbound events whose lease ran out before their outcome was recorded."
    );
}

/// `GET /metrics` in the Prometheus text format.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(render))
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "Metrics", operation_id = "v1.metrics.get",
    responses((status = 200, description = "Prometheus metrics.", content_type = "text/plain", body = String)))]
async fn render(State(state): State<AppState>) -> impl IntoResponse {
    let now = state.now();
    match state.store.backlog(now, &[]).await {
        Ok(backlog) => {
            metrics::gauge!(DUE).set(backlog.due.value as f64);
            let waited = backlog.oldest_due.map_or(0.0, |due| seconds(now - due));
            metrics::gauge!(OLDEST_DUE).set(waited);
        }
        Err(e) => tracing::warn!(error = %e, "could not read the delivery backlog"),
    }
    let settings = &state.settings.idempotency;
    match state.store.oldest_idempotent_claim(settings).await {
        Ok(oldest) => {
            let age = oldest.map_or(0.0, |began| seconds(now - began));
            metrics::gauge!(IDEMPOTENCY_OLDEST_IN_PROGRESS).set(age);
        }
        Err(e) => tracing::warn!(error = %e, "could not read the oldest idempotency claim"),
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        recorder().render(),
    )
}

/// `span` in seconds, never negative.
pub fn seconds(span: chrono::TimeDelta) -> f64 {
    span.num_microseconds().unwrap_or(i64::MAX).max(0) as f64 / 1e6
}

/// Times each routed request into [`REQUEST_SECONDS`], labelled by its route's template, and
/// names that template in the request's span.
pub async fn time_request(route: MatchedPath, req: Request, next: Next) -> Response {
    // The request's span (`http::request_context`) learns its route here, once it is matched.
    tracing::Span::current().record("route", route.as_str());
    let method = req.method().clone();
    let started = Instant::now();
    let response = next.run(req).await;
    metrics::histogram!(
        REQUEST_SECONDS,
        "method" => method.to_string(),
        "route" => route.as_str().to_owned(),
        "status" => response.status().as_u16().to_string(),
    )
    .record(started.elapsed().as_secs_f64());
    response
}
