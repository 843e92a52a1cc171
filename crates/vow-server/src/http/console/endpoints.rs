//! An application's pages, the same in the console and the portal ([`AppScope`]): its
//! endpoints with their health, one endpoint's page (attempt timeline, dead letters, the
//! replay form, its actions), and its signing secret. Reads go through the store methods the
//! API routes use, newest first, with keyset pagination.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_core::AttemptId;
use vow_store::queue::{Attempt, AttemptFilter, AttemptedMessage, DeliveryStats, MessageStatus};
use vow_store::{Endpoint, EndpointSecret, EventType, MessageFilter, Order, Seek};

use super::pages::{keyset_page, Cursor, PAGE_SIZE};
use super::scope::AppScope;
use super::view::{percent, render, PageResult};
use crate::http::api::keys::endpoint_key;
use crate::http::api::lookup::find_endpoint_in;
use crate::state::AppState;

/// How far back an endpoint's delivery counts reach.
const HEALTH_WINDOW: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// Event types offered in the test and replay forms.
const EVENT_TYPES_OFFERED: usize = 200;

/// `{endpoint_id}` of an endpoint page's path.
#[derive(Deserialize)]
pub struct EndpointPath {
    /// The endpoint's id or uid.
    pub endpoint_id: String,
}

/// An endpoint and how its deliveries of the last day went.
pub struct EndpointHealth {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Its deliveries created in the window, by state.
    pub stats: DeliveryStats,
}

impl EndpointHealth {
    /// Delivered ÷ settled (delivered + dead-lettered), as a percentage, if any settled.
    pub fn success_rate(&self) -> Option<String> {
        let settled = self.stats.success + self.stats.fail;
        (settled > 0).then(|| percent(self.stats.success as f64 / settled as f64))
    }
}

#[derive(Template)]
#[template(path = "console/application.html")]
struct ApplicationPage {
    scope: AppScope,
    endpoints: Vec<EndpointHealth>,
    next: Option<String>,
    since: DateTime<Utc>,
}

/// The application's endpoints, each with its last day's delivery counts.
pub async fn application(
    State(state): State<AppState>,
    scope: AppScope,
    Query(cursor): Query<Cursor>,
) -> PageResult {
    let rows = (state.store)
        .list_endpoints(scope.app.id, &cursor.seek())
        .await?;
    let (listed, next) = cursor.page(rows, |e| e.id.to_string());
    let now = state.now();
    let since = now - HEALTH_WINDOW;
    let mut endpoints = Vec::with_capacity(listed.len());
    for endpoint in listed {
        let stats = state
            .queue
            .endpoint_stats(scope.app.id, endpoint.id, Some(since), None, now)
            .await?;
        endpoints.push(EndpointHealth { endpoint, stats });
    }
    let page = ApplicationPage {
        scope,
        endpoints,
        next,
        since,
    };
    Ok(render(StatusCode::OK, &page))
}

/// What the endpoint page says after an action sent the browser back to it.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Notice {
    /// Enabled.
    Enabled,
    /// Disabled.
    Disabled,
    /// Secret rotated.
    Rotated,
    /// Test event sent.
    TestSent,
    /// Message resent.
    Resent,
    /// URL, description or event types changed.
    Updated,
}

impl Notice {
    fn text(self) -> &'static str {
        match self {
            Notice::Enabled => "Endpoint enabled: deliveries resume.",
            Notice::Disabled => "Endpoint disabled: new messages wait until it is enabled again.",
            Notice::Rotated => {
                "Secret rotated. The old secret keeps signing until the time shown below."
            }
            Notice::TestSent => "Test event sent: it shows in the timeline once attempted.",
            Notice::Resent => "Message resent: a new delivery is due now.",
            Notice::Updated => "Endpoint saved.",
        }
    }
}

/// The endpoint page's query: the notice, and where the attempt and dead-letter lists start.
#[derive(Deserialize)]
pub struct EndpointQuery {
    notice: Option<Notice>,
    /// Older attempts: after this attempt id (newest first).
    attempts_after: Option<String>,
    /// Older dead letters: after this message id.
    dead_after: Option<String>,
}

