//! Whose pages these are: the pages of one application are served twice, to an operator in the
//! console at `/console/app/{app_id}/…` and to that application's owner in the app portal at
//! `/portal/{token}/…`. [`AppScope`] resolves either into the application, the session whose
//! CSRF token its forms carry, and the base path its links start from, so each page and each
//! action is written once and cannot reach another application.

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use vow_store::session::{Session, SessionScope};
use vow_store::{AppKey, Application};

use super::csrf::{self, Forged};
use super::session::Operator;
use super::view::Failure;
use crate::http::api::keys::app_key;
use crate::http::api::lookup::find_app;
use crate::state::AppState;

/// Which surface a page is served on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// The operator console (admin session cookie).
    Console,
    /// The app portal (a token for one application, in the path).
    Portal,
}

/// The application a page belongs to, seen by an operator or by its owner.
#[derive(Debug, Clone)]
pub struct AppScope {
    /// The application.
    pub app: Application,
    /// The session: an operator's console session, or the portal token's.
    pub session: Session,
    /// The path this application's pages start from (no trailing slash).
    pub base: String,
    /// Console or portal.
    pub surface: Surface,
    /// The name the portal's pages carry (`portal_brand_name`).
    pub brand: String,
}

impl AppScope {
    /// The CSRF token the page's forms carry.
    pub fn csrf(&self) -> &str {
        &self.session.csrf
    }

    /// Whether the page is the portal's.
    pub fn is_portal(&self) -> bool {
        self.surface == Surface::Portal
    }

    /// Whether the page may offer forms that change something (not on a read-only portal
    /// link).
    pub fn can_write(&self) -> bool {
        !self.session.read_only
    }

    /// Refuses a form without this session's CSRF token or from another site, and any form
    /// on a read-only portal link.
    pub fn check(&self, token: &str, headers: &HeaderMap) -> Result<(), Forged> {
        if !self.can_write() {
            return Err(Forged("this portal link is read-only"));
        }
        csrf::check(&self.session, token, headers)
    }
}

impl FromRequestParts<AppState> for AppScope {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let param = |name: &str| {
            params
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        if let Some(token) = param("token") {
            return portal(state, &token).await;
        }
        let Some(raw) = param("app_id") else {
            return Err(Failure::new(StatusCode::NOT_FOUND, "No such page.").into_response());
        };
        let operator = Operator::from_request_parts(parts, state).await?;
        let app = app_key(&raw)
            .map_err(Failure::from)
            .map_err(IntoResponse::into_response)?;
        let app = find_app(state, &app)
            .await
            .map_err(|e| Failure::from(e).into_response())?;
        Ok(AppScope {
            base: format!("/console/app/{}", app.id),
            app,
            session: operator.session,
            surface: Surface::Console,
            brand: "vow".into(),
        })
    }
}

/// The portal token's application, or a page saying the link no longer works.
async fn portal(state: &AppState, token: &str) -> Result<AppScope, Response> {
    let session = crate::portal::portal_session(state, token)
        .await
        .map_err(|e| Failure::from(e).into_response())?;
    let Some(session) = session else {
        return Err(Failure::new(
            StatusCode::UNAUTHORIZED,
            "This portal link has expired or was ended. Ask for a new one.",
        )
        .into_response());
    };
    let SessionScope::Portal(app_id) = session.scope else {
        return Err(Failure::new(StatusCode::UNAUTHORIZED, "Not a portal link.").into_response());
    };
    let app = find_app(state, &AppKey::Id(app_id))
        .await
        .map_err(|e| Failure::from(e).into_response())?;
    Ok(AppScope {
        base: format!("/portal/{token}"),
        app,
        session,
        surface: Surface::Portal,
        brand: state.settings.portal.brand_name.clone(),
    })
}
