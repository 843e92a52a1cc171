//! Actions on endpoints: create one, rotate its signing secret (the old one still signs for a
//! grace period), send it an event type's example as a test, and enable or disable it; and the
//! rule that an endpoint's signature style can sign with its secrets (no ed25519 key under a
//! seed style).

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use vow_core::{AppId, EndpointId, EventTypeName, MessageId, SignatureStyle};
use vow_store::idempotency::{Applied, Completion};
use vow_store::{
    CreatedMessage, Endpoint, EndpointFields, EventType, MessageCreate, NewEndpoint, NewMessage,
    Store, StoreResult,
};

use super::Action;
use crate::error::{ApiError, ApiResult, ValidationItem};
use crate::state::AppState;

/// A new endpoint with its fields checked ([`EndpointIn::validate`](crate::http::api::endpoint::EndpointIn::validate)).
#[derive(Debug, Clone)]
pub struct CreateEndpoint {
    new: NewEndpoint,
}

impl CreateEndpoint {
    /// A new endpoint of `app` with `fields`, signing with `secret` or a generated one.
    pub fn new(
        state: &AppState,
        app: AppId,
        fields: EndpointFields,
        secret: Option<String>,
    ) -> Self {
        Self {
            new: NewEndpoint {
                id: EndpointId::new(),
                app_id: app,
                fields,
                secret: secret.unwrap_or_else(crate::secret::generate),
                now: state.now(),
            },
        }
    }
}

impl Action for CreateEndpoint {
    type Done = Endpoint;

    async fn write(
        self,
        store: Arc<dyn Store>,
        keyed: Option<Completion<Endpoint>>,
    ) -> StoreResult<Applied<Endpoint>> {
        store.create_endpoint_keyed(self.new, keyed).await
    }
}

/// A rotation of an endpoint's signing secret to `key`; the old secret stays valid until
/// `old_valid_until`.
#[derive(Debug, Clone)]
pub struct Rotation {
    /// The application.
    pub app: AppId,
    /// The endpoint.
    pub endpoint: EndpointId,
    /// The new secret.
    pub key: String,
    /// When the old secret stops signing.
    pub old_valid_until: DateTime<Utc>,
}

impl Rotation {
    /// A rotation of `endpoint` to `key` (when `None`, a fresh secret of the current one's
    /// kind: `whsec_`, or `whsk_` for an ed25519 endpoint), the old one kept for `grace` (the
    /// configured default when `None`). A `whsk_` key for a seed-style endpoint is a 422 at
    /// `body.key`.
    pub async fn new(
        state: &AppState,
        endpoint: &Endpoint,
        key: Option<String>,
        grace: Option<std::time::Duration>,
    ) -> ApiResult<Self> {
        let grace = grace.unwrap_or(state.settings.secret_rotation_grace);
        let grace = Duration::from_std(grace).map_err(|e| ApiError::Internal(Box::new(e)))?;
        let key = match key {
            Some(key) => {
                let style = endpoint.fields.delivery.signature_style;
                require_style_fits(style, &[&key], &["body", "key"])?;
                key
            }
            None => {
                let current = signing_keys(state, endpoint).await?;
                current
                    .first()
                    .map_or_else(crate::secret::generate, |k| crate::secret::generate_like(k))
            }
        };
        Ok(Self {
            app: endpoint.app_id,
            endpoint: endpoint.id,
            key,
            old_valid_until: state.now() + grace,
        })
    }
}

/// The keys `endpoint` signs with now, as the store orders them: the current one first, then
/// any still in a rotation's overlap.
pub async fn signing_keys(state: &AppState, endpoint: &Endpoint) -> ApiResult<Vec<String>> {
    let secrets = (state.store)
        .endpoint_secrets(endpoint.app_id, endpoint.id, state.now())
        .await?;
    Ok(secrets.into_iter().map(|s| s.key).collect())
}

/// 422 naming `loc` unless every one of `keys` can sign deliveries of `style`
/// ([`crate::secret::signs_in`]: a seed style cannot sign with an ed25519 key).
pub fn require_style_fits<S: AsRef<str>>(
    style: SignatureStyle,
    keys: &[S],
    loc: &[&str],
) -> ApiResult<()> {
    if keys
        .iter()
        .all(|k| crate::secret::signs_in(k.as_ref(), style))
    {
        return Ok(());
    }
    Err(ApiError::Validation(vec![ValidationItem::new(
        loc,
        crate::secret::style_mismatch(style),
        "value_error.signature_style",
    )]))
}

