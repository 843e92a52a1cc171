//! The operator console, served by `vow serve` at `/` and under `/console/`, and the app
//! portal under `/portal/{token}/` (an application's pages, for its owner; see [`scope`]): server-rendered
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
//! - [`overview`]: the Overview page (`/` leads there), with [`chart`]: SVG bar charts drawn
//!   on the server.
//! - [`view`]: rendering a template into a response, numbers as pages show them.

pub mod chart;
pub mod csrf;
pub mod diff;
pub mod endpoint_edit;
pub mod endpoint_forms;
pub mod endpoints;
pub mod headers;
pub mod keys;
pub mod messages;
pub mod overview;
pub mod pages;
pub mod scope;
pub mod session;
pub mod sources;
pub mod throttle;
pub mod view;

use axum::http::header::CONTENT_TYPE;
use axum::middleware;
use axum::response::{IntoResponse, Redirect};
use axum::routing::{get, post};
use axum::{Extension, Router};

use crate::auth::TokenHash;
use crate::state::{AppState, ConsoleSettings, PortalSettings};
use headers::SecurityHeaders;

/// The stylesheet, embedded in the binary.
const STYLESHEET: &str = include_str!("../../../assets/console.css");

/// The console's and the portal's routes. `admin` is the hash the login form's token is
/// checked against.
pub fn routes(
    admin: TokenHash,
    settings: ConsoleSettings,
    portal: &PortalSettings,
) -> Router<AppState> {
    let console = Router::new()
        .route("/", get(|| async { Redirect::to("/console/overview") }))
        .route("/console/assets/console.css", get(stylesheet))
        .route("/console", get(pages::applications))
        .route("/console/overview", get(overview::overview))
        .merge(session::routes())
        .nest("/console/app/{app_id}", app_pages())
        .route("/console/idempotency", get(keys::inspect))
        .route("/console/sources", get(sources::sources))
        .route("/console/source/{source_id}", get(sources::source))
        .route(
            "/console/source/{source_id}/event/{event_id}",
            get(sources::event),
        )
        .route(
            "/console/source/{source_id}/event/{event_id}/release",
            post(sources::release),
        )
        .route(
            "/console/source/{source_id}/event/{event_id}/discard",
            post(sources::discard),
        )
        .route(
            "/console/source/{source_id}/event/{event_id}/settle",
            post(sources::settle),
        )
        .layer(Extension(session::Login::new(admin, settings)))
        .layer(middleware::from_fn_with_state(
            SecurityHeaders::console(),
            headers::secure,
        ));
    let brand = format!(":root {{ --accent: {}; }}\n", portal.brand_accent);
    let portal_pages = Router::new()
        .route(
            "/portal/assets/brand.css",
            get(|| async move { ([(CONTENT_TYPE, "text/css; charset=utf-8")], brand) }),
        )
        .nest("/portal/{token}", app_pages())
        .layer(middleware::from_fn_with_state(
            SecurityHeaders::portal(&portal.frame_ancestors),
            headers::secure,
        ));
    console.merge(portal_pages)
}

/// The pages of one application, the same for the console and the portal (see [`scope`]).
fn app_pages() -> Router<AppState> {
    let one = "/endpoint/{endpoint_id}";
    Router::new()
        .route("/", get(endpoints::application))
        .route("/messages", get(messages::messages))
        .route("/msg/{msg_id}", get(messages::message))
        .route("/endpoint", post(endpoint_edit::create))
        .route("/endpoint/new", get(endpoint_edit::new_form))
        .route(one, get(endpoints::endpoint))
        .route(
            &format!("{one}/edit"),
            get(endpoint_edit::edit_form).post(endpoint_edit::update),
        )
        .route(&format!("{one}/secret"), get(endpoints::secret))
        .route(&format!("{one}/state"), post(endpoint_forms::set_state))
        .route(&format!("{one}/rotate"), post(endpoint_forms::rotate))
        .route(&format!("{one}/test"), post(endpoint_forms::send_test))
        .route(
            &format!("{one}/resend/{{msg_id}}"),
            post(endpoint_forms::resend),
        )
        .route(
            &format!("{one}/replay"),
            get(endpoint_forms::progress).post(endpoint_forms::replay),
        )
}

async fn stylesheet() -> impl IntoResponse {
    ([(CONTENT_TYPE, "text/css; charset=utf-8")], STYLESHEET)
}
