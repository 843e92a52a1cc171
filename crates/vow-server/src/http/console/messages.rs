//! An application's messages, in the console and the portal alike: a search by message id or
//! `eventId` (straight to the message), or a list filtered by event type, channel and time
//! range (newest first, keyset pages); and one message's page with its payload, each
//! endpoint's delivery state and the attempts.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use serde::Deserialize;
use vow_core::MessageId;
use vow_store::queue::{Attempt, AttemptFilter, AttemptedDestination};
use vow_store::{Message, MessageFilter, Order, Seek};

use super::pages::{form_time, keyset_page, PAGE_SIZE};
use super::scope::AppScope;
use super::view::{render, PageResult};
use crate::error::ApiError;
use crate::http::api::keys::message_key;
use crate::http::api::message::checked_filter;
use crate::state::AppState;

/// The search form, as the browser sends it (empty fields are no filter).
#[derive(Debug, Default, Deserialize)]
pub struct Search {
    /// A message id or `eventId`.
    #[serde(default)]
    id: String,
    #[serde(default)]
    event_type: String,
    #[serde(default)]
    channel: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    until: String,
    /// Where the page starts (a message id).
    after: Option<String>,
}

impl Search {
    fn filter(&self) -> Result<MessageFilter, ApiError> {
        let some = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
        checked_filter(MessageFilter {
            event_types: some(&self.event_type).into_iter().collect(),
            channel: some(&self.channel),
            after: form_time("since", &self.since)?,
            before: form_time("until", &self.until)?,
        })
    }

    /// This search's query string without the page start, for the next page's link.
    fn query(&self) -> String {
        serde_html_form::to_string([
            ("event_type", &self.event_type),
            ("channel", &self.channel),
            ("since", &self.since),
            ("until", &self.until),
        ])
        .unwrap_or_default()
    }
}

#[derive(Template)]
#[template(path = "console/messages.html")]
struct MessagesPage {
    scope: AppScope,
    search: Search,
    /// Set when the id searched for matched nothing.
    missing: Option<String>,
    messages: Vec<Message>,
    next: Option<String>,
}

/// `GET …/messages`: the search form and its results.
pub async fn messages(
    State(state): State<AppState>,
    scope: AppScope,
    Query(search): Query<Search>,
) -> PageResult {
    let app = scope.app.id;
    let id = search.id.trim();
    let mut missing = None;
    if !id.is_empty() {
        let found = state.store.get_message(app, &message_key(id)?).await?;
        if let Some(m) = found {
            return Ok(Redirect::to(&format!("{}/msg/{}", scope.base, m.id)).into_response());
        }
        missing = Some(id.to_string());
    }
    let after = (search.after.as_deref()).filter(|a| MessageId::parse(a).is_ok());
    let seek = Seek::for_iterator(after, Order::Descending, PAGE_SIZE);
    let rows = (state.store)
        .list_messages(app, &search.filter()?, &seek)
        .await?;
    let (messages, next) = keyset_page(rows, &seek, Order::Descending, |m| m.id.to_string());
    let page = MessagesPage {
        scope,
        search,
        missing,
        messages,
        next,
    };
    Ok(render(StatusCode::OK, &page))
}

/// `{msg_id}` of a message page's path.
#[derive(Deserialize)]
pub struct MessagePath {
    msg_id: String,
}

#[derive(Template)]
#[template(path = "console/message.html")]
struct MessagePage {
    scope: AppScope,
    message: Message,
    /// The payload, pretty-printed when it is JSON.
    payload: Option<String>,
    destinations: Vec<AttemptedDestination>,
    attempts: Vec<Attempt>,
}

/// `GET …/msg/{msg_id}`: one message, where it went and how each attempt went.
pub async fn message(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<MessagePath>,
) -> PageResult {
    let app = scope.app.id;
    let key = message_key(&path.msg_id)?;
    let message = state.store.get_message(app, &key).await?;
    let message = message.ok_or_else(|| ApiError::not_found("Message"))?;
    let now = state.now();
    let first = Seek::for_iterator(None, Order::Ascending, PAGE_SIZE);
    let destinations = (state.queue)
        .list_attempted_destinations(app, message.id, now, &first)
        .await?;
    let filter = AttemptFilter {
        msg_id: Some(message.id),
        ..Default::default()
    };
    let newest = Seek::for_iterator(None, Order::Descending, PAGE_SIZE);
    let attempts = state.queue.list_attempts(app, &filter, &newest).await?;
    let payload = message.payload.as_deref().map(|raw| {
        serde_json::from_str::<serde_json::Value>(raw)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or_else(|| raw.to_string())
    });
    let page = MessagePage {
        scope,
        message,
        payload,
        destinations,
        attempts: attempts.into_iter().take(PAGE_SIZE).collect(),
    };
    Ok(render(StatusCode::OK, &page))
}
