//! Prometheus metrics: the names vow records, the process-wide recorder, and `GET /metrics`
//! (behind the admin token, like the API).
//!
//! Record with the `metrics` macros and the names below; [`recorder`] installs the Prometheus
//! recorder once per process, so several servers in one process (tests) share it.

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use metrics::{describe_counter, describe_gauge};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::state::AppState;

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

/// The Prometheus recorder, installed as the global `metrics` recorder on first use. When
/// another recorder was installed first (by an embedding program), vow's metrics go there and
/// `/metrics` renders only what reaches this one.
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed; /metrics will be empty");
        }
        describe();
        handle
    })
}

fn describe() {
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
pub fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(render))
}

async fn render(State(state): State<AppState>) -> impl IntoResponse {
    let settings = &state.settings.idempotency;
    match state.store.oldest_idempotent_claim(settings).await {
        Ok(oldest) => {
            let age = oldest.map_or(0.0, |began| {
                (state.now() - began).num_milliseconds().max(0) as f64 / 1000.0
            });
            metrics::gauge!(IDEMPOTENCY_OLDEST_IN_PROGRESS).set(age);
        }
        Err(e) => tracing::warn!(error = %e, "could not read the oldest idempotency claim"),
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        recorder().render(),
    )
}