#[derive(Template)]
#[template(path = "console/endpoint.html")]
struct EndpointPage {
    scope: AppScope,
    health: EndpointHealth,
    notice: Option<&'static str>,
    attempts: Vec<Attempt>,
    attempts_next: Option<String>,
    latency: Option<Latency>,
    last_failure: Option<Attempt>,
    dead: Vec<AttemptedMessage>,
    dead_next: Option<String>,
    event_types: Vec<EventType>,
    since: DateTime<Utc>,
}

/// p50 and p99 of the listed attempts' durations.
struct Latency {
    p50: u64,
    p99: u64,
    over: usize,
}

impl Latency {
    fn of(attempts: &[Attempt]) -> Option<Latency> {
        let mut ms: Vec<u64> = attempts.iter().map(|a| a.attempt.duration_ms).collect();
        if ms.is_empty() {
            return None;
        }
        ms.sort_unstable();
        let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
        Some(Latency {
            p50: at(0.5),
            p99: at(0.99),
            over: ms.len(),
        })
    }
}

/// One endpoint: its state and health, the attempt timeline, its dead letters and the forms
/// that act on them.
pub async fn endpoint(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<EndpointPath>,
    Query(query): Query<EndpointQuery>,
) -> PageResult {
    let app = scope.app.id;
    let endpoint = find_endpoint_in(&state, app, &endpoint_key(&path.endpoint_id)?).await?;
    let now = state.now();
    let since = now - HEALTH_WINDOW;
    let stats = (state.queue)
        .endpoint_stats(app, endpoint.id, Some(since), None, now)
        .await?;

    let seek = newest_first(query.attempts_after.as_deref(), |s| {
        AttemptId::parse(s).is_ok()
    });
    let filter = AttemptFilter {
        endpoint_id: Some(endpoint.id),
        ..Default::default()
    };
    let rows = state.queue.list_attempts(app, &filter, &seek).await?;
    let (attempts, attempts_next) =
        keyset_page(rows, &seek, Order::Descending, |a| a.id.to_string());
    let last_failure = attempts.iter().find(|a| !a.attempt.success).cloned();

    let seek = newest_first(query.dead_after.as_deref(), |s| {
        vow_core::MessageId::parse(s).is_ok()
    });
    let rows = (state.queue)
        .list_attempted_messages(
            app,
            endpoint.id,
            &MessageFilter::default(),
            Some(MessageStatus::Fail),
            now,
            &seek,
        )
        .await?;
    let (dead, dead_next) =
        keyset_page(rows, &seek, Order::Descending, |r| r.message.id.to_string());

    let offered = Seek::for_iterator(None, Order::Ascending, EVENT_TYPES_OFFERED);
    let event_types = state.store.list_event_types(&offered, false).await?;
    let page = EndpointPage {
        scope,
        latency: Latency::of(&attempts),
        health: EndpointHealth { endpoint, stats },
        notice: query.notice.map(Notice::text),
        attempts,
        attempts_next,
        last_failure,
        dead,
        dead_next,
        event_types,
        since,
    };
    Ok(render(StatusCode::OK, &page))
}

/// A newest-first page of [`PAGE_SIZE`] starting after `after` (ignored unless `valid`).
fn newest_first(after: Option<&str>, valid: impl Fn(&str) -> bool) -> Seek {
    let after = after.filter(|a| valid(a));
    Seek::for_iterator(after, Order::Descending, PAGE_SIZE)
}

#[derive(Template)]
#[template(path = "console/secret.html")]
struct SecretPage {
    scope: AppScope,
    endpoint: Endpoint,
    secrets: Vec<EndpointSecret>,
}

/// The endpoint's signing secrets: the current one and any still signing after a rotation.
pub async fn secret(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<EndpointPath>,
) -> PageResult {
    let app = scope.app.id;
    let endpoint = find_endpoint_in(&state, app, &endpoint_key(&path.endpoint_id)?).await?;
    let secrets = (state.store)
        .endpoint_secrets(app, endpoint.id, state.now())
        .await?;
    let page = SecretPage {
        scope,
        endpoint,
        secrets,
    };
    Ok(render(StatusCode::OK, &page))
}
