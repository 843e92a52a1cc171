//! Path keys: `{app_id}`, `{endpoint_id}`, `{msg_id}`, `{source_id}` and `{destination_id}` read into the store's
//! keys (an id, or a uid / eventId), with the 422 a malformed or wrong-kind id gets.

use vow_core::{AppId, DestinationId, EndpointId, IdError, MessageId, SourceId};
use vow_store::{AppKey, EndpointKey, MessageKey};

use crate::error::{ApiError, ApiResult};

pub(super) fn id_error(loc: &[&str], e: IdError) -> ApiError {
    ApiError::invalid(loc, e.to_string(), "value_error.id")
}

/// Checks a path segment against the Svix pattern for ids and uids.
fn path_name(loc: &str, raw: &str) -> ApiResult<()> {
    vow_core::Uid::parse(raw)
        .map(|_| ())
        .map_err(|e| ApiError::invalid(&["path", loc], e.message, e.kind))
}

/// `{app_id}`: an application id, or a uid. Another kind of id is refused by name.
pub fn app_key(raw: &str) -> ApiResult<AppKey> {
    path_name("app_id", raw)?;
    match AppId::parse(raw) {
        Ok(id) => Ok(AppKey::Id(id)),
        Err(e @ IdError::WrongPrefix { .. }) => Err(id_error(&["path", "app_id"], e)),
        Err(_) => Ok(AppKey::Uid(raw.to_string())),
    }
}

/// `{endpoint_id}`: an endpoint id or uid.
pub fn endpoint_key(raw: &str) -> ApiResult<EndpointKey> {
    path_name("endpoint_id", raw)?;
    match EndpointId::parse(raw) {
        Ok(id) => Ok(EndpointKey::Id(id)),
        Err(e @ IdError::WrongPrefix { .. }) => Err(id_error(&["path", "endpoint_id"], e)),
        Err(_) => Ok(EndpointKey::Uid(raw.to_string())),
    }
}

/// `{msg_id}`: a message id or the client's eventId.
pub fn message_key(raw: &str) -> ApiResult<MessageKey> {
    path_name("msg_id", raw)?;
    match MessageId::parse(raw) {
        Ok(id) => Ok(MessageKey::Id(id)),
        Err(e @ IdError::WrongPrefix { .. }) => Err(id_error(&["path", "msg_id"], e)),
        Err(_) => Ok(MessageKey::EventId(raw.to_string())),
    }
}

/// `{source_id}`: a source id, else 422.
pub fn source_key(raw: &str) -> ApiResult<SourceId> {
    SourceId::parse(raw).map_err(|e| id_error(&["path", "source_id"], e))
}

/// `{destination_id}`: a destination id, else 422.
pub fn destination_key(raw: &str) -> ApiResult<DestinationId> {
    DestinationId::parse(raw).map_err(|e| id_error(&["path", "destination_id"], e))
}
