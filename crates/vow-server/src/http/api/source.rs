//! Sources of inbound webhooks: `/api/v1/source` and `/api/v1/source/{source_id}` (issue 5,
//! ADR 7), and `/api/v1/source/{source_id}/secret`, the secrets vow signs forwarded events with.
//!
//! A source names its provider's scheme (`Scheme::as_str` names, or `hmac` with its settings),
//! the provider's secrets (several during a rotation; write-only: never returned), the
//! tolerance for signed timestamps, where the event id and the account are when not where the
//! provider documents them, optional version and entity pointers, the replay guard's window
//! (`replayWindowSecs`: absent or null = the scheme's default, 0 = off; answers say what the
//! scheme guarantees in `replayProtection`, see `http::inbound::replay`), and its destinations. Each
//! source gets an ingest path (`/in/{id}`) and, in single-source answers only, an unguessable
//! token path (`/in/t/{token}`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use chrono::{DateTime, Utc};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use vow_core::{DestinationId, EndpointUrl, Patch, SourceId};
use vow_signature::provider::DEFAULT_TOLERANCE_SECS;
use vow_store::inbound::{Destination, HmacSettings, Locator, NewSource, Source, SourceFields};
use vow_store::page::Page;
use vow_store::Order;
use vow_store::Store;

use super::keys::source_key;
use super::list::{ListParams, ListResponse};
use super::lookup::find_source;
use super::validate::{check_secret, Problems};
use crate::error::ApiResult;
use crate::http::extract::{ValidJson, ValidJsonBytes, ValidQuery};
use crate::http::idempotency::{self, KeyedHeaders, Once};
use crate::http::inbound::replay::{self, Protection};
use crate::http::inbound::scheme;
use crate::relay::is_relay;
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// At most this many secrets per source.
const MAX_SECRETS: usize = 10;
/// At most this many destinations per source.
pub(super) const MAX_DESTINATIONS: usize = 20;
/// The widest tolerance a source may set, in seconds (a day).
const MAX_TOLERANCE_SECS: u32 = 86_400;
/// The widest replay window a source may set, in seconds (a year).
const MAX_REPLAY_WINDOW_SECS: u32 = 365 * 86_400;
/// Random bytes in an ingest token (192 bits).
const TOKEN_BYTES: usize = 24;

/// Source routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_sources, create_source))
        .routes(routes!(
            get_source,
            update_source,
            patch_source,
            delete_source
        ))
        .routes(routes!(get_source_secret))
}

/// `SourceIn`. No `Debug`: it holds secrets.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceIn {
    #[serde(default)]
    description: String,
    scheme: String,
    hmac: Option<HmacSettings>,
    secrets: Vec<String>,
    tolerance_secs: Option<u32>,
    replay_window_secs: Option<u32>,
    event_id: Option<Locator>,
    account: Option<Locator>,
    version_pointer: Option<String>,
    entity_pointer: Option<String>,
    #[serde(default)]
    destinations: Vec<DestinationIn>,
}

/// `DestinationIn`: a destination, new (no `id`) or kept (its `id`; its secret stays unless
/// one is given). No `Debug`: it holds a secret.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DestinationIn {
    id: Option<DestinationId>,
    url: String,
    secret: Option<String>,
    #[serde(default)]
    idempotent: bool,
}

/// `SourcePatch`. No `Debug`: it may hold secrets.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourcePatch {
    description: Option<String>,
    scheme: Option<String>,
    #[serde(default)]
    hmac: Patch<HmacSettings>,
    secrets: Option<Vec<String>>,
    tolerance_secs: Option<u32>,
    #[serde(default)]
    replay_window_secs: Patch<u32>,
    #[serde(default)]
    event_id: Patch<Locator>,
    #[serde(default)]
    account: Patch<Locator>,
    #[serde(default)]
    version_pointer: Patch<String>,
    #[serde(default)]
    entity_pointer: Patch<String>,
    destinations: Option<Vec<DestinationIn>>,
}

/// `SourceOut`: everything but the secrets (their count only). No `Debug`: it may hold the
/// token path.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceOut {
    id: SourceId,
    description: String,
    scheme: String,
    hmac: Option<HmacSettings>,
    secret_count: usize,
    tolerance_secs: u32,
    /// As configured: `None` = the scheme's default.
    replay_window_secs: Option<u32>,
    /// What the scheme signs and what the guard adds (`None` for a scheme that no longer parses).
    replay_protection: Option<Protection>,
    event_id: Option<Locator>,
    account: Option<Locator>,
    version_pointer: Option<String>,
    entity_pointer: Option<String>,
    destinations: Vec<DestinationOut>,
    ingest_path: String,
    /// Only in single-source answers: the token is as good as a password to the ingest route.
    #[serde(skip_serializing_if = "Option::is_none")]
    token_path: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

