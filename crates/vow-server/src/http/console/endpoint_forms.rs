//! The forms of an endpoint's page, in the console and the portal alike: enable or disable,
//! rotate the secret, send a test event, resend one message, and replay dead letters (a dry
//! run's count first, then confirm, then a progress page until the replayed deliveries have
//! settled). Each runs the same [`crate::actions`] value as its API route, after the CSRF
//! check, and sends the browser back to a page (post, redirect, get).

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::{Deserialize, Serialize};
use std::future::Future;

use vow_core::{EndpointId, EventTypeName, ReplayId};
use vow_store::queue::{DeliveryStats, ReplayFilter, StatsFilter};
use vow_store::Endpoint;

use super::endpoints::{EndpointPath, Notice};
use super::pages::form_time;
use super::scope::AppScope;
use super::view::{render, Failure, PageResult};
use crate::actions;
use crate::actions::endpoint::{set_disabled, Example, Rotation};
use crate::actions::replay::Replay;
use crate::actions::resend::Resend;
use crate::error::{ApiError, ApiResult};
use crate::http::api::keys::endpoint_key;
use crate::http::api::lookup::{find_endpoint_in, find_message};
use crate::state::AppState;

/// A form that carries only its CSRF token.
#[derive(Deserialize)]
pub struct Plain {
    /// Missing reads as empty, refused as any wrong token is.
    #[serde(default)]
    csrf: String,
}

impl Plain {
    /// The token the form carried.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// Checks the form's token and loads the endpoint the path names within the scope's app.
async fn checked(
    state: &AppState,
    scope: &AppScope,
    endpoint_id: &str,
    csrf: &str,
    headers: &HeaderMap,
) -> Result<Endpoint, Response> {
    scope
        .check(csrf, headers)
        .map_err(IntoResponse::into_response)?;
    let key = endpoint_key(endpoint_id).map_err(|e| Failure::from(e).into_response())?;
    find_endpoint_in(state, scope.app.id, &key)
        .await
        .map_err(|e| Failure::from(e).into_response())
}

/// Back to the endpoint's page, saying what happened.
fn back(scope: &AppScope, endpoint: EndpointId, notice: Notice) -> Response {
    let query = serde_html_form::to_string([("notice", notice)]).unwrap_or_default();
    let to = format!("{}/endpoint/{endpoint}?{query}", scope.base);
    Redirect::to(&to).into_response()
}

/// A form's post on an endpoint: checks the form, loads the endpoint, runs `act` on it and
/// sends the browser back to the endpoint's page with the notice `act` returns (or shows why
/// it failed).
async fn on_endpoint<Fut>(
    state: &AppState,
    scope: &AppScope,
    endpoint_id: &str,
    (csrf, headers): (&str, &HeaderMap),
    act: impl FnOnce(Endpoint) -> Fut,
) -> Response
where
    Fut: Future<Output = ApiResult<Notice>>,
{
    let endpoint = match checked(state, scope, endpoint_id, csrf, headers).await {
        Ok(e) => e,
        Err(refused) => return refused,
    };
    let id = endpoint.id;
    match act(endpoint).await {
        Ok(notice) => back(scope, id, notice),
        Err(e) => Failure::from(e).into_response(),
    }
}

/// The enable/disable form.
#[derive(Deserialize)]
pub struct StateForm {
    #[serde(default)]
    csrf: String,
    /// `true` to disable, `false` to enable.
    disabled: bool,
}

/// `POST …/endpoint/{id}/state`: enables or disables the endpoint.
pub async fn set_state(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<EndpointPath>,
    headers: HeaderMap,
    Form(form): Form<StateForm>,
) -> Response {
    let (state, scope, form, path) = (&state, &scope, &form, &path);
    let form_of = (form.csrf.as_str(), &headers);
    on_endpoint(
        state,
        scope,
        &path.endpoint_id,
        form_of,
        |endpoint| async move {
            set_disabled(state, endpoint, form.disabled).await?;
            Ok(if form.disabled {
                Notice::Disabled
            } else {
                Notice::Enabled
            })
        },
    )
    .await
}

/// `POST …/endpoint/{id}/rotate`: a fresh secret; the old one signs for the configured grace.
pub async fn rotate(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<EndpointPath>,
    headers: HeaderMap,
    Form(form): Form<Plain>,
) -> Response {
    let (state, scope, form, path) = (&state, &scope, &form, &path);
    let form_of = (form.csrf.as_str(), &headers);
    on_endpoint(
        state,
        scope,
        &path.endpoint_id,
        form_of,
        |endpoint| async move {
            let rotation = Rotation::new(state, &endpoint, None, None).await?;
            actions::apply(state, rotation).await?;
            Ok(Notice::Rotated)
        },
    )
    .await
}

/// The test-event form.
#[derive(Deserialize)]
pub struct TestForm {
    #[serde(default)]
    csrf: String,
    event_type: String,
}

/// `POST …/endpoint/{id}/test`: the event type's first example, to this endpoint only.
pub async fn send_test(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<EndpointPath>,
    headers: HeaderMap,
    Form(form): Form<TestForm>,
) -> Response {
    let (state, scope, form, path) = (&state, &scope, &form, &path);
    let form_of = (form.csrf.as_str(), &headers);
    on_endpoint(
        state,
        scope,
        &path.endpoint_id,
        form_of,
        |endpoint| async move {
            let name = EventTypeName::parse(form.event_type.as_str()).map_err(|e| {
                ApiError::invalid(&["form", "event type"], e.to_string(), "value_error")
            })?;
            let at = ["form", "example"];
            let example = Example::new(state, scope.app.id, endpoint.id, &name, 0, &at).await?;
            actions::apply(state, example).await?;
            Ok(Notice::TestSent)
        },
    )
    .await
}

/// `{endpoint_id}` and `{msg_id}` of a resend's path.
#[derive(Deserialize)]
pub struct ResendPath {
    endpoint_id: String,
    msg_id: String,
}

/// `POST …/endpoint/{id}/resend/{msg_id}`: a new delivery of the message, due now.
pub async fn resend(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<ResendPath>,
    headers: HeaderMap,
    Form(form): Form<Plain>,
) -> Response {
    let (state, scope, form, path) = (&state, &scope, &form, &path);
    let form_of = (form.csrf.as_str(), &headers);
    on_endpoint(
        state,
        scope,
        &path.endpoint_id,
        form_of,
        |endpoint| async move {
            let resend = Resend {
                app: scope.app.id,
                msg: find_message(state, scope.app.id, &path.msg_id).await?,
                endpoint: endpoint.id,
                now: state.now(),
            };
            actions::apply(state, resend).await?;
            Ok(Notice::Resent)
        },
    )
    .await
}

/// The replay form's filter, as the browser sends it (`datetime-local` values, read as UTC)
/// and as the confirm and progress pages carry it on.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ReplayFields {
    #[serde(default)]
    since: String,
    #[serde(default)]
    until: String,
    #[serde(default)]
    event_type: String,
}

