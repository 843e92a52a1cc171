//! The security headers of every console and portal response: a Content-Security-Policy that
//! allows only vow's own stylesheets and forms posting to vow (no script), no MIME sniffing, and
//! no caching of pages that show private data. The console is never framed; the portal may be
//! framed by the origins `portal_frame_ancestors` names. Neither sends a referrer to another
//! origin (the portal's links carry its token); `no-referrer` would make browsers send
//! `Origin: null` on the pages' own forms, which the CSRF check refuses.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

/// Everything but the framing rule: vow's own stylesheets and images, forms to vow, nothing
/// else.
const POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; \
                      form-action 'self'; base-uri 'none'";

/// The headers one surface sends.
#[derive(Debug, Clone)]
pub struct SecurityHeaders {
    policy: HeaderValue,
    frame_options: Option<HeaderValue>,
    referrer: HeaderValue,
}

impl SecurityHeaders {
    /// The console's: never framed.
    pub fn console() -> Arc<Self> {
        Arc::new(Self {
            policy: HeaderValue::from_static(concat!(
                "default-src 'none'; style-src 'self'; img-src 'self' data:; ",
                "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
            )),
            frame_options: Some(HeaderValue::from_static("DENY")),
            referrer: HeaderValue::from_static("same-origin"),
        })
    }

    /// The portal's: framed only by `frame_ancestors` (a CSP source list, checked by the
    /// config).
    pub fn portal(frame_ancestors: &str) -> Arc<Self> {
        let policy = format!("{POLICY}; frame-ancestors {frame_ancestors}");
        let policy = HeaderValue::from_str(&policy)
            .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"));
        let unframed = frame_ancestors.trim() == "'none'";
        Arc::new(Self {
            policy,
            frame_options: unframed.then(|| HeaderValue::from_static("DENY")),
            referrer: HeaderValue::from_static("same-origin"),
        })
    }
}

/// Adds `headers` to `next`'s response.
pub async fn secure(
    State(headers): State<Arc<SecurityHeaders>>,
    req: Request,
    next: Next,
) -> Response {
    let mut response = next.run(req).await;
    let out = response.headers_mut();
    out.insert(CONTENT_SECURITY_POLICY, headers.policy.clone());
    if let Some(deny) = &headers.frame_options {
        out.insert(X_FRAME_OPTIONS, deny.clone());
    }
    out.insert(REFERRER_POLICY, headers.referrer.clone());
    out.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    out.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_is_never_framed_and_the_portal_as_configured() {
        let console = SecurityHeaders::console();
        assert!(console
            .policy
            .to_str()
            .unwrap()
            .ends_with("frame-ancestors 'none'"));
        assert!(console.frame_options.is_some());
        let portal = SecurityHeaders::portal("https://app.example.com");
        let policy = portal.policy.to_str().unwrap();
        assert!(
            policy.ends_with("frame-ancestors https://app.example.com"),
            "{policy}"
        );
        assert!(policy.contains("default-src 'none'") && !policy.contains("script-src"));
        assert!(portal.frame_options.is_none());
        assert_eq!(portal.referrer, "same-origin");
        assert!(SecurityHeaders::portal("'none'").frame_options.is_some());
    }
}
