//! App portal tokens: what an operator hands a customer so that they manage their own
//! application's endpoints (Svix's App Portal).
//!
//! A token is `appsk_` and 256 random bits. The store keeps only its SHA-256, as a
//! [`Session`] scoped to one application ([`SessionScope::Portal`]), with a CSRF token for the
//! portal pages' forms and whether it is read-only; it ends when it expires, at logout, or with
//! its application. The same token works as a bearer token on that application's API routes
//! (`crate::http::principal`) and in the portal pages' link; both find it with
//! [`portal_session`].

use chrono::{DateTime, Utc};
use vow_core::AppId;
use vow_store::session::{Session, SessionScope};

use crate::auth::{random_secret, TokenHash};
use crate::error::ApiResult;
use crate::state::AppState;

/// What every portal token starts with; no other credential does.
pub const TOKEN_PREFIX: &str = "appsk_";

/// The live portal session `token` opens: `None` when it is not a portal token, unknown,
/// expired or ended. A console session's secret opens nothing here.
pub async fn portal_session(state: &AppState, token: &str) -> ApiResult<Option<Session>> {
    if !token.starts_with(TOKEN_PREFIX) {
        return Ok(None);
    }
    let hash = TokenHash::of(token).to_hex();
    let session = state.store.session(&hash, state.now()).await?;
    Ok(session.filter(|s| matches!(s.scope, SessionScope::Portal(_))))
}

/// A new token for `app`'s portal, lasting until `expires_at`; only its hash is stored.
/// 404 when the application does not exist (or was deleted meanwhile).
pub async fn issue_token(
    state: &AppState,
    app: AppId,
    read_only: bool,
    expires_at: DateTime<Utc>,
) -> ApiResult<String> {
    let token = format!("{TOKEN_PREFIX}{}", random_secret());
    let session = Session {
        id_hash: TokenHash::of(&token).to_hex(),
        scope: SessionScope::Portal(app),
        csrf: random_secret(),
        created_at: state.now(),
        expires_at,
        read_only,
    };
    state.store.create_session(session).await?;
    Ok(token)
}

/// The portal page's link for `token` under `base` (a URL without a trailing slash).
pub fn portal_url(base: &str, token: &str) -> String {
    format!("{base}/portal/{token}")
}

/// `path` with any portal token in it masked, for logs: the portal pages carry their token in
/// the path.
pub fn redact_path(path: &str) -> std::borrow::Cow<'_, str> {
    if !path.contains(TOKEN_PREFIX) {
        return path.into();
    }
    let masked: Vec<&str> = path
        .split('/')
        .map(|segment| {
            if segment.starts_with(TOKEN_PREFIX) {
                "appsk_<redacted>"
            } else {
                segment
            }
        })
        .collect();
    masked.join("/").into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_logged_paths() {
        assert_eq!(
            portal_url("https://h.example/vow", "appsk_x"),
            "https://h.example/vow/portal/appsk_x"
        );
        assert_eq!(
            redact_path("/portal/appsk_s3cret/endpoint"),
            "/portal/appsk_<redacted>/endpoint"
        );
        assert_eq!(redact_path("/api/v1/app"), "/api/v1/app");
    }
}
