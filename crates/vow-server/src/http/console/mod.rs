//! The operator console, served by `vow serve` at `/` and under `/console/`: server-rendered
//! pages from askama templates (every value auto-escaped), one embedded stylesheet, and no
//! script at all, so the Content-Security-Policy allows none.
//!
//! A person logs in with the admin token and gets a session ([`session`]): an HttpOnly,
//! `SameSite=Strict` cookie whose secret the store keeps only as a hash, so sessions end
//! everywhere when one node logs out and survive a restart. Every state-changing form carries the
//! session's CSRF token ([`csrf`]); failed logins are slowed per client address ([`throttle`]).
//! Pages read through the same store methods and lookups as the API routes.
//!
//! # Layout
//! - [`session`]: login, logout, the session cookie, and [`session::Operator`], the extractor
//!   every page takes.
//! - [`csrf`]: the token forms carry, checked in constant time, and the `Origin` check.
//! - [`throttle`]: failed logins per client address, and how long the next must wait.
//! - [`headers`]: the security headers every console response carries.
//! - [`pages`]: the pages and their templates (`templates/console/`).
//! - [`view`]: rendering a template into a response.

pub mod csrf;
pub mod headers;
pub mod pages;
pub mod session;
pub mod throttle;
pub mod view;

use axum::http::header::CONTENT_TYPE;
use axum::middleware;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use axum::{Extension, Router};

use crate::auth::TokenHash;
use crate::state::{AppState, ConsoleSettings};

/// The stylesheet, embedded in the binary.
const STYLESHEET: &str = include_str!("../../../assets/console.css");

/// The console's routes. `admin` is the hash the login form's token is checked against.
pub fn routes(admin: TokenHash, settings: ConsoleSettings) -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/console") }))
        .route("/console/assets/console.css", get(stylesheet))
        .merge(session::routes())
        .merge(pages::routes())
        .layer(Extension(session::Login::new(admin, settings)))
        .layer(middleware::from_fn(headers::secure))
}

async fn stylesheet() -> impl IntoResponse {
    ([(CONTENT_TYPE, "text/css; charset=utf-8")], STYLESHEET)
}
