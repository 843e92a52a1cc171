//! An application's pages, the same in the console and the portal ([`AppScope`]): its
//! endpoints with their health (read from each one's newest attempts, for a whole list in one
//! store read), one endpoint's page (attempt timeline, dead letters, the
//! replay form, its actions), and its signing secret. Reads go through the store methods the
//! API routes use, newest first, with keyset pagination.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_core::{AppId, AttemptId, EndpointId};
use vow_store::queue::{
    Attempt, AttemptFilter, AttemptedMessage, DeliveryStats, MessageStatus, RecentAttempt,
    StatsFilter,
};
use vow_store::{Endpoint, EndpointSecret, EventType, MessageFilter, Order, Seek, StoreError};

use super::pages::{keyset_page, Cursor, PAGE_SIZE};
use super::scope::AppScope;
use super::view::{percent, render, PageResult};
use crate::http::api::keys::endpoint_key;
use crate::http::api::lookup::find_endpoint_in;
use crate::state::AppState;

/// How far back an endpoint page's delivery counts reach.
const COUNT_WINDOW: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// How many of an endpoint's newest attempts its health is read from.
const RECENT_ATTEMPTS: usize = 100;

/// Event types offered in the test and replay forms.
const EVENT_TYPES_OFFERED: usize = 200;

/// `{endpoint_id}` of an endpoint page's path.
#[derive(Deserialize)]
pub struct EndpointPath {
    /// The endpoint's id or uid.
    pub endpoint_id: String,
}

/// An endpoint and how its newest attempts went.
pub struct EndpointHealth {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Its newest attempts, summed up; `None` before the first.
    pub recent: Option<RecentHealth>,
}

/// What an endpoint's newest attempts (at most [`RECENT_ATTEMPTS`]) say about it.
pub struct RecentHealth {
    /// How many attempts this is read from.
    pub attempts: usize,
    /// Succeeded ÷ attempts, as a percentage.
    pub success_rate: String,
    /// Median attempt duration, in ms.
    pub p50: u64,
    /// 99th percentile attempt duration, in ms.
    pub p99: u64,
    /// The newest failed one among them.
    pub last_failure: Option<RecentAttempt>,
}

impl RecentHealth {
    /// Sums up one endpoint's attempts, given newest first.
    fn of(newest_first: Vec<RecentAttempt>) -> Option<RecentHealth> {
        if newest_first.is_empty() {
            return None;
        }
        let attempts = newest_first.len();
        let succeeded = newest_first.iter().filter(|a| a.success).count();
        let mut ms: Vec<u64> = newest_first.iter().map(|a| a.duration_ms).collect();
        ms.sort_unstable();
        let at = |q: f64| ms[((attempts - 1) as f64 * q).round() as usize];
        Some(RecentHealth {
            attempts,
            success_rate: percent(succeeded as f64 / attempts as f64),
            p50: at(0.5),
            p99: at(0.99),
            last_failure: newest_first.into_iter().find(|a| !a.success),
        })
    }
}

/// The health of each of `endpoints` (of `app`), in one store read.
async fn health_of(
    state: &AppState,
    app: AppId,
    endpoints: Vec<Endpoint>,
) -> Result<Vec<EndpointHealth>, StoreError> {
    let ids: Vec<EndpointId> = endpoints.iter().map(|e| e.id).collect();
    let mut recent: HashMap<EndpointId, Vec<RecentAttempt>> = HashMap::new();
    for attempt in (state.queue)
        .recent_attempts(app, &ids, RECENT_ATTEMPTS)
        .await?
    {
        recent.entry(attempt.endpoint_id).or_default().push(attempt);
    }
    Ok(endpoints
        .into_iter()
        .map(|endpoint| EndpointHealth {
            recent: recent.remove(&endpoint.id).and_then(RecentHealth::of),
            endpoint,
        })
        .collect())
}

#[derive(Template)]
#[template(path = "console/application.html")]
struct ApplicationPage {
    scope: AppScope,
    endpoints: Vec<EndpointHealth>,
    next: Option<String>,
    recent_attempts: usize,
}

/// The application's endpoints, each with the health its newest attempts show.
pub async fn application(
    State(state): State<AppState>,
    scope: AppScope,
    Query(cursor): Query<Cursor>,
) -> PageResult {
    let rows = (state.store)
        .list_endpoints(scope.app.id, &cursor.seek())
        .await?;
    let (listed, next) = cursor.page(rows, |e| e.id.to_string());
    let endpoints = health_of(&state, scope.app.id, listed).await?;
    let page = ApplicationPage {
        scope,
        endpoints,
        next,
        recent_attempts: RECENT_ATTEMPTS,
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
    stats: DeliveryStats,
    notice: Option<&'static str>,
    attempts: Vec<Attempt>,
    attempts_next: Option<String>,
    dead: Vec<AttemptedMessage>,
    dead_next: Option<String>,
    event_types: Vec<EventType>,
    since: DateTime<Utc>,
}

impl EndpointPage {
    /// Delivered ÷ settled (delivered + dead-lettered) in the count window, if any settled.
    fn delivered_rate(&self) -> Option<String> {
        let settled = self.stats.success + self.stats.fail;
        (settled > 0).then(|| percent(self.stats.success as f64 / settled as f64))
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
    let since = now - COUNT_WINDOW;
    let day = StatsFilter::since(since);
    let no_filter = MessageFilter::default();
    let endpoint_id = endpoint.id;
    let attempts_seek = newest_first(query.attempts_after.as_deref(), |s| {
        AttemptId::parse(s).is_ok()
    });
    let attempt_filter = AttemptFilter {
        endpoint_id: Some(endpoint_id),
        ..Default::default()
    };
    let dead_seek = newest_first(query.dead_after.as_deref(), |s| {
        vow_core::MessageId::parse(s).is_ok()
    });
    let offered = Seek::for_iterator(None, Order::Ascending, EVENT_TYPES_OFFERED);
    // The page's five reads are independent: they run at once, each on its own connection.
    let (stats, health, attempt_rows, dead_rows, event_types) = tokio::try_join!(
        (state.queue).endpoint_stats(app, endpoint_id, &day, now),
        health_of(&state, app, vec![endpoint]),
        state
            .queue
            .list_attempts(app, &attempt_filter, &attempts_seek),
        (state.queue).list_attempted_messages(
            app,
            endpoint_id,
            &no_filter,
            Some(MessageStatus::Fail),
            now,
            &dead_seek,
        ),
        state.store.list_event_types(&offered, false),
    )?;
    let health = health.into_iter().next().expect("one endpoint in, one out");
    let (attempts, attempts_next) =
        keyset_page(attempt_rows, &attempts_seek, Order::Descending, |a| {
            a.id.to_string()
        });
    let (dead, dead_next) = keyset_page(dead_rows, &dead_seek, Order::Descending, |r| {
        r.message.id.to_string()
    });
    let page = EndpointPage {
        scope,
        health,
        stats,
        notice: query.notice.map(Notice::text),
        attempts,
        attempts_next,
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
    secrets: Vec<SecretRow>,
}

/// One signing secret as the page shows it: an ed25519 key with the public key its receivers
/// verify with.
struct SecretRow {
    secret: EndpointSecret,
    public_key: Option<String>,
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
    let secrets = secrets
        .into_iter()
        .map(|secret| SecretRow {
            public_key: crate::secret::public_key(&secret.key),
            secret,
        })
        .collect();
    let page = SecretPage {
        scope,
        endpoint,
        secrets,
    };
    Ok(render(StatusCode::OK, &page))
}
