//! Endpoints of an application: `/api/v1/app/{app_id}/endpoint[/{endpoint_id}]`, plus their
//! custom headers and signing secret (get, rotate).
//!
//! Every route first resolves `{app_id}`; endpoints are then looked up within that application
//! only, so an endpoint id from another application is a 404.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_core::{
    Channel, EndpointId, EndpointUrl, EventTypeName, Patch, RetrySchedule, SignatureStyle,
};
use vow_store::page::Page;
use vow_store::{DeliveryOptions, Endpoint, EndpointFields, EndpointKey, Order};

use super::headers::{check_headers, HeadersIn, HeadersOut, HeadersPatchIn};
use super::keys::endpoint_key;
use super::list::{ListParams, ListResponse};
use super::lookup::{find_endpoint_in, resolve_app};
use super::validate::{check_secret, check_uid, Metadata, Problems};
use crate::actions;
use crate::actions::endpoint::{CreateEndpoint, Rotation};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{MaybeJson, ValidJson, ValidJsonBytes, ValidQuery};
use crate::http::idempotency::{self, KeyedHeaders, Once};
use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The longest per-attempt timeout an endpoint may ask for.
const MAX_TIMEOUT_MS: u32 = 60_000;

/// Endpoint routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_endpoints, create_endpoint))
        .routes(routes!(
            get_endpoint,
            update_endpoint,
            patch_endpoint,
            delete_endpoint
        ))
        .routes(routes!(
            get_endpoint_headers,
            update_endpoint_headers,
            patch_endpoint_headers
        ))
        .routes(routes!(get_endpoint_secret))
        .routes(routes!(rotate_endpoint_secret))
}

/// `EndpointIn` / `EndpointUpdate` (the latter ignores `secret`).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointIn {
    url: String,
    uid: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    disabled: bool,
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    throttle_rate: Option<u16>,
    /// `throttleRate` under its older name (see [`throttle_rate`]).
    rate_limit: Option<u16>,
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    secret: Option<String>,
    #[serde(default)]
    signature_style: SignatureStyle,
    timeout_ms: Option<u32>,
    retry_schedule: Option<String>,
}

/// `EndpointPatch`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPatch {
    url: Option<String>,
    #[serde(default)]
    uid: Patch<String>,
    description: Option<String>,
    disabled: Option<bool>,
    #[serde(default)]
    event_types: Patch<Vec<String>>,
    #[serde(default)]
    channels: Patch<Vec<String>>,
    #[serde(default)]
    throttle_rate: Patch<u16>,
    /// `throttleRate` under its older name (see [`throttle_rate`]).
    #[serde(default)]
    rate_limit: Patch<u16>,
    metadata: Option<Metadata>,
    signature_style: Option<SignatureStyle>,
    #[serde(default)]
    timeout_ms: Patch<u32>,
    #[serde(default)]
    retry_schedule: Patch<String>,
}

/// `EndpointOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointOut {
    id: EndpointId,
    url: String,
    uid: Option<String>,
    description: String,
    disabled: bool,
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    throttle_rate: Option<u16>,
    /// `throttleRate` again under its older name, for older SDKs that read that one.
    rate_limit: Option<u16>,
    metadata: Metadata,
    signature_style: SignatureStyle,
    timeout_ms: Option<u32>,
    retry_schedule: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<Endpoint> for EndpointOut {
    fn from(e: Endpoint) -> Self {
        let f = e.fields;
        Self {
            id: e.id,
            url: f.url,
            uid: f.uid,
            description: f.description,
            disabled: f.disabled,
            event_types: f.event_types,
            channels: f.channels,
            throttle_rate: f.throttle_rate,
            rate_limit: f.throttle_rate,
            metadata: f.metadata,
            signature_style: f.delivery.signature_style,
            timeout_ms: f.delivery.timeout_ms,
            retry_schedule: f.delivery.retry_schedule.map(|s| s.to_string()),
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }
}

/// `throttleRate` given under either of its names: `rateLimit` is its older one (Svix's), which
/// older SDKs send. Both may be given only with the same value.
fn throttle_rate(
    p: &mut Problems,
    throttle_rate: Patch<u16>,
    rate_limit: Patch<u16>,
) -> Patch<u16> {
    match (throttle_rate, rate_limit) {
        (Patch::Absent, alias) => alias,
        (given, Patch::Absent) => given,
        (given, alias) => {
            p.require(
                given == alias,
                &["body", "rateLimit"],
                "differs from throttleRate: rateLimit is the older name of throttleRate; give one of them",
                "value_error.conflict",
            );
            given
        }
    }
}

/// Validates a list of names: unique, each valid, within `min..=max` items.
fn check_names<T: AsRef<str>>(
    p: &mut Problems,
    field: &str,
    items: Option<Vec<String>>,
    max: Option<usize>,
    parse: impl Fn(String) -> Result<T, vow_core::InvalidName>,
) -> Option<Vec<String>> {
    let items = items?;
    p.require(
        !items.is_empty(),
        &["body", field],
        "must not be empty; omit it or use null for all",
        "value_error.list.min_items",
    );
    if let Some(max) = max {
        p.require(
            items.len() <= max,
            &["body", field],
            &format!("must have at most {max} items"),
            "value_error.list.max_items",
        );
    }
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let idx = i.to_string();
        if let Some(v) = p.check(&["body", field, &idx], parse(item)) {
            let v = v.as_ref().to_string();
            p.require(
                !out.contains(&v),
                &["body", field, &idx],
                "duplicate item",
                "value_error.list.unique_items",
            );
            out.push(v);
        }
    }
    Some(out)
}

