//! The console's inbound pages: the sources, one source's verification outcomes (refusals by
//! reason, the rejection log) and events by state, and one event, where a quarantined event is
//! reviewed beside the payload that holds its id (both shown, their JSON differences listed,
//! digests always) and released or discarded, and an uncertain event is settled (it took
//! effect, or forward it again), each through the same action as the API's.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;
use std::future::Future;

use vow_core::{InboundEventId, SourceId};
use vow_store::inbound::processing::Resolution;
use vow_store::inbound::{
    InboundEvent, InboundFilter, InboundState, Rejection, RejectionCount, Source, StoredInbound,
};
use vow_store::{Order, Seek};

use super::diff::{changes, Change};
use super::endpoint_forms::Plain;
use super::pages::{keyset_page, Cursor, PAGE_SIZE};
use super::session::Operator;
use super::view::{render, Failure, PageResult};
use crate::actions;
use crate::actions::inbound::{Resolve, Settle};
use crate::error::ApiResult;
use crate::http::api::keys::source_key;
use crate::http::api::lookup::find_source;
use crate::http::api::source_event::event_key;
use crate::state::AppState;

#[derive(Template)]
#[template(path = "console/sources.html")]
struct SourcesPage {
    csrf: String,
    sources: Vec<Source>,
    next: Option<String>,
}

/// Every inbound source, oldest first.
pub async fn sources(
    State(state): State<AppState>,
    operator: Operator,
    Query(cursor): Query<Cursor>,
) -> PageResult {
    let rows = state.inbound.list_sources(&cursor.seek()).await?;
    let (sources, next) = cursor.page(rows, |s| s.id.to_string());
    let page = SourcesPage {
        csrf: operator.session.csrf,
        sources,
        next,
    };
    Ok(render(StatusCode::OK, &page))
}

/// A source page's query: which state's events, and where their list starts.
#[derive(Deserialize)]
pub struct SourceQuery {
    state: Option<String>,
    after: Option<String>,
}

#[derive(Template)]
#[template(path = "console/source.html")]
struct SourcePage {
    csrf: String,
    source: Source,
    counts: Vec<RejectionCount>,
    rejections: Vec<Rejection>,
    shown: Option<InboundState>,
    states: &'static [InboundState],
    events: Vec<InboundEvent>,
    next: Option<String>,
}

impl SourcePage {
    fn refused(&self) -> u64 {
        self.counts.iter().map(|c| c.count).sum()
    }
}

/// One source: refusals by reason and the newest of them, and its events (newest first,
/// optionally of one state).
pub async fn source(
    State(state): State<AppState>,
    operator: Operator,
    Path(source_id): Path<String>,
    Query(query): Query<SourceQuery>,
) -> PageResult {
    let source = find_source(&state, &source_id).await?;
    let shown = query
        .state
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|s| {
            InboundState::parse(s).ok_or_else(|| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    format!("{s:?} is not an event state"),
                )
            })
        })
        .transpose()?;
    let counts = state.inbound.rejection_counts(source.id).await?;
    let newest = Seek::for_iterator(None, Order::Descending, 20);
    let rejections = state.inbound.list_rejections(source.id, &newest).await?;
    let (rejections, _) = keyset_page(rejections, &newest, Order::Descending, |r| r.id.to_string());
    let after = query
        .after
        .as_deref()
        .filter(|a| InboundEventId::parse(a).is_ok());
    let seek = Seek::for_iterator(after, Order::Descending, PAGE_SIZE);
    let filter = InboundFilter { state: shown };
    let rows = (state.inbound)
        .list_inbound_events(source.id, &filter, &seek)
        .await?;
    let (events, next) = keyset_page(rows, &seek, Order::Descending, |e| e.id.to_string());
    let page = SourcePage {
        csrf: operator.session.csrf,
        source,
        counts,
        rejections,
        shown,
        states: &InboundState::ALL,
        events,
        next,
    };
    Ok(render(StatusCode::OK, &page))
}

/// `{source_id}` and `{event_id}` of an event page's path.
#[derive(Deserialize)]
pub struct EventPath {
    source_id: String,
    event_id: String,
}

/// A stored payload as the review shows it.
struct Shown {
    stored: StoredInbound,
    /// The body as text, when it is UTF-8 (pretty-printed when JSON).
    text: Option<String>,
    json: Option<serde_json::Value>,
}

impl Shown {
    fn of(stored: StoredInbound) -> Self {
        let bytes = stored.content.as_ref().map(|c| c.payload.as_slice());
        let json = bytes.and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok());
        let text = match &json {
            Some(v) => serde_json::to_string_pretty(v).ok(),
            None => bytes.and_then(|b| std::str::from_utf8(b).ok().map(str::to_string)),
        };
        Self { stored, text, json }
    }
}

