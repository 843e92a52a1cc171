//! The Svix-compatible management API (`/api/v1/...`).
//!
//! One module per resource; each owns its routes, its DTOs (`…In`, `…Out`, `…Patch`) and its
//! handlers (`verb_noun`). This module holds what they share: path keys, list parameters and the
//! list response shape, and a collector for field-level validation errors.

pub mod application;
pub mod attempt;
pub mod attempted;
pub mod endpoint;
pub mod event_type;
pub mod headers;
pub mod health;
pub mod message;
pub mod source;
pub mod source_event;
pub mod source_rejection;
pub mod source_work;

use axum::Router;
use serde::{Deserialize, Serialize};
use vow_core::{AppId, EndpointId, IdError, InvalidName, MessageId};
use vow_store::page::Page;
use vow_store::{AppKey, EndpointKey, MessageKey, Order, Seek};

use super::AppState;
use crate::error::{ApiError, ApiResult, ValidationItem};

/// All authenticated routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(application::routes())
        .merge(attempt::routes())
        .merge(attempted::routes())
        .merge(event_type::routes())
        .merge(endpoint::routes())
        .merge(message::routes())
        .merge(source::routes())
        .merge(source_event::routes())
        .merge(source_rejection::routes())
        .merge(source_work::routes())
}

/// Collects field errors so one response can name every bad field.
#[derive(Default)]
pub struct Problems(Vec<ValidationItem>);

impl Problems {
    /// Records `result`'s error at `loc`, returning the value when valid.
    pub fn check<T>(&mut self, loc: &[&str], result: Result<T, InvalidName>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.0.push(ValidationItem::new(loc, e.message, e.kind));
                None
            }
        }
    }

    /// Records a problem at `loc` when `ok` is false.
    pub fn require(&mut self, ok: bool, loc: &[&str], msg: &str, kind: &str) {
        if !ok {
            self.0.push(ValidationItem::new(loc, msg, kind));
        }
    }

    /// Records a problem when `text` holds a NUL character, which no store keeps faithfully.
    pub fn no_nul(&mut self, loc: &[&str], text: &str) {
        self.require(
            !text.contains('\0'),
            loc,
            "must not contain NUL characters",
            "value_error.str.nul",
        );
    }

    /// [`Problems::no_nul`] for every key and value of a metadata map.
    pub fn no_nul_in_map(
        &mut self,
        loc: &[&str],
        map: &std::collections::BTreeMap<String, String>,
    ) {
        for (k, v) in map {
            let at: Vec<&str> = loc.iter().copied().chain([k.as_str()]).collect();
            self.no_nul(&at, k);
            self.no_nul(&at, v);
        }
    }

    /// Ok when nothing was recorded, else 422 with every problem.
    pub fn finish(self) -> ApiResult<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Validation(self.0))
        }
    }
}

fn id_error(loc: &[&str], e: IdError) -> ApiError {
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

/// Refuses uids that would be read as ids in paths.
pub fn check_uid(problems: &mut Problems, loc: &[&str], uid: &str) -> Option<String> {
    let uid = problems.check(loc, vow_core::Uid::parse(uid))?;
    if vow_core::name::looks_like_an_id(uid.as_str()) {
        problems.require(
            false,
            loc,
            "must not have the form of a vow id",
            "value_error.uid",
        );
        return None;
    }
    Some(uid.into_string())
}

/// `limit`, `iterator` and `order`, as every list operation takes them.
#[derive(Debug, Deserialize)]
pub struct ListParams {
    limit: Option<u64>,
    iterator: Option<String>,
    order: Option<Ordering>,
}

/// Svix's `Ordering`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ordering {
    /// Oldest first.
    Ascending,
    /// Newest first.
    Descending,
}

const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 250;

impl ListParams {
    /// The order asked for, or `default`.
    pub fn order(&self, default: Order) -> Order {
        match self.order {
            None => default,
            Some(Ordering::Ascending) => Order::Ascending,
            Some(Ordering::Descending) => Order::Descending,
        }
    }

    /// The seek for this page; `check` validates the iterator's key (without its `-`).
    pub fn seek(
        &self,
        order: Order,
        check: impl Fn(&str) -> Result<(), IdError>,
    ) -> ApiResult<Seek> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
        if let Some(it) = &self.iterator {
            check(it.strip_prefix('-').unwrap_or(it))
                .map_err(|e| id_error(&["query", "iterator"], e))?;
        }
        Ok(Seek::for_iterator(self.iterator.as_deref(), order, limit))
    }
}

/// Svix's `ListResponse_…Out_`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResponse<T> {
    data: Vec<T>,
    done: bool,
    iterator: Option<String>,
    prev_iterator: Option<String>,
}

impl<T> From<Page<T>> for ListResponse<T> {
    fn from(p: Page<T>) -> Self {
        Self {
            data: p.data,
            done: p.done,
            iterator: p.iterator,
            prev_iterator: p.prev_iterator,
        }
    }
}

/// `metadata` maps: string values only (serde enforces the type).
pub type Metadata = std::collections::BTreeMap<String, String>;