impl EndpointIn {
    /// The input that would store `f` again: what PATCH and the pages' edit form change a
    /// few fields of, then validate like any other input. Headers are kept as they are.
    pub fn from_fields(f: EndpointFields) -> Self {
        Self {
            url: f.url,
            uid: f.uid,
            description: f.description,
            disabled: f.disabled,
            event_types: f.event_types,
            channels: f.channels,
            throttle_rate: f.throttle_rate,
            rate_limit: None,
            metadata: f.metadata,
            headers: f.headers,
            secret: None,
            signature_style: f.delivery.signature_style,
            timeout_ms: f.delivery.timeout_ms,
            retry_schedule: f.delivery.retry_schedule.map(|s| s.to_string()),
        }
    }

    /// A new endpoint's input from the pages' form: everything else as the API defaults it.
    pub fn from_form(url: String, description: String, event_types: Option<Vec<String>>) -> Self {
        Self::from_fields(EndpointFields {
            url: String::new(),
            uid: None,
            description: String::new(),
            disabled: false,
            event_types: None,
            channels: None,
            throttle_rate: None,
            metadata: Metadata::default(),
            headers: BTreeMap::new(),
            delivery: DeliveryOptions::default(),
        })
        .with_form(url, description, event_types)
    }

    /// A relay endpoint's fields ([`crate::relay`]): `description`, `event_types` and
    /// `channels` checked as any endpoint's are, the URL [`crate::relay::RELAY_URL`].
    pub fn relay(
        description: String,
        event_types: Option<Vec<String>>,
        channels: Option<Vec<String>>,
    ) -> ApiResult<EndpointFields> {
        let url = crate::relay::RELAY_URL.to_string();
        let input = Self {
            channels,
            ..Self::from_form(url, description, event_types)
        };
        Ok(input.validate()?.0)
    }

    /// This input with the fields the pages' form edits replaced.
    pub fn with_form(
        mut self,
        url: String,
        description: String,
        event_types: Option<Vec<String>>,
    ) -> Self {
        self.url = url;
        self.description = description;
        self.event_types = event_types;
        self
    }

