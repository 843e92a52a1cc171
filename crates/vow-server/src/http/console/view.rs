//! Rendering a page's template into a response, and [`Failure`]: a refusal or an error shown
//! as a page (the API's errors are JSON; a person gets a sentence).

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use vow_store::StoreError;

use crate::error::ApiError;

/// Renders `page` with `status`; a template that fails to render is a 500.
pub fn render(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => ApiError::Internal(Box::new(e)).into_response(),
    }
}

/// What a page answers when it cannot show what was asked: a status and one plain sentence.
#[derive(Debug, Template)]
#[template(path = "console/failure.html")]
pub struct Failure {
    status: StatusCode,
    message: String,
}

/// What a page handler returns.
pub type PageResult = Result<Response, Failure>;

impl Failure {
    /// The status it answers with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What it says.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// A failure page with `status` saying `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        let status = e.status();
        let message = match &e {
            ApiError::Validation(items) => items
                .iter()
                .map(|i| format!("{}: {}", i.loc.last().map_or("", String::as_str), i.msg))
                .collect::<Vec<_>>()
                .join("; "),
            ApiError::Unavailable(_) => {
                tracing::warn!(error = %e, "a console page found the store unavailable");
                "The store is unavailable right now; try again in a moment.".into()
            }
            _ if status.is_server_error() => {
                tracing::error!(error = ?e, "a console page failed");
                "Something went wrong on vow's side; the log has the details.".into()
            }
            _ => e.to_string(),
        };
        Self { status, message }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::from(ApiError::from(e))
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        render(self.status, &self)
    }
}
