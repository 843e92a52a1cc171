//! The console's pages: the applications, and each application's endpoints with their health.
//! Each page reads through the store methods and lookups the API routes use, with keyset
//! pagination (no count over a whole table).

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use vow_store::page::Page;
use vow_store::queue::DeliveryStats;
use vow_store::{Application, Endpoint, Order, Seek};

use super::session::Operator;
use super::view::render;
use crate::error::ApiResult;
use crate::http::api::keys::app_key;
use crate::http::api::lookup::find_app;
use crate::state::AppState;

/// Rows on one page of a list.
const PAGE_SIZE: usize = 50;

/// How far back an endpoint's delivery counts reach.
const HEALTH_WINDOW: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// The pages' routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console", get(applications))
        .route("/console/app/{app_id}", get(application))
}

/// Where a list page starts: `?after=` the last key of the page before.
#[derive(Deserialize)]
struct Cursor {
    after: Option<String>,
}

impl Cursor {
    fn seek(&self) -> Seek {
        Seek::for_iterator(self.after.as_deref(), Order::Ascending, PAGE_SIZE)
    }

    /// The page `rows` (fetched for [`Cursor::seek`]) make, and where the next one starts.
    fn page<T>(&self, rows: Vec<T>, key: impl Fn(&T) -> String) -> (Vec<T>, Option<String>) {
        let page = Page::build(rows, &self.seek(), Order::Ascending, key);
        let next = if page.done { None } else { page.iterator };
        (page.data, next)
    }
}

#[derive(Template)]
#[template(path = "console/applications.html")]
struct ApplicationsPage {
    csrf: String,
    apps: Vec<Application>,
    next: Option<String>,
}

async fn applications(
    State(state): State<AppState>,
    operator: Operator,
    Query(cursor): Query<Cursor>,
) -> ApiResult<Response> {
    let rows = state.store.list_applications(&cursor.seek()).await?;
    let (apps, next) = cursor.page(rows, |a| a.id.to_string());
    Ok(render(
        StatusCode::OK,
        &ApplicationsPage {
            csrf: operator.session.csrf,
            apps,
            next,
        },
    ))
}

/// An endpoint and how its deliveries of the last day went.
struct EndpointHealth {
    endpoint: Endpoint,
    stats: DeliveryStats,
}

impl EndpointHealth {
    /// Delivered ÷ settled (delivered + dead-lettered), as a percentage, if any settled.
    fn success_rate(&self) -> Option<String> {
        let settled = self.stats.success + self.stats.fail;
        (settled > 0).then(|| {
            format!(
                "{:.1} %",
                100.0 * self.stats.success as f64 / settled as f64
            )
        })
    }
}

#[derive(Template)]
#[template(path = "console/application.html")]
struct ApplicationPage {
    csrf: String,
    app: Application,
    endpoints: Vec<EndpointHealth>,
    next: Option<String>,
    since: DateTime<Utc>,
}

async fn application(
    State(state): State<AppState>,
    operator: Operator,
    Path(app_id): Path<String>,
    Query(cursor): Query<Cursor>,
) -> ApiResult<Response> {
    let app = find_app(&state, &app_key(&app_id)?).await?;
    let rows = state.store.list_endpoints(app.id, &cursor.seek()).await?;
    let (listed, next) = cursor.page(rows, |e| e.id.to_string());
    let now = state.now();
    let since = now - HEALTH_WINDOW;
    let mut endpoints = Vec::with_capacity(listed.len());
    for endpoint in listed {
        let stats = state
            .queue
            .endpoint_stats(app.id, endpoint.id, Some(since), None, now)
            .await?;
        endpoints.push(EndpointHealth { endpoint, stats });
    }
    Ok(render(
        StatusCode::OK,
        &ApplicationPage {
            csrf: operator.session.csrf,
            app,
            endpoints,
            next,
            since,
        },
    ))
}