    /// Validates into stored fields and, when given, the normalised secret.
    pub fn validate(self) -> ApiResult<(EndpointFields, Option<String>)> {
        let mut p = Problems::default();
        // A relay endpoint's URL is not an http(s) URL; it stays what it is through an edit.
        let url = if crate::relay::is_relay(&self.url) {
            Some(self.url)
        } else {
            p.check(&["body", "url"], EndpointUrl::parse(self.url))
                .map(EndpointUrl::into_string)
        };
        let uid = self
            .uid
            .and_then(|u| check_uid(&mut p, &["body", "uid"], &u));
        let given = |rate: Option<u16>| rate.map_or(Patch::Absent, Patch::Value);
        let throttle_rate =
            throttle_rate(&mut p, given(self.throttle_rate), given(self.rate_limit)).apply_to(None);
        p.require(
            throttle_rate != Some(0),
            &["body", "throttleRate"],
            "must be at least 1",
            "value_error.number.not_ge",
        );
        let event_types = check_names(
            &mut p,
            "eventTypes",
            self.event_types,
            None,
            EventTypeName::parse,
        );
        let channels = check_names(&mut p, "channels", self.channels, Some(10), Channel::parse);
        check_headers(&mut p, &["body", "headers"], &self.headers);
        p.no_nul(&["body", "description"], &self.description);
        p.no_nul_in_map(&["body", "metadata"], &self.metadata);
        p.require(
            self.timeout_ms
                .is_none_or(|t| (100..=MAX_TIMEOUT_MS).contains(&t)),
            &["body", "timeoutMs"],
            &format!("must be between 100 and {MAX_TIMEOUT_MS} (milliseconds)"),
            "value_error.number.range",
        );
        let retry_schedule = self.retry_schedule.and_then(|text| {
            text.parse::<RetrySchedule>()
                .map_err(|e| {
                    p.require(
                        false,
                        &["body", "retrySchedule"],
                        &e.to_string(),
                        "value_error.retry_schedule",
                    )
                })
                .ok()
        });
        let style = self.signature_style;
        let secret = self
            .secret
            .and_then(|s| check_secret(&mut p, &["body", "secret"], &s));
        if let Some(secret) = &secret {
            p.require(
                crate::secret::signs_in(secret, style),
                &["body", "secret"],
                &crate::secret::style_mismatch(style),
                "value_error.signature_style",
            );
        }
        p.finish()?;
        let fields = EndpointFields {
            url: url.unwrap_or_default(),
            uid,
            description: self.description,
            disabled: self.disabled,
            event_types,
            channels,
            throttle_rate,
            metadata: self.metadata,
            headers: self.headers,
            delivery: DeliveryOptions {
                signature_style: self.signature_style,
                timeout_ms: self.timeout_ms,
                retry_schedule,
            },
        };
        Ok((fields, secret))
    }
}

/// Loads `{endpoint_id}` within `{app_id}`, or 404.
async fn find(state: &AppState, app_id: &str, endpoint_id: &str) -> ApiResult<Endpoint> {
    let app = resolve_app(state, app_id).await?;
    find_endpoint_in(state, app, &endpoint_key(endpoint_id)?).await
}

/// List the endpoints of an application.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint", tag = "Endpoint", operation_id = "v1.endpoint.list", params(ListParams),
    responses((status = 200, description = "A page of endpoints.", body = ListResponse<EndpointOut>)))]
async fn list_endpoints(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    ValidQuery(params): ValidQuery<ListParams>,
) -> ApiResult<Json<ListResponse<EndpointOut>>> {
    let app = resolve_app(&state, &app_id).await?;
    let order = params.order(Order::Ascending);
    let seek = params.seek(order, |it| EndpointId::parse(it).map(|_| ()))?;
    let rows = state.store.list_endpoints(app, &seek).await?;
    let page = Page::build(rows, &seek, order, |e| e.id.to_string());
    Ok(Json(page.map(EndpointOut::from).into()))
}

/// Create an endpoint.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint", tag = "Endpoint", operation_id = "v1.endpoint.create", params(KeyedHeaders), request_body = EndpointIn,
    responses((status = 201, description = "Created.", body = EndpointOut)))]
async fn create_endpoint(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    once: Once,
    ValidJsonBytes(body, raw): ValidJsonBytes<EndpointIn>,
) -> ApiResult<Response> {
    let (fields, secret) = body.validate()?;
    let app = resolve_app(&state, &app_id).await?;
    let create = CreateEndpoint::new(&state, app, fields, secret);
    once.run(&state, Some(app), &raw, move |commit| async move {
        let render = |endpoint: &Endpoint| {
            let out = EndpointOut::from(endpoint.clone());
            idempotency::json(StatusCode::CREATED, &out, Some(endpoint.id.to_string()))
        };
        Ok(commit.act(create, render).await?.1)
    })
    .await
}

/// Get an endpoint.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Endpoint", operation_id = "v1.endpoint.get",
    responses((status = 200, description = "The endpoint.", body = EndpointOut)))]