impl Action for Rotation {
    type Done = ();

    async fn write(
        self,
        store: Arc<dyn Store>,
        keyed: Option<Completion<()>>,
    ) -> StoreResult<Applied<()>> {
        let Rotation {
            app,
            endpoint,
            key,
            old_valid_until,
        } = self;
        (store.rotate_endpoint_secret_keyed(app, endpoint, key, old_valid_until, keyed)).await
    }
}

/// An event type's example sent to one endpoint only: a real message, signed, retried and
/// listed like any other, with a single delivery (written with it in one transaction).
#[derive(Debug, Clone)]
pub struct Example {
    create: MessageCreate,
}

impl Example {
    /// Example `index` of `event_type` (see [`example_payload`]) as a message of `app` for
    /// `endpoint`; 404 when the event type does not exist or is archived.
    pub async fn new(
        state: &AppState,
        app: AppId,
        endpoint: EndpointId,
        event_type: &EventTypeName,
        index: usize,
        at: &[&str],
    ) -> ApiResult<Self> {
        let name = event_type.as_str();
        let event_type = match state.store.get_event_type(name).await? {
            Some(et) if !et.archived => et,
            _ => return Err(ApiError::NotFound(format!("Event type {name:?} not found"))),
        };
        let payload = example_payload(&event_type, index, at)?;
        let now = state.now();
        let new = NewMessage {
            id: MessageId::new(),
            app_id: app,
            event_id: None,
            event_type: name.to_string(),
            channels: None,
            payload: payload.to_string(),
            payload_expires_at: now + Duration::days(state.settings.payload_retention_days),
            now,
            traceparent: None,
        };
        Ok(Self {
            create: MessageCreate {
                new,
                only: Some(endpoint),
                app: None,
            },
        })
    }

    /// The message that will be created.
    pub fn message(&self) -> &NewMessage {
        &self.create.new
    }
}

impl Action for Example {
    type Done = CreatedMessage;

    async fn write(
        self,
        store: Arc<dyn Store>,
        keyed: Option<Completion<CreatedMessage>>,
    ) -> StoreResult<Applied<CreatedMessage>> {
        store.create_message_keyed(self.create, keyed).await
    }
}

/// The payload of example `index` of `event_type`: `examples[index]` of its latest schema
/// version that has examples (422 past the last one, naming `at`), or, when no schema has any,
/// the placeholder `{"type": <event type>, "data": {"example": true}}` whatever the index (as
/// Svix ignores it then), so an endpoint can be tried before its event types are documented.
fn example_payload(
    event_type: &EventType,
    index: usize,
    at: &[&str],
) -> ApiResult<serde_json::Value> {
    let examples = event_type
        .schemas
        .as_ref()
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(version, schema)| {
            let examples = schema.get("examples")?.as_array()?;
            Some((version.parse::<u64>().unwrap_or(0), examples))
        })
        .filter(|(_, examples)| !examples.is_empty())
        .max_by_key(|(version, _)| *version)
        .map(|(_, examples)| examples);
    let Some(examples) = examples else {
        return Ok(serde_json::json!({"type": event_type.name, "data": {"example": true}}));
    };
    let example = examples.get(index).ok_or_else(|| {
        let msg = format!(
            "event type {:?} has {} schema example(s): the index must be below that",
            event_type.name,
            examples.len()
        );
        ApiError::invalid(at, msg, "value_error.number.range")
    })?;
    if !example.is_object() {
        let msg = format!(
            "example {index} of {:?} is not a JSON object",
            event_type.name
        );
        return Err(ApiError::invalid(at, msg, "type_error.dict"));
    }
    Ok(example.clone())
}

/// Enables or disables `endpoint` (the same write as the API's `PATCH {"disabled": ..}`).
pub async fn set_disabled(
    state: &AppState,
    endpoint: Endpoint,
    disabled: bool,
) -> ApiResult<Endpoint> {
    let mut fields = endpoint.fields;
    fields.disabled = disabled;
    Ok(state
        .store
        .update_endpoint(endpoint.app_id, endpoint.id, fields)
        .await?)
}