#[derive(Template)]
#[template(path = "console/inbound_event.html")]
struct EventPage {
    csrf: String,
    source: Source,
    event: Shown,
    /// For a quarantined event: the event holding its id.
    held: Option<Shown>,
    /// Their JSON differences, when both are JSON.
    differences: Option<Vec<Change>>,
}

/// One inbound event; a quarantined one beside the event that holds its id.
pub async fn event(
    State(state): State<AppState>,
    operator: Operator,
    Path(path): Path<EventPath>,
) -> PageResult {
    let source = find_source(&state, &path.source_id).await?;
    let id = event_key(&path.event_id)?;
    let not_found = || Failure::new(StatusCode::NOT_FOUND, "No such inbound event.");
    let stored = (state.inbound.get_inbound_event(source.id, id).await?).ok_or_else(not_found)?;
    let held = match stored.event.conflicts_with {
        Some(holder) => state.inbound.get_inbound_event(source.id, holder).await?,
        None => None,
    };
    let event = Shown::of(stored);
    let held = held.map(Shown::of);
    let differences = match (&held, &event) {
        (Some(h), e) => h
            .json
            .as_ref()
            .zip(e.json.as_ref())
            .map(|(l, r)| changes(l, r)),
        _ => None,
    };
    let page = EventPage {
        csrf: operator.session.csrf,
        source,
        event,
        held,
        differences,
    };
    Ok(render(StatusCode::OK, &page))
}

/// A form's post on an inbound event: checks the form, runs `act` on the event's ids, and sends
/// the browser back to the event's page (or shows why it failed).
async fn on_event<Fut>(
    operator: &Operator,
    path: &EventPath,
    (csrf, headers): (&str, &HeaderMap),
    act: impl FnOnce(SourceId, InboundEventId) -> Fut,
) -> Response
where
    Fut: Future<Output = ApiResult<InboundEvent>>,
{
    if let Err(forged) = super::csrf::check(&operator.session, csrf, headers) {
        return forged.into_response();
    }
    let done = async {
        let (source, event) = (source_key(&path.source_id)?, event_key(&path.event_id)?);
        act(source, event).await
    };
    match done.await {
        Ok(e) => {
            Redirect::to(&format!("/console/source/{}/event/{}", e.source_id, e.id)).into_response()
        }
        Err(e) => Failure::from(e).into_response(),
    }
}

/// `POST /console/source/{id}/event/{id}/release`.
pub async fn release(
    state: State<AppState>,
    operator: Operator,
    path: Path<EventPath>,
    headers: HeaderMap,
    form: Form<Plain>,
) -> Response {
    decide(state, operator, path, headers, form, InboundState::Received).await
}

/// `POST /console/source/{id}/event/{id}/discard`.
pub async fn discard(
    state: State<AppState>,
    operator: Operator,
    path: Path<EventPath>,
    headers: HeaderMap,
    form: Form<Plain>,
) -> Response {
    decide(
        state,
        operator,
        path,
        headers,
        form,
        InboundState::Discarded,
    )
    .await
}

async fn decide(
    State(state): State<AppState>,
    operator: Operator,
    Path(path): Path<EventPath>,
    headers: HeaderMap,
    Form(form): Form<Plain>,
    to: InboundState,
) -> Response {
    let state = &state;
    on_event(
        &operator,
        &path,
        (form.csrf(), &headers),
        |source, event| async move {
            actions::apply(state, Resolve::new(state, source, event, to)).await
        },
    )
    .await
}

/// The settle form: `completed` (it took effect) or `retry` (forward it again).
#[derive(Deserialize)]
pub struct SettleForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    outcome: String,
}

/// `POST /console/source/{id}/event/{id}/settle`: an uncertain event's destinations settled.
pub async fn settle(
    State(state): State<AppState>,
    operator: Operator,
    Path(path): Path<EventPath>,
    headers: HeaderMap,
    Form(form): Form<SettleForm>,
) -> Response {
    let resolution = match form.outcome.as_str() {
        "completed" => Resolution::Completed,
        "retry" => Resolution::Retry,
        other => {
            let msg = format!("{other:?} is neither \"completed\" nor \"retry\"");
            return Failure::new(StatusCode::UNPROCESSABLE_ENTITY, msg).into_response();
        }
    };
    let state = &state;
    on_event(
        &operator,
        &path,
        (&form.csrf, &headers),
        |source, event| async move {
            let settle = Settle::new(state, source, event, resolution, None);
            Ok(actions::apply(state, settle).await?.event)
        },
    )
    .await
}