async fn get_endpoint(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> ApiResult<Json<EndpointOut>> {
    Ok(Json(find(&state, &app_id, &endpoint_id).await?.into()))
}

/// PUT: replace, or create when absent (with the path's uid), as Svix does. Headers are kept:
/// they have their own routes.
#[utoipa::path(put, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Endpoint", operation_id = "v1.endpoint.update", request_body = EndpointIn,
    responses((status = 200, description = "Updated.", body = EndpointOut), (status = 201, description = "Created (the path named a uid).", body = EndpointOut)))]
async fn update_endpoint(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    ValidJson(body): ValidJson<EndpointIn>,
) -> ApiResult<impl IntoResponse> {
    let app = resolve_app(&state, &app_id).await?;
    let key = endpoint_key(&endpoint_id)?;
    let (mut fields, secret) = body.validate()?;
    if let Some(current) = state.store.get_endpoint(app, &key).await? {
        style_fits_secrets(&state, &current, fields.delivery.signature_style).await?;
        fields.headers = current.fields.headers;
        let updated = state.store.update_endpoint(app, current.id, fields).await?;
        return Ok((StatusCode::OK, Json(EndpointOut::from(updated))));
    }
    let EndpointKey::Uid(uid) = key else {
        return Err(ApiError::not_found("Endpoint"));
    };
    fields.uid = Some(uid);
    let created = actions::apply(&state, CreateEndpoint::new(&state, app, fields, secret)).await?;
    Ok((StatusCode::CREATED, Json(EndpointOut::from(created))))
}

/// Partially update an endpoint.
#[utoipa::path(patch, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Endpoint", operation_id = "patch_endpoint", request_body = EndpointPatch,
    responses((status = 200, description = "Updated.", body = EndpointOut)))]
async fn patch_endpoint(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    ValidJson(patch): ValidJson<EndpointPatch>,
) -> ApiResult<Json<EndpointOut>> {
    let mut p = Problems::default();
    let throttle = throttle_rate(&mut p, patch.throttle_rate, patch.rate_limit);
    p.finish()?;
    let current = find(&state, &app_id, &endpoint_id).await?;
    let f = EndpointIn::from_fields(current.fields.clone());
    let merged = EndpointIn {
        url: patch.url.unwrap_or(f.url),
        uid: patch.uid.apply_to(f.uid),
        description: patch.description.unwrap_or(f.description),
        disabled: patch.disabled.unwrap_or(f.disabled),
        event_types: patch.event_types.apply_to(f.event_types),
        channels: patch.channels.apply_to(f.channels),
        throttle_rate: throttle.apply_to(f.throttle_rate),
        metadata: patch.metadata.unwrap_or(f.metadata),
        signature_style: patch.signature_style.unwrap_or(f.signature_style),
        timeout_ms: patch.timeout_ms.apply_to(f.timeout_ms),
        retry_schedule: patch.retry_schedule.apply_to(f.retry_schedule),
        ..f
    };
    let (fields, _) = merged.validate()?;
    style_fits_secrets(&state, &current, fields.delivery.signature_style).await?;
    let updated = state
        .store
        .update_endpoint(current.app_id, current.id, fields)
        .await?;
    Ok(Json(updated.into()))
}

/// 422 at `body.signatureStyle` when `style` cannot sign with a key `endpoint` signs with now
/// (a seed style and an ed25519 key).
async fn style_fits_secrets(
    state: &AppState,
    endpoint: &Endpoint,
    style: SignatureStyle,
) -> ApiResult<()> {
    if style == SignatureStyle::StandardWebhooks {
        return Ok(());
    }
    let keys = actions::endpoint::signing_keys(state, endpoint).await?;
    actions::endpoint::require_style_fits(style, &keys, &["body", "signatureStyle"])
}

/// Delete an endpoint.
#[utoipa::path(delete, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Endpoint", operation_id = "v1.endpoint.delete",
    responses((status = 204, description = "Deleted.")))]
async fn delete_endpoint(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let current = find(&state, &app_id, &endpoint_id).await?;
    state
        .store
        .delete_endpoint(current.app_id, current.id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Get the custom headers of an endpoint.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/headers", tag = "Endpoint", operation_id = "v1.endpoint.get-headers",
    responses((status = 200, description = "The custom headers (sensitive values redacted).", body = HeadersOut)))]
