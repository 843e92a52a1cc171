//! Logging in and out of the console, and the session every page requires.
//!
//! Logging in with the admin token creates a [`Session`] in the store under the SHA-256 of a
//! fresh 256-bit secret; the browser holds the secret in an HttpOnly, `SameSite=Strict` cookie
//! (`Secure` when [`ConsoleSettings::secure_cookies`] says vow is served over TLS). The session
//! ends when it expires or at logout, on every node at once. A wrong token answers with a clear
//! message; repeated failures from one address are slowed ([`super::throttle`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use askama::Template;
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::header::{COOKIE, RETRY_AFTER, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Form, Router};
use serde::Deserialize;
use vow_store::session::{Session, SessionScope};

use super::csrf;
use super::throttle::Throttle;
use super::view::render;
use crate::auth::{random_secret, TokenHash};
use crate::error::ApiError;
use crate::state::{AppState, ConsoleSettings};

/// The session cookie's name.
pub const COOKIE_NAME: &str = "vow_console";

/// What the login form needs: the admin token's hash, the settings and the throttle.
#[derive(Debug, Clone)]
pub struct Login(Arc<LoginInner>);

#[derive(Debug)]
struct LoginInner {
    admin: TokenHash,
    settings: ConsoleSettings,
    throttle: Throttle,
}

impl Login {
    /// The login of a console checking tokens against `admin`.
    pub fn new(admin: TokenHash, settings: ConsoleSettings) -> Self {
        Self(Arc::new(LoginInner {
            admin,
            settings,
            throttle: Throttle::default(),
        }))
    }
}

/// A logged-in operator: the console session of the request's cookie. A request without one
/// is sent to the login page.
#[derive(Debug, Clone)]
pub struct Operator {
    /// The session.
    pub session: Session,
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Some(secret) = cookie(&parts.headers, COOKIE_NAME) else {
            return Err(Redirect::to("/console/login").into_response());
        };
        match state.store.session(&hash(secret), state.now()).await {
            Ok(Some(session)) if session.scope == SessionScope::Console => Ok(Operator { session }),
            Ok(_) => Err(Redirect::to("/console/login").into_response()),
            Err(e) => Err(ApiError::from(e).into_response()),
        }
    }
}

/// The login and logout routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console/login", get(login_page).post(log_in))
        .route("/console/logout", post(log_out))
}

#[derive(Template)]
#[template(path = "console/login.html")]
struct LoginPage {
    error: Option<String>,
}

async fn login_page() -> Response {
    render(StatusCode::OK, &LoginPage { error: None })
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

async fn log_in(
    State(state): State<AppState>,
    Extension(login): Extension<Login>,
    headers: HeaderMap,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    Form(form): Form<LoginForm>,
) -> Response {
    if let Err(forged) = csrf::same_origin(&headers) {
        return forged.into_response();
    }
    let address: Option<IpAddr> = peer.map(|Extension(ConnectInfo(a))| a.ip());
    let now = Instant::now();
    if let Some(wait) = login.0.throttle.wait(address, now) {
        return too_many(wait);
    }
    if !login.0.admin.matches(form.token.trim()) {
        let wait = login.0.throttle.failed(address, now);
        tracing::info!(?address, "console login refused: wrong token");
        let error = if wait.is_zero() {
            "That token is not the admin token.".to_string()
        } else {
            format!(
                "That token is not the admin token. Too many failures: wait {} s before trying again.",
                wait.as_secs()
            )
        };
        return render(StatusCode::UNAUTHORIZED, &LoginPage { error: Some(error) });
    }
    login.0.throttle.succeeded(address);
    let secret = random_secret();
    let created_at = state.now();
    let ttl = chrono::Duration::from_std(login.0.settings.session_ttl)
        .unwrap_or(chrono::Duration::hours(12));
    let session = Session {
        id_hash: hash(&secret),
        scope: SessionScope::Console,
        csrf: random_secret(),
        created_at,
        expires_at: created_at + ttl,
        read_only: false,
    };
    if let Err(e) = state.store.create_session(session).await {
        return ApiError::from(e).into_response();
    }
    let cookie = session_cookie(&secret, &login.0.settings);
    ([(SET_COOKIE, cookie)], Redirect::to("/console")).into_response()
}

#[derive(Deserialize)]
struct LogoutForm {
    /// Missing reads as empty, refused as any wrong token is.
    #[serde(default)]
    csrf: String,
}

async fn log_out(
    State(state): State<AppState>,
    Extension(login): Extension<Login>,
    operator: Operator,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Response {
    if let Err(forged) = csrf::check(&operator.session, &form.csrf, &headers) {
        return forged.into_response();
    }
    if let Err(e) = state.store.end_session(&operator.session.id_hash).await {
        return ApiError::from(e).into_response();
    }
    let cleared = cleared_cookie(&login.0.settings);
    ([(SET_COOKIE, cleared)], Redirect::to("/console/login")).into_response()
}

fn too_many(wait: Duration) -> Response {
    let secs = wait.as_secs().max(1);
    let page = LoginPage {
        error: Some(format!(
            "Too many failed logins from your address: wait {secs} s before trying again."
        )),
    };
    let mut response = render(StatusCode::TOO_MANY_REQUESTS, &page);
    response.headers_mut().insert(RETRY_AFTER, secs.into());
    response
}

/// The stored form of a session secret: its SHA-256, hex (as the admin token's hash).
pub fn hash(secret: &str) -> String {
    TokenHash::of(secret).to_hex()
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

fn session_cookie(secret: &str, settings: &ConsoleSettings) -> String {
    cookie_header(secret, settings.session_ttl.as_secs(), settings)
}

fn cleared_cookie(settings: &ConsoleSettings) -> String {
    cookie_header("", 0, settings)
}

/// `Set-Cookie` for the session cookie holding `value` for `max_age` seconds.
fn cookie_header(value: &str, max_age: u64, settings: &ConsoleSettings) -> String {
    let secure = if settings.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    format!("{COOKIE_NAME}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_session_cookie_is_read_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(COOKIE, HeaderValue::from_static("a=1; vow_console=s3cret"));
        headers.append(COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(cookie(&headers, COOKIE_NAME), Some("s3cret"));
        assert_eq!(cookie(&headers, "b"), Some("2"));
        assert_eq!(cookie(&headers, "missing"), None);
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_when_told() {
        let mut settings = ConsoleSettings::default();
        let c = session_cookie("x", &settings);
        assert!(
            c.contains("HttpOnly") && c.contains("SameSite=Strict"),
            "{c}"
        );
        assert!(!c.contains("Secure"), "{c}");
        settings.secure_cookies = true;
        assert!(session_cookie("x", &settings).ends_with("; Secure"));
        assert!(cleared_cookie(&settings).contains("Max-Age=0"));
    }

    #[test]
    fn secrets_are_random_and_stored_only_as_their_hash() {
        let (a, b) = (random_secret(), random_secret());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert_eq!(hash(&a).len(), 64);
        assert_ne!(hash(&a), a);
    }
}
