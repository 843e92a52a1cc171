//! Who is calling the API: `Authorization: Bearer <token>` resolved to a [`Principal`], put in
//! the request's extensions for the handlers ([`authenticate`], the middleware of every
//! `/api/v1` route but health, and of `/metrics`).
//!
//! The admin token is checked first, against its hash in constant time, with no store read.
//! Any other token is an app portal token or nothing: one starting `appsk_` is looked up by its
//! hash ([`crate::portal::portal_session`]); unknown, expired, ended, or not a portal token (a
//! console session's secret) is 401. A portal token then passes only where
//! [`super::portal_scope`] lets it.

use axum::extract::{FromRequestParts, MatchedPath, RawPathParams, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use vow_core::AppId;
use vow_store::session::{Session, SessionScope};

use super::idempotency::route::APPLICATION;
use super::portal_scope;
use crate::auth::TokenHash;
use crate::error::{ApiError, ApiResult};
use crate::portal::portal_session;
use crate::state::AppState;

/// Who a request to the API is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The admin token: everything.
    Admin,
    /// An app portal token: one application's routes ([`super::portal_scope`]).
    Portal {
        /// The application it belongs to.
        app: AppId,
        /// Whether it may only read.
        read_only: bool,
        /// The SHA-256 of the token, hex: its session's key (to log it out).
        token_hash: String,
    },
}

impl Principal {
    /// The principal `Idempotency-Key` records are scoped to: a portal token's keys (always on
    /// its own application's routes) never meet the admin's.
    pub fn idempotency_scope(&self) -> &'static str {
        match self {
            Principal::Admin => "admin",
            Principal::Portal { .. } => "portal",
        }
    }

    fn portal(session: Session) -> Option<Self> {
        match session.scope {
            SessionScope::Portal(app) => Some(Principal::Portal {
                app,
                read_only: session.read_only,
                token_hash: session.id_hash,
            }),
            SessionScope::Console => None,
        }
    }
}

/// What [`authenticate`] checks tokens with: the admin token's hash and the store.
#[derive(Clone)]
pub struct Gate {
    admin: TokenHash,
    state: AppState,
}

impl Gate {
    /// A gate admitting `admin`'s token and the portal tokens in `state`'s store.
    pub fn new(admin: TokenHash, state: AppState) -> Self {
        Self { admin, state }
    }
}

/// Middleware: resolves the bearer token to a [`Principal`] (or 401), lets a portal token only
/// where it reaches (or 403 / 404), and hands the principal on in the request's extensions.
pub async fn authenticate(
    State(gate): State<Gate>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let principal = {
        let token = bearer(req.headers())?;
        if gate.admin.matches(token) {
            Principal::Admin
        } else {
            let session = portal_session(&gate.state, token).await?;
            session.and_then(Principal::portal).ok_or_else(invalid)?
        }
    };
    let mut req = admit(&gate.state, &principal, req).await?;
    req.extensions_mut().insert(principal);
    Ok(next.run(req).await)
}

/// Checks `req`'s route against a portal principal's reach; gives the request back.
async fn admit(state: &AppState, principal: &Principal, req: Request) -> ApiResult<Request> {
    let Principal::Portal { app, read_only, .. } = principal else {
        return Ok(req);
    };
    let (mut parts, body) = req.into_parts();
    let template = parts
        .extensions
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
        .unwrap_or_default();
    let params = RawPathParams::from_request_parts(&mut parts, state)
        .await
        .map_err(|e| ApiError::Internal(e.body_text().into()))?;
    let app_param = params
        .iter()
        .find_map(|(k, v)| (k == APPLICATION).then_some(v));
    portal_scope::admit(state, *app, *read_only, &parts.method, &template, app_param).await?;
    Ok(Request::from_parts(parts, body))
}

fn invalid() -> ApiError {
    ApiError::Unauthorized("invalid token".into())
}

/// The token of `Authorization: Bearer <token>`, or 401 naming what is wrong.
fn bearer(headers: &HeaderMap) -> ApiResult<&str> {
    let header = headers
        .get(AUTHORIZATION)
        .ok_or_else(|| ApiError::Unauthorized("missing Authorization header".into()))?;
    header
        .to_str()
        .ok()
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .ok_or_else(|| {
            ApiError::Unauthorized("Authorization header must be `Bearer <token>`".into())
        })
}