async fn get_endpoint_headers(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> ApiResult<Json<HeadersOut>> {
    let current = find(&state, &app_id, &endpoint_id).await?;
    Ok(Json(HeadersOut::redacted(&current.fields.headers)))
}

/// Replace the custom headers of an endpoint.
#[utoipa::path(put, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/headers", tag = "Endpoint", operation_id = "v1.endpoint.update-headers", request_body = HeadersIn,
    responses((status = 204, description = "Replaced.")))]
async fn update_endpoint_headers(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    ValidJson(body): ValidJson<HeadersIn>,
) -> ApiResult<StatusCode> {
    let current = find(&state, &app_id, &endpoint_id).await?;
    let headers = body.validate()?;
    save_headers(&state, current, headers).await
}

/// Set or remove some custom headers of an endpoint.
#[utoipa::path(patch, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/headers", tag = "Endpoint", operation_id = "v1.endpoint.patch-headers", request_body = HeadersPatchIn,
    responses((status = 204, description = "Updated.")))]
async fn patch_endpoint_headers(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    ValidJson(body): ValidJson<HeadersPatchIn>,
) -> ApiResult<StatusCode> {
    let current = find(&state, &app_id, &endpoint_id).await?;
    let headers = body.apply_to(current.fields.headers.clone())?;
    save_headers(&state, current, headers).await
}

async fn save_headers(
    state: &AppState,
    current: Endpoint,
    headers: BTreeMap<String, String>,
) -> ApiResult<StatusCode> {
    let fields = EndpointFields {
        headers,
        ..current.fields
    };
    state
        .store
        .update_endpoint(current.app_id, current.id, fields)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `EndpointSecretOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EndpointSecretOut {
    key: String,
}

/// Get the signing secret of an endpoint.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret", tag = "Endpoint", operation_id = "v1.endpoint.get-secret",
    responses((status = 200, description = "The current signing secret.", body = EndpointSecretOut)))]
async fn get_endpoint_secret(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> ApiResult<Json<EndpointSecretOut>> {
    let current = find(&state, &app_id, &endpoint_id).await?;
    let secrets = state
        .store
        .endpoint_secrets(current.app_id, current.id, state.now())
        .await?;
    let key = secrets
        .into_iter()
        .find(|s| s.valid_until.is_none())
        .ok_or_else(|| ApiError::Internal("endpoint has no current secret".into()))?
        .key;
    Ok(Json(EndpointSecretOut { key }))
}

/// `EndpointSecretRotateIn`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSecretRotateIn {
    key: Option<String>,
    grace_period_seconds: Option<u32>,
}

/// Rotate the signing secret of an endpoint.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret/rotate", tag = "Endpoint", operation_id = "v1.endpoint.rotate-secret", params(KeyedHeaders), request_body = Option<EndpointSecretRotateIn>,
    responses((status = 200, description = "Rotated: the new secret.", body = EndpointSecretOut)))]
async fn rotate_endpoint_secret(
    State(state): State<AppState>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    once: Once,
    MaybeJson(body, raw): MaybeJson<EndpointSecretRotateIn>,
) -> ApiResult<Response> {
    let body = body.unwrap_or_default();
    let mut p = Problems::default();
    let key = body
        .key
        .and_then(|k| check_secret(&mut p, &["body", "key"], &k));
    let grace = body.grace_period_seconds.map(|g| {
        p.require(
            g <= 604_800,
            &["body", "gracePeriodSeconds"],
            "must be at most 604800 (7 days)",
            "value_error.number.not_le",
        );
        std::time::Duration::from_secs(g.into())
    });
    p.finish()?;
    let app = resolve_app(&state, &app_id).await?;
    let endpoint = endpoint_key(&endpoint_id)?;
    once.run(&state, Some(app), &raw, move |commit| async move {
        let endpoint = find_endpoint_in(commit.state(), app, &endpoint).await?;
        let rotation = Rotation::new(commit.state(), &endpoint, key, grace).await?;
        let key = rotation.key.clone();
        // The spec says 204, but the official SDKs (svix 2.x) parse an `EndpointSecretOut` from
        // this response; a 200 with the new key satisfies both.
        let render =
            move |_: &()| idempotency::json(StatusCode::OK, &EndpointSecretOut { key }, None);
        Ok(commit.act(rotation, render).await?.1)
    })
    .await
}
