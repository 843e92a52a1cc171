//! Loading what a path names, or 404: the application, endpoint, message and source lookups the
//! API modules share; and the destination of a source a body names, or 422.

use vow_core::{AppId, DestinationId, EndpointId, MessageId};
use vow_store::inbound::Source;
use vow_store::{AppKey, Application, Endpoint, EndpointKey};

use super::keys::{app_key, endpoint_key, id_error, message_key, source_key};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Loads the application a path names, or 404.
pub async fn find_app(state: &AppState, key: &AppKey) -> ApiResult<Application> {
    state
        .store
        .get_application(key)
        .await?
        .ok_or_else(|| ApiError::not_found("Application"))
}

/// Resolves `{app_id}` to the application's id, or 404.
pub async fn resolve_app(state: &AppState, raw: &str) -> ApiResult<AppId> {
    Ok(find_app(state, &app_key(raw)?).await?.id)
}

/// Loads the endpoint `key` names within `app`, or 404.
pub async fn find_endpoint_in(
    state: &AppState,
    app: AppId,
    key: &EndpointKey,
) -> ApiResult<Endpoint> {
    state
        .store
        .get_endpoint(app, key)
        .await?
        .ok_or_else(|| ApiError::not_found("Endpoint"))
}

/// Resolves `{msg_id}` (id or eventId) within the application.
pub async fn find_message(state: &AppState, app: AppId, raw: &str) -> ApiResult<MessageId> {
    let key = message_key(raw)?;
    match state.store.get_message(app, &key).await? {
        Some(m) => Ok(m.id),
        None => Err(ApiError::not_found("Message")),
    }
}

/// Resolves `{endpoint_id}` (id or uid) within the application.
pub async fn find_endpoint(state: &AppState, app: AppId, raw: &str) -> ApiResult<EndpointId> {
    let key = endpoint_key(raw)?;
    Ok(find_endpoint_in(state, app, &key).await?.id)
}

/// Loads the source `{source_id}` names, or 404.
pub async fn find_source(state: &AppState, raw: &str) -> ApiResult<Source> {
    state
        .inbound
        .get_source(source_key(raw)?)
        .await?
        .ok_or_else(|| ApiError::not_found("Source"))
}

/// The `destination` a body names, checked against `source`'s destinations (422 when it is
/// not one of them).
pub fn destination_of(source: &Source, raw: Option<&str>) -> ApiResult<Option<DestinationId>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let at = ["body", "destination"];
    let id = DestinationId::parse(raw).map_err(|e| id_error(&at, e))?;
    if !source.fields.destinations.iter().any(|d| d.id == id) {
        let msg = "is not a destination of this source";
        return Err(ApiError::invalid(&at, msg, "value_error.destination"));
    }
    Ok(Some(id))
}

/// [`destination_of`] the source `{source_id}` names, loaded (404 when absent) only when a
/// destination is named.
pub async fn find_destination(
    state: &AppState,
    source_id: &str,
    raw: Option<&str>,
) -> ApiResult<Option<DestinationId>> {
    match raw {
        None => Ok(None),
        Some(_) => destination_of(&find_source(state, source_id).await?, raw),
    }
}