/// `DestinationOut`: a destination without its secret.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DestinationOut {
    id: DestinationId,
    url: String,
    idempotent: bool,
}

impl SourceOut {
    /// `source` as answered; `token` says whether the token path is shown.
    fn of(source: &Source, token: bool) -> Self {
        let f = &source.fields;
        Self {
            id: source.id,
            description: f.description.clone(),
            scheme: f.scheme.clone(),
            hmac: f.hmac.clone(),
            secret_count: f.secrets.len(),
            tolerance_secs: f.tolerance_secs,
            replay_window_secs: f.replay_window_secs,
            replay_protection: scheme::of(f).ok().map(|s| replay::protection(f, &s)),
            event_id: f.event_id.clone(),
            account: f.account.clone(),
            version_pointer: f.version_pointer.clone(),
            entity_pointer: f.entity_pointer.clone(),
            destinations: f
                .destinations
                .iter()
                .map(|d| DestinationOut {
                    id: d.id,
                    url: d.url.clone(),
                    idempotent: d.idempotent,
                })
                .collect(),
            ingest_path: format!("/in/{}", source.id),
            token_path: token.then(|| format!("/in/t/{}", source.token)),
            created_at: source.created_at,
            updated_at: source.updated_at,
        }
    }
}

impl SourceIn {
    /// Validates into stored fields; `existing` are the source's destinations (none for a new
    /// source), which an `id` in `destinations` keeps.
    fn validate(self, existing: &[Destination]) -> ApiResult<SourceFields> {
        let mut p = Problems::default();
        let hmac = self.hmac.map(scheme::normalize);
        let scheme = scheme::parse(&self.scheme, hmac.as_ref())
            .map_err(|e| {
                let loc: Vec<&str> = ["body"].into_iter().chain(e.field).collect();
                p.require(false, &loc, &e.message, "value_error.scheme");
            })
            .ok();
        p.require(
            (1..=MAX_SECRETS).contains(&self.secrets.len()),
            &["body", "secrets"],
            &format!("must hold 1 to {MAX_SECRETS} secrets"),
            "value_error.list.length",
        );
        for (i, secret) in self.secrets.iter().enumerate() {
            let idx = i.to_string();
            let at = ["body", "secrets", idx.as_str()];
            p.no_nul(&at, secret);
            if let Some(Err(e)) = scheme.as_ref().map(|s| s.check_secret(secret)) {
                p.require(false, &at, &e.to_string(), "value_error.secret");
            }
        }
        let tolerance_secs = self.tolerance_secs.unwrap_or(DEFAULT_TOLERANCE_SECS as u32);
        p.require(
            (1..=MAX_TOLERANCE_SECS).contains(&tolerance_secs),
            &["body", "toleranceSecs"],
            &format!("must be between 1 and {MAX_TOLERANCE_SECS} (seconds)"),
            "value_error.number.range",
        );
        if let Some(window) = self.replay_window_secs {
            p.require(
                window <= MAX_REPLAY_WINDOW_SECS,
                &["body", "replayWindowSecs"],
                &format!("must be between 0 (off) and {MAX_REPLAY_WINDOW_SECS} (seconds)"),
                "value_error.number.range",
            );
        }
        p.no_nul(&["body", "description"], &self.description);
        let event_id = self.event_id.map(|l| check_locator(&mut p, "eventId", l));
        let account = self.account.map(|l| check_locator(&mut p, "account", l));
        for (field, pointer) in [
            ("versionPointer", &self.version_pointer),
            ("entityPointer", &self.entity_pointer),
        ] {
            if let Some(pointer) = pointer {
                check_pointer(&mut p, &["body", field], pointer);
            }
        }
        let destinations = check_destinations(&mut p, self.destinations, existing);
        p.finish()?;
        Ok(SourceFields {
            description: self.description,
            scheme: scheme.map_or(self.scheme, |s| s.as_str().to_owned()),
            hmac,
            secrets: self.secrets,
            tolerance_secs,
            replay_window_secs: self.replay_window_secs,
            event_id,
            account,
            version_pointer: self.version_pointer,
            entity_pointer: self.entity_pointer,
            destinations,
        })
    }
}

