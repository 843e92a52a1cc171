//! The console's own pages (the applications list), and what every list page shares: keyset
//! pagination (`?after=` the last key of the page before, no count over a whole table) and
//! reading the time fields of a form.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, NaiveDateTime, Utc};
use serde::Deserialize;
use vow_store::page::Page;
use vow_store::{Application, Order, Seek};

use super::session::Operator;
use super::view::render;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Rows on one page of a list.
pub const PAGE_SIZE: usize = 50;

/// Where an oldest-first list page starts: `?after=` the last key of the page before.
#[derive(Deserialize)]
pub struct Cursor {
    after: Option<String>,
}

impl Cursor {
    /// The store read of this page.
    pub fn seek(&self) -> Seek {
        Seek::for_iterator(self.after.as_deref(), Order::Ascending, PAGE_SIZE)
    }

    /// The page `rows` (fetched for [`Cursor::seek`]) make, and where the next one starts.
    pub fn page<T>(&self, rows: Vec<T>, key: impl Fn(&T) -> String) -> (Vec<T>, Option<String>) {
        keyset_page(rows, &self.seek(), Order::Ascending, key)
    }
}

/// The page `rows` (fetched for `seek`, in `order`) make, and the key the next page starts
/// after (`None` on the last page).
pub fn keyset_page<T>(
    rows: Vec<T>,
    seek: &Seek,
    order: Order,
    key: impl Fn(&T) -> String,
) -> (Vec<T>, Option<String>) {
    let page = Page::build(rows, seek, order, key);
    let next = if page.done { None } else { page.iterator };
    (page.data, next)
}

/// A `datetime-local` value (`2026-12-02T09:30`, seconds optional) as UTC; empty is none.
pub fn form_time(field: &str, raw: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(raw, f).ok())
        .map(|t| Some(t.and_utc()))
        .ok_or_else(|| {
            let msg = format!("{raw:?} is not a time like 2026-12-02T09:30 (UTC)");
            ApiError::invalid(&["form", field], msg, "value_error.datetime")
        })
}

#[derive(Template)]
#[template(path = "console/applications.html")]
struct ApplicationsPage {
    csrf: String,
    apps: Vec<Application>,
    next: Option<String>,
}

/// Every application, oldest first.
pub async fn applications(
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
