//! Rendering a page's template into a response.

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use crate::error::ApiError;

/// Renders `page` with `status`; a template that fails to render is a 500.
pub fn render(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => ApiError::Internal(Box::new(e)).into_response(),
    }
}