/// A locator as stored: a header name lowercase and valid, a pointer that is one.
fn check_locator(p: &mut Problems, field: &str, locator: Locator) -> Locator {
    match locator {
        Locator::Header(name) => {
            let name = name.to_ascii_lowercase();
            p.require(
                axum::http::HeaderName::from_bytes(name.as_bytes()).is_ok(),
                &["body", field, "header"],
                "must be a valid header name",
                "value_error.header",
            );
            Locator::Header(name)
        }
        Locator::Pointer(pointer) => {
            check_pointer(p, &["body", field, "pointer"], &pointer);
            Locator::Pointer(pointer)
        }
    }
}

/// A JSON pointer (RFC 6901) into the body: empty or starting with `/`.
fn check_pointer(p: &mut Problems, loc: &[&str], pointer: &str) {
    p.require(
        pointer.starts_with('/'),
        loc,
        "must be a JSON pointer such as /data/id",
        "value_error.pointer",
    );
}

/// Destinations as stored: valid URLs, secrets given (normalised) or kept or generated, ids
/// kept for those that name one of `existing`.
fn check_destinations(
    p: &mut Problems,
    given: Vec<DestinationIn>,
    existing: &[Destination],
) -> Vec<Destination> {
    p.require(
        given.len() <= MAX_DESTINATIONS,
        &["body", "destinations"],
        &format!("must have at most {MAX_DESTINATIONS} items"),
        "value_error.list.max_items",
    );
    let mut out: Vec<Destination> = Vec::with_capacity(given.len());
    for (i, d) in given.into_iter().enumerate() {
        let idx = i.to_string();
        let at = |field: &'static str| ["body", "destinations", idx.as_str(), field];
        let kept = d.id.and_then(|id| existing.iter().find(|e| e.id == id));
        // A `vow listen` session's relay destination keeps its URL through an edit; no other
        // destination may have it.
        let url = if is_relay(&d.url) && kept.is_some_and(|k| is_relay(&k.url)) {
            Some(d.url)
        } else {
            p.check(&at("url"), EndpointUrl::parse(d.url))
                .map(EndpointUrl::into_string)
        };
        p.require(
            d.id.is_none() || kept.is_some(),
            &at("id"),
            "is not a destination of this source",
            "value_error.destination",
        );
        let id = kept.map_or_else(DestinationId::new, |k| k.id);
        p.require(
            !out.iter().any(|o| o.id == id),
            &at("id"),
            "duplicate destination",
            "value_error.list.unique_items",
        );
        let secret = match d.secret {
            Some(given) => check_secret(p, &at("secret"), &given),
            None => Some(kept.map_or_else(crate::secret::generate, |k| k.secret.clone())),
        };
        if let (Some(url), Some(secret)) = (url, secret) {
            out.push(Destination {
                id,
                url,
                secret,
                idempotent: d.idempotent,
            });
        }
    }
    out
}

/// A new ingest token: 192 random bits, hex.
fn new_token() -> String {
    let mut bytes = [0u8; TOKEN_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// List inbound sources.
#[utoipa::path(get, path = "/api/v1/source", tag = "Source", operation_id = "v1.source.list", params(ListParams),
    responses((status = 200, description = "A page of sources.", body = ListResponse<SourceOut>)))]
async fn list_sources(
    State(state): State<AppState>,
    ValidQuery(params): ValidQuery<ListParams>,
) -> ApiResult<Json<ListResponse<SourceOut>>> {
    let order = params.order(Order::Ascending);
    let seek = params.seek(order, |it| SourceId::parse(it).map(|_| ()))?;
    let rows = state.inbound.list_sources(&seek).await?;
    let page = Page::build(rows, &seek, order, |s| s.id.to_string());
    Ok(Json(page.map(|s| SourceOut::of(&s, false)).into()))
}

/// Create an inbound source.
#[utoipa::path(post, path = "/api/v1/source", tag = "Source", operation_id = "v1.source.create", params(KeyedHeaders), request_body = SourceIn,
    responses((status = 201, description = "Created.", body = SourceOut)))]
async fn create_source(
    State(state): State<AppState>,
    once: Once,
    ValidJsonBytes(body, raw): ValidJsonBytes<SourceIn>,
) -> ApiResult<Response> {
    let new = NewSource {
        id: SourceId::new(),
        token: new_token(),
        fields: body.validate(&[])?,
        now: state.now(),
    };
    once.run(&state, None, &raw, move |commit| async move {
        let render = |source: &Source| {
            let out = SourceOut::of(source, true);
            idempotency::json(StatusCode::CREATED, &out, Some(source.id.to_string()))
        };
        let write = |store: Arc<dyn Store>, keyed| async move {
            store.create_source_keyed(new, keyed).await
        };
        Ok(commit.write(write, render).await?.1)
    })
    .await
}

