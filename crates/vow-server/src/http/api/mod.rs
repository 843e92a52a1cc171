//! The Svix-compatible management API (`/api/v1/...`).
//!
//! One module per resource; each owns its routes, its DTOs (`…In`, `…Out`, `…Patch`) and its
//! handlers (`verb_noun`). What they share sits below them, in modules no resource module
//! imports back: path keys ([`keys`]), list parameters and the list response shape ([`list`]),
//! the field-level validation collector ([`validate`]) and the find-or-404 lookups ([`lookup`]).
//! This module only merges their routes.

pub mod application;
pub mod attempt;
pub mod attempted;
pub mod authentication;
pub mod endpoint;
pub mod event_type;
pub mod headers;
pub mod health;
pub mod keys;
pub mod list;
pub mod listen;
pub mod lookup;
pub mod message;
pub mod source;
pub mod source_event;
pub mod source_listen;
pub mod source_rejection;
pub mod source_replay;
pub mod source_work;
pub mod tail;
pub mod validate;

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

/// All authenticated routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(application::routes())
        .merge(attempt::routes())
        .merge(attempted::routes())
        .merge(authentication::routes())
        .merge(event_type::routes())
        .merge(endpoint::routes())
        .merge(listen::routes())
        .merge(message::routes())
        .merge(source::routes())
        .merge(source_event::routes())
        .merge(source_listen::routes())
        .merge(source_rejection::routes())
        .merge(source_replay::routes())
        .merge(source_work::routes())
        .merge(tail::routes())
}
