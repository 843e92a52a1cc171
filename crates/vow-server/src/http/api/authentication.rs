//! Svix's `authentication` resource: `POST /api/v1/auth/app-portal-access/{app_id}` (the admin
//! hands a customer a link to their application's portal, and a token for its API routes) and
//! `POST /api/v1/auth/logout` (a portal token ends itself).
//!
//! The token is made and stored (by its hash only) by [`crate::portal`]; where it reaches is
//! [`crate::http::portal_scope`]. Neither route honours `Idempotency-Key` (the Svix SDKs send one
//! with every `POST`): a stored answer would keep the token in the clear, so a retried
//! app-portal-access issues another token (finding the application it may have created by its
//! uid), and a retried logout finds the token already ended (401).

use axum::extract::{Path, State};
use axum::http::header::{CACHE_CONTROL, HOST};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use chrono::Duration;
use serde::{Deserialize, Serialize};
use vow_store::ApplicationFields;

use super::application::{create_named, ApplicationIn};
use super::keys::app_key;
use super::lookup::find_app;
use super::validate::Problems;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::MaybeJson;
use crate::http::portal_scope::LOGOUT;
use crate::http::principal::Principal;
use crate::portal::{issue_token, portal_url};
use crate::state::{AppState, PortalSettings};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The authentication routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(app_portal_access))
        .routes(routes!(logout))
}

/// The shortest and longest `expiry` a request may ask for, seconds (Svix's bounds).
const EXPIRY_SECONDS: std::ops::RangeInclusive<i64> = 3600..=604_800;

/// `AppPortalAccessIn`. Svix's `capabilities` and `sessionId` are named so that a request
/// using them is refused rather than silently given more than it asked for.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppPortalAccessIn {
    application: Option<ApplicationIn>,
    feature_flags: Option<Vec<String>>,
    expiry: Option<i64>,
    read_only: Option<bool>,
    capabilities: Option<Vec<String>>,
    session_id: Option<String>,
}

/// `AppPortalAccessOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AppPortalAccessOut {
    url: String,
    token: String,
}

/// An access request, validated.
struct Access {
    application: Option<ApplicationFields>,
    read_only: bool,
    ttl: Duration,
}

impl AppPortalAccessIn {
    fn validate(self, settings: &PortalSettings) -> ApiResult<Access> {
        let mut p = Problems::default();
        p.require(
            self.feature_flags.as_ref().is_none_or(Vec::is_empty),
            &["body", "featureFlags"],
            "vow has no feature flags: leave featureFlags out",
            "value_error.unsupported",
        );
        p.require(
            self.expiry.is_none_or(|s| EXPIRY_SECONDS.contains(&s)),
            &["body", "expiry"],
            "must be between 3600 (1 hour) and 604800 (7 days) seconds",
            "value_error.number.range",
        );
        p.require(
            self.capabilities.is_none(),
            &["body", "capabilities"],
            "vow's portal tokens have every capability, or with readOnly only viewing: \
             leave capabilities out",
            "value_error.unsupported",
        );
        p.require(
            self.session_id.is_none(),
            &["body", "sessionId"],
            "vow does not group portal tokens by session: leave sessionId out",
            "value_error.unsupported",
        );
        let application = self
            .application
            .map(|a| a.validate(&["body", "application"]))
            .transpose()?;
        p.finish()?;
        let default_ttl = Duration::from_std(settings.token_ttl).unwrap_or(Duration::hours(24));
        Ok(Access {
            application,
            read_only: self.read_only.unwrap_or(false),
            ttl: self.expiry.map_or(default_ttl, Duration::seconds),
        })
    }
}

/// Get a token and URL for an application's portal.
#[utoipa::path(post, path = "/api/v1/auth/app-portal-access/{app_id}", tag = "Authentication", operation_id = "v1.authentication.app-portal-access", request_body = Option<AppPortalAccessIn>,
    responses((status = 200, description = "A portal token and URL for the application.", body = AppPortalAccessOut)))]
async fn app_portal_access(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    MaybeJson(body, _): MaybeJson<AppPortalAccessIn>,
) -> ApiResult<impl IntoResponse> {
    let settings = &state.settings.portal;
    let access = body.unwrap_or_default().validate(settings)?;
    let base = base_url(settings, &headers, &uri)?;
    let key = app_key(&app_id)?;
    let app = match (state.store.get_application(&key).await?, access.application) {
        (Some(app), _) => app,
        (None, None) => return Err(ApiError::not_found("Application")),
        (None, Some(fields)) => match create_named(&state, key.clone(), fields).await {
            // Another request created it meanwhile: this one gets a token to it as well.
            Err(ApiError::Conflict(_)) => find_app(&state, &key).await?,
            created => created?,
        },
    };
    let expires_at = state.now() + access.ttl;
    let token = issue_token(&state, app.id, access.read_only, expires_at).await?;
    let out = AppPortalAccessOut {
        url: portal_url(&base, &token),
        token,
    };
    Ok(([(CACHE_CONTROL, "no-store")], Json(out)))
}

/// The base of portal links: `public_url`, else `http://` and the request's host.
fn base_url(settings: &PortalSettings, headers: &HeaderMap, uri: &Uri) -> ApiResult<String> {
    if let Some(base) = &settings.public_url {
        return Ok(base.clone());
    }
    let host = match headers.get(HOST) {
        Some(h) => h.to_str().ok().map(str::to_owned),
        None => uri.authority().map(Authority::to_string),
    };
    host.filter(|h| !h.contains('@') && h.parse::<Authority>().is_ok())
        .map(|h| format!("http://{h}"))
        .ok_or_else(|| ApiError::BadRequest {
            code: "invalid_host",
            detail: "the request has no usable Host header to build the portal link from; \
                     set public_url"
                .into(),
        })
}

/// Revoke the portal token this request carries.
#[utoipa::path(post, path = LOGOUT, tag = "Authentication", operation_id = "logout_api_v1_auth_logout__post",
    responses((status = 204, description = "The portal token is revoked.")))]
async fn logout(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> ApiResult<StatusCode> {
    let Principal::Portal { token_hash, .. } = principal else {
        return Err(ApiError::Forbidden(
            "only an app portal token can be logged out".into(),
        ));
    };
    state.store.end_session(&token_hash).await?;
    Ok(StatusCode::NO_CONTENT)
}