impl ReplayFields {
    /// The filter these fields say, checked as the API checks its own.
    fn filter(&self) -> Result<ReplayFilter, ApiError> {
        let filter = ReplayFilter {
            since: form_time("since", &self.since)?,
            until: form_time("until", &self.until)?,
            event_types: match self.event_type.trim() {
                "" => Vec::new(),
                t => vec![t.to_string()],
            },
            last_status: None,
        };
        Replay::filter("form", filter)
    }

    /// The fields as a query string, for the progress page's link.
    fn query(&self) -> String {
        serde_html_form::to_string(self).unwrap_or_default()
    }
}

/// The replay form: the filter, and whether the dry run's count was confirmed.
#[derive(Deserialize)]
pub struct ReplayForm {
    #[serde(default)]
    csrf: String,
    #[serde(flatten)]
    fields: ReplayFields,
    #[serde(default)]
    confirm: String,
}

#[derive(Template)]
#[template(path = "console/replay_confirm.html")]
struct ConfirmPage {
    scope: AppScope,
    endpoint: Endpoint,
    fields: ReplayFields,
    count: u64,
}

/// `POST …/endpoint/{id}/replay`: without `confirm`, a dry run, answered with the count and a
/// confirm form; with it, the replay, then the progress page.
pub async fn replay(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<EndpointPath>,
    headers: HeaderMap,
    Form(form): Form<ReplayForm>,
) -> Response {
    let endpoint = match checked(&state, &scope, &path.endpoint_id, &form.csrf, &headers).await {
        Ok(e) => e,
        Err(refused) => return refused,
    };
    let replay = match form.fields.filter() {
        Ok(filter) => Replay {
            app: scope.app.id,
            endpoint: endpoint.id,
            id: ReplayId::new(),
            filter,
            now: state.now(),
        },
        Err(e) => return Failure::from(e).into_response(),
    };
    if form.confirm.is_empty() {
        return match replay.count(&state).await {
            Ok(count) => {
                let fields = form.fields;
                let page = ConfirmPage {
                    scope,
                    endpoint,
                    fields,
                    count,
                };
                render(StatusCode::OK, &page)
            }
            Err(e) => Failure::from(e).into_response(),
        };
    }
    let id = replay.id;
    match actions::apply(&state, replay).await {
        Ok(requeued) => Redirect::to(&format!(
            "{}/endpoint/{}/replay?requeued={requeued}&replay={id}&{}",
            scope.base,
            endpoint.id,
            form.fields.query()
        ))
        .into_response(),
        Err(e) => Failure::from(e).into_response(),
    }
}

/// The progress page's query: what was replayed (the replay's id, and its filter to show), and
/// how many were requeued.
#[derive(Deserialize)]
pub struct ProgressQuery {
    #[serde(default)]
    requeued: u64,
    replay: Option<ReplayId>,
    #[serde(flatten)]
    fields: ReplayFields,
}

#[derive(Template)]
#[template(path = "console/replay_progress.html")]
struct ProgressPage {
    scope: AppScope,
    endpoint: Endpoint,
    fields: ReplayFields,
    requeued: u64,
    stats: DeliveryStats,
}

impl ProgressPage {
    /// Deliveries of the range still waiting or in flight.
    fn outstanding(&self) -> u64 {
        self.stats.pending + self.stats.sending
    }
}

/// `GET …/endpoint/{id}/replay?requeued=N&replay=rpl_…&…`: how the deliveries the replay
/// requeued stand (without `replay`, all of the range's); the page reloads itself every two
/// seconds until none is waiting or in flight.
pub async fn progress(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<EndpointPath>,
    Query(query): Query<ProgressQuery>,
) -> PageResult {
    let app = scope.app.id;
    let endpoint = find_endpoint_in(&state, app, &endpoint_key(&path.endpoint_id)?).await?;
    let filter = query.fields.filter()?;
    let filter = StatsFilter {
        since: filter.since,
        until: filter.until,
        replay: query.replay,
    };
    let stats = (state.queue)
        .endpoint_stats(app, endpoint.id, &filter, state.now())
        .await?;
    let page = ProgressPage {
        scope,
        endpoint,
        fields: query.fields,
        requeued: query.requeued,
        stats,
    };
    Ok(render(StatusCode::OK, &page))
}
