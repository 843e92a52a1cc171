//! Creating and editing an endpoint from the pages (the portal's customers subscribe their own
//! URLs): its URL, description and the event types it receives. The input is validated by the
//! API's own [`EndpointIn::validate`] and written by the same store calls as its routes.

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use vow_store::{Endpoint, EventType, Order, Seek};

use super::endpoints::{EndpointPath, Notice};
use super::scope::AppScope;
use super::view::{render, Failure, PageResult};
use crate::actions::{self, endpoint::CreateEndpoint};
use crate::error::ApiResult;
use crate::http::api::endpoint::EndpointIn;
use crate::http::api::keys::endpoint_key;
use crate::http::api::lookup::find_endpoint_in;
use crate::state::AppState;

/// Event types offered as checkboxes.
const EVENT_TYPES_OFFERED: usize = 200;

/// The endpoint form, as the browser sends it (checked event types repeat `event_types`).
#[derive(Debug, Default, Deserialize)]
pub struct EndpointForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    description: String,
    /// None checked: every event type.
    #[serde(default)]
    event_types: Vec<String>,
}

impl EndpointForm {
    /// The posted form; repeated `event_types` keys make the list (which `axum::Form` cannot
    /// read).
    fn read(body: &[u8]) -> Result<Self, Failure> {
        serde_html_form::from_bytes(body)
            .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, format!("unreadable form: {e}")))
    }

    fn event_types(&self) -> Option<Vec<String>> {
        Some(self.event_types.clone()).filter(|t| !t.is_empty())
    }
}

#[derive(Template)]
#[template(path = "console/endpoint_form.html")]
struct FormPage {
    scope: AppScope,
    /// `None`: a new endpoint.
    endpoint: Option<Endpoint>,
    url: String,
    description: String,
    checked: Vec<String>,
    event_types: Vec<EventType>,
    error: Option<String>,
}

impl FormPage {
    fn is_checked(&self, name: &str) -> bool {
        self.checked.iter().any(|c| c == name)
    }
}

async fn offered(state: &AppState) -> ApiResult<Vec<EventType>> {
    let seek = Seek::for_iterator(None, Order::Ascending, EVENT_TYPES_OFFERED);
    Ok(state.store.list_event_types(&seek, false).await?)
}

/// `GET …/endpoint/new`.
pub async fn new_form(State(state): State<AppState>, scope: AppScope) -> PageResult {
    let page = FormPage {
        scope,
        endpoint: None,
        url: String::new(),
        description: String::new(),
        checked: Vec::new(),
        event_types: offered(&state).await?,
        error: None,
    };
    Ok(render(StatusCode::OK, &page))
}

/// `GET …/endpoint/{id}/edit`.
pub async fn edit_form(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<EndpointPath>,
) -> PageResult {
    let key = endpoint_key(&path.endpoint_id)?;
    let endpoint = find_endpoint_in(&state, scope.app.id, &key).await?;
    let page = FormPage {
        scope,
        url: endpoint.fields.url.clone(),
        description: endpoint.fields.description.clone(),
        checked: endpoint.fields.event_types.clone().unwrap_or_default(),
        endpoint: Some(endpoint),
        event_types: offered(&state).await?,
        error: None,
    };
    Ok(render(StatusCode::OK, &page))
}

/// `POST …/endpoint`: a new endpoint; an invalid form comes back with the reason.
pub async fn create(
    State(state): State<AppState>,
    scope: AppScope,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = match EndpointForm::read(&body) {
        Ok(form) => form,
        Err(refused) => return refused.into_response(),
    };
    if let Err(forged) = scope.check(&form.csrf, &headers) {
        return forged.into_response();
    }
    let input = EndpointIn::from_form(
        form.url.clone(),
        form.description.clone(),
        form.event_types(),
    );
    let created = match input.validate() {
        Ok((fields, _)) => {
            let create = CreateEndpoint::new(&state, scope.app.id, fields, None);
            actions::apply(&state, create).await
        }
        Err(e) => Err(e),
    };
    match created {
        Ok(endpoint) => {
            Redirect::to(&format!("{}/endpoint/{}", scope.base, endpoint.id)).into_response()
        }
        Err(e) => refill(&state, scope, None, form, Failure::from(e)).await,
    }
}

/// `POST …/endpoint/{id}/edit`.
pub async fn update(
    State(state): State<AppState>,
    scope: AppScope,
    Path(path): Path<EndpointPath>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = match EndpointForm::read(&body) {
        Ok(form) => form,
        Err(refused) => return refused.into_response(),
    };
    if let Err(forged) = scope.check(&form.csrf, &headers) {
        return forged.into_response();
    }
    let found = async {
        let key = endpoint_key(&path.endpoint_id)?;
        find_endpoint_in(&state, scope.app.id, &key).await
    };
    let endpoint = match found.await {
        Ok(e) => e,
        Err(e) => return Failure::from(e).into_response(),
    };
    let input = EndpointIn::from_fields(endpoint.fields.clone()).with_form(
        form.url.clone(),
        form.description.clone(),
        form.event_types(),
    );
    let updated = match input.validate() {
        Ok((fields, _)) => (state.store)
            .update_endpoint(scope.app.id, endpoint.id, fields)
            .await
            .map_err(Into::into),
        Err(e) => Err(e),
    };
    match updated {
        Ok(e) => {
            let query =
                serde_html_form::to_string([("notice", Notice::Updated)]).unwrap_or_default();
            Redirect::to(&format!("{}/endpoint/{}?{query}", scope.base, e.id)).into_response()
        }
        Err(e) => refill(&state, scope, Some(endpoint), form, Failure::from(e)).await,
    }
}

/// The form again, as it was sent, with why it was refused (422).
async fn refill(
    state: &AppState,
    scope: AppScope,
    endpoint: Option<Endpoint>,
    form: EndpointForm,
    refused: Failure,
) -> Response {
    let event_types = match offered(state).await {
        Ok(t) => t,
        Err(e) => return Failure::from(e).into_response(),
    };
    let page = FormPage {
        scope,
        endpoint,
        url: form.url,
        description: form.description,
        checked: form.event_types,
        event_types,
        error: Some(refused.message().to_string()),
    };
    render(refused.status(), &page)
}
