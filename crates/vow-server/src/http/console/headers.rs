//! The security headers of every console response: a Content-Security-Policy that allows only
//! the console's own stylesheet and forms posting to itself (no script, no framing), no MIME
//! sniffing, no referrer to other sites, and no caching of pages that show private data.

use axum::extract::Request;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

/// The console's policy: its own stylesheet and images, forms to itself, nothing else.
pub const POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; \
                          form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds the headers to `next`'s response.
pub async fn secure(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (CONTENT_SECURITY_POLICY, POLICY),
        (X_FRAME_OPTIONS, "DENY"),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (REFERRER_POLICY, "same-origin"),
        (CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}
