//! Cross-site request forgery: every state-changing console form carries its session's token,
//! compared in constant time, and a browser's `Origin`, when it sends one, must be this host.
//! (The `SameSite=Strict` cookie already keeps other sites' requests logged out; these checks
//! hold even where a browser ignores it.)

use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;
use vow_store::session::Session;

use super::view::Failure;

/// A form refused as forged: 403, saying why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forged(pub &'static str);

impl IntoResponse for Forged {
    fn into_response(self) -> Response {
        Failure::new(StatusCode::FORBIDDEN, self.0).into_response()
    }
}

/// Refuses a form whose token is not `session`'s, or that came from another origin.
pub fn check(session: &Session, token: &str, headers: &HeaderMap) -> Result<(), Forged> {
    same_origin(headers)?;
    if bool::from(token.as_bytes().ct_eq(session.csrf.as_bytes())) {
        Ok(())
    } else {
        Err(Forged(
            "the form's CSRF token is missing or not this session's; reload the page",
        ))
    }
}

/// Refuses a request whose `Origin` names another host than the one it was sent to.
pub fn same_origin(headers: &HeaderMap) -> Result<(), Forged> {
    let Some(origin) = headers.get(ORIGIN) else {
        return Ok(());
    };
    let host = headers.get(HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest);
    match (origin_host, host) {
        (Some(o), Some(h)) if o.eq_ignore_ascii_case(h) => Ok(()),
        _ => Err(Forged("the form was posted from another site")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use vow_store::session::SessionScope;

    fn session() -> Session {
        let t = chrono::DateTime::from_timestamp(0, 0).expect("a time");
        Session {
            id_hash: "h".into(),
            scope: SessionScope::Console,
            csrf: "the-token".into(),
            created_at: t,
            expires_at: t,
            read_only: false,
        }
    }

    fn headers(origin: Option<&'static str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("vow.example:8071"));
        if let Some(o) = origin {
            h.insert(ORIGIN, HeaderValue::from_static(o));
        }
        h
    }

    #[test]
    fn the_sessions_token_from_this_origin_passes() {
        assert!(check(&session(), "the-token", &headers(None)).is_ok());
        assert!(check(
            &session(),
            "the-token",
            &headers(Some("http://vow.example:8071"))
        )
        .is_ok());
    }

    #[test]
    fn another_token_or_another_origin_is_refused() {
        for (token, origin) in [
            ("", None),
            ("the-toke", None),
            ("the-token", Some("https://evil.example")),
            ("the-token", Some("null")),
        ] {
            let refused = check(&session(), token, &headers(origin)).unwrap_err();
            assert_eq!(
                refused.into_response().status(),
                StatusCode::FORBIDDEN,
                "{token:?} {origin:?}"
            );
        }
    }
}
