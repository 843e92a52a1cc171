//! Rendering a page's template into a response, [`Failure`]: a refusal or an error shown as a
//! page (the API's errors are JSON; a person gets a sentence), and how pages write numbers.

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

/// `n` with its thousands grouped: `1,234,567`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A share as a percentage to a tenth: `97.5 %`.
pub fn percent(share: f64) -> String {
    format!("{:.1} %", 100.0 * share)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_by_thousands_and_shares_shown_as_percentages() {
        let shown: Vec<String> = [0, 999, 1_000, 100_000, 1_234_567].map(grouped).to_vec();
        assert_eq!(shown, ["0", "999", "1,000", "100,000", "1,234,567"]);
        assert_eq!(percent(0.6), "60.0 %");
        assert_eq!(percent(2.0 / 3.0), "66.7 %");
    }
}