/// Get an inbound source.
#[utoipa::path(get, path = "/api/v1/source/{source_id}", tag = "Source", operation_id = "v1.source.get",
    responses((status = 200, description = "The source.", body = SourceOut)))]
async fn get_source(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
) -> ApiResult<Json<SourceOut>> {
    Ok(Json(SourceOut::of(
        &find_source(&state, &source_id).await?,
        true,
    )))
}

/// PUT: replaces every field (a destination keeps its id and secret when it names its id).
#[utoipa::path(put, path = "/api/v1/source/{source_id}", tag = "Source", operation_id = "v1.source.update", request_body = SourceIn,
    responses((status = 200, description = "Replaced.", body = SourceOut)))]
async fn update_source(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
    ValidJson(body): ValidJson<SourceIn>,
) -> ApiResult<Json<SourceOut>> {
    let current = find_source(&state, &source_id).await?;
    replace(&state, current.id, &current.fields.destinations, body).await
}

/// Validates `body` (keeping the `existing` destinations it names) and stores it as source
/// `id`'s fields.
async fn replace(
    state: &AppState,
    id: SourceId,
    existing: &[Destination],
    body: SourceIn,
) -> ApiResult<Json<SourceOut>> {
    let fields = body.validate(existing)?;
    let updated = state.inbound.update_source(id, fields, state.now()).await?;
    Ok(Json(SourceOut::of(&updated, true)))
}

/// Partially update an inbound source.
#[utoipa::path(patch, path = "/api/v1/source/{source_id}", tag = "Source", operation_id = "v1.source.patch", request_body = SourcePatch,
    responses((status = 200, description = "Updated.", body = SourceOut)))]
async fn patch_source(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
    ValidJson(patch): ValidJson<SourcePatch>,
) -> ApiResult<Json<SourceOut>> {
    let current = find_source(&state, &source_id).await?;
    let f = current.fields;
    let kept = f
        .destinations
        .iter()
        .map(|d| DestinationIn {
            id: Some(d.id),
            url: d.url.clone(),
            secret: Some(d.secret.clone()),
            idempotent: d.idempotent,
        })
        .collect();
    // Moving to a named scheme drops the generic HMAC's settings unless the patch sets them.
    let hmac = match (&patch.scheme, patch.hmac) {
        (Some(name), Patch::Absent) if name != "hmac" => None,
        (_, hmac) => hmac.apply_to(f.hmac),
    };
    let merged = SourceIn {
        description: patch.description.unwrap_or(f.description),
        scheme: patch.scheme.unwrap_or(f.scheme),
        hmac,
        secrets: patch.secrets.unwrap_or(f.secrets),
        tolerance_secs: Some(patch.tolerance_secs.unwrap_or(f.tolerance_secs)),
        replay_window_secs: patch.replay_window_secs.apply_to(f.replay_window_secs),
        event_id: patch.event_id.apply_to(f.event_id),
        account: patch.account.apply_to(f.account),
        version_pointer: patch.version_pointer.apply_to(f.version_pointer),
        entity_pointer: patch.entity_pointer.apply_to(f.entity_pointer),
        destinations: patch.destinations.unwrap_or(kept),
    };
    replace(&state, current.id, &f.destinations, merged).await
}

/// Delete an inbound source.
#[utoipa::path(delete, path = "/api/v1/source/{source_id}", tag = "Source", operation_id = "v1.source.delete",
    responses((status = 204, description = "Deleted.")))]
async fn delete_source(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
) -> ApiResult<StatusCode> {
    state.inbound.delete_source(source_key(&source_id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `SourceSecretOut`: the Standard Webhooks secret of each destination, which its receiver
/// verifies forwarded events with. The provider's secrets are never shown.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct SourceSecretOut {
    destinations: Vec<DestinationSecretOut>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct DestinationSecretOut {
    id: DestinationId,
    secret: String,
}

/// Get the signing secrets of a source's destinations.
#[utoipa::path(get, path = "/api/v1/source/{source_id}/secret", tag = "Source", operation_id = "v1.source.get-secret",
    responses((status = 200, description = "The source's destinations' signing secrets.", body = SourceSecretOut)))]
async fn get_source_secret(
    State(state): State<AppState>,
    Path(source_id): Path<String>,
) -> ApiResult<Json<SourceSecretOut>> {
    let source = find_source(&state, &source_id).await?;
    let destinations = source
        .fields
        .destinations
        .into_iter()
        .map(|d| DestinationSecretOut {
            id: d.id,
            secret: d.secret,
        })
        .collect();
    Ok(Json(SourceSecretOut { destinations }))
}
