//! The rows vow stores, as plain structs. Inputs are `New…` (the caller picks ids, so a retried
//! create can be recognised) and `…Fields` (the full replaceable state, after a handler merged a
//! PATCH into the stored row).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use vow_core::{AppId, DeliveryId, EndpointId, MessageId};

/// String-to-string metadata clients attach to applications and endpoints.
pub type Metadata = BTreeMap<String, String>;

/// How a path names an application: its id, or the uid the client gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppKey {
    /// `app_…`
    Id(AppId),
    /// A client-chosen uid.
    Uid(String),
}

/// How a path names an endpoint: its id or its uid (within the application).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointKey {
    /// `ep_…`
    Id(EndpointId),
    /// A client-chosen uid.
    Uid(String),
}

/// How a path names a message: its id or the client's `eventId`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageKey {
    /// `msg_…`
    Id(MessageId),
    /// The client's `eventId`.
    EventId(String),
}

/// An application's replaceable fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApplicationFields {
    /// Display name.
    pub name: String,
    /// Optional unique identifier.
    pub uid: Option<String>,
    /// Maximum messages per second to this application's endpoints.
    pub throttle_rate: Option<u16>,
    /// Free-form metadata.
    pub metadata: Metadata,
}

/// A new application.
#[derive(Debug, Clone)]
pub struct NewApplication {
    /// Its id, chosen by the caller.
    pub id: AppId,
    /// Its fields.
    pub fields: ApplicationFields,
    /// Creation time (also the first `updated_at`).
    pub now: DateTime<Utc>,
}

/// A stored application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Application {
    /// Id.
    pub id: AppId,
    /// Fields.
    pub fields: ApplicationFields,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// An event type (global, not per application, as in Svix).
#[derive(Debug, Clone, PartialEq)]
pub struct EventType {
    /// Validated name, the key.
    pub name: String,
    /// Description.
    pub description: String,
    /// Archived ("deleted" but kept).
    pub archived: bool,
    /// Deprecated.
    pub deprecated: bool,
    /// Feature flag gating it.
    pub feature_flag: Option<String>,
    /// JSON schemas by version.
    pub schemas: Option<serde_json::Value>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// An endpoint's replaceable fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EndpointFields {
    /// Destination URL (validated as [`vow_core::EndpointUrl`]).
    pub url: String,
    /// Optional unique identifier within the application.
    pub uid: Option<String>,
    /// Description.
    pub description: String,
    /// Disabled endpoints get delivery rows but are not attempted.
    pub disabled: bool,
    /// Event-type filter; `None` = all.
    pub event_types: Option<Vec<String>>,
    /// Channel filter; `None` = all.
    pub channels: Option<Vec<String>>,
    /// Maximum messages per second.
    pub throttle_rate: Option<u16>,
    /// Free-form metadata.
    pub metadata: Metadata,
    /// Custom headers sent with every delivery.
    pub headers: BTreeMap<String, String>,
    /// How deliveries to it are signed, timed out and retried.
    pub delivery: DeliveryOptions,
}

/// Per-endpoint delivery settings (vow extensions to Svix's endpoint).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeliveryOptions {
    /// Signature headers to send.
    pub signature_style: vow_core::SignatureStyle,
    /// Per-attempt timeout in milliseconds; `None` = the server's default (10 s).
    pub timeout_ms: Option<u32>,
    /// Retry schedule; `None` = the server's default.
    pub retry_schedule: Option<vow_core::RetrySchedule>,
}

/// A new endpoint. Its `Debug` leaves the secret out.
#[derive(Clone)]
pub struct NewEndpoint {
    /// Its id, chosen by the caller.
    pub id: EndpointId,
    /// The application it belongs to.
    pub app_id: AppId,
    /// Its fields.
    pub fields: EndpointFields,
    /// Its first signing secret (`whsec_…`).
    pub secret: String,
    /// Creation time.
    pub now: DateTime<Utc>,
}

impl std::fmt::Debug for NewEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewEndpoint")
            .field("id", &self.id)
            .field("app_id", &self.app_id)
            .field("fields", &self.fields)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// A stored endpoint. Secrets are read separately ([`crate::Endpoints::endpoint_secrets`]) so they
/// never ride along where they are not needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Id.
    pub id: EndpointId,
    /// Owner.
    pub app_id: AppId,
    /// Fields.
    pub fields: EndpointFields,
    /// Why vow disabled it (dead letters in a row, or a 410), while it stays disabled; `None`
    /// when it is enabled or an operator disabled it.
    pub disabled_reason: Option<String>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// One signing secret of an endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct EndpointSecret {
    /// The key, `whsec_…`.
    pub key: String,
    /// `None` for the current secret; the end of the grace period for a rotated-out one.
    pub valid_until: Option<DateTime<Utc>>,
}

impl std::fmt::Debug for EndpointSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSecret")
            .field("key", &"<redacted>")
            .field("valid_until", &self.valid_until)
            .finish()
    }
}

/// A new message.
#[derive(Debug, Clone)]
pub struct NewMessage {
    /// Its id, chosen by the caller and made at `now` (retention finds old messages by id).
    pub id: MessageId,
    /// The application sending it.
    pub app_id: AppId,
    /// The client's unique id for it, if any.
    pub event_id: Option<String>,
    /// Event type name.
    pub event_type: String,
    /// Channels; `None` when the client gave none.
    pub channels: Option<Vec<String>>,
    /// The payload exactly as the client sent it (a JSON object, as raw text).
    pub payload: String,
    /// When the payload may be deleted.
    pub payload_expires_at: DateTime<Utc>,
    /// Creation time (the message's `timestamp`).
    pub now: DateTime<Utc>,
    /// The W3C `traceparent` of the span that created it, so its delivery attempts can join
    /// that trace; `None` when it was created outside any trace.
    pub traceparent: Option<String>,
}

impl NewMessage {
    /// The message as both stores keep and return it: these values, times in whole
    /// microseconds. Known before the write, so a keyed create can store its response with its
    /// claim.
    pub fn into_stored(self) -> Message {
        let micros = |t: DateTime<Utc>| DateTime::from_timestamp_micros(t.timestamp_micros());
        Message {
            id: self.id,
            app_id: self.app_id,
            event_id: self.event_id,
            event_type: self.event_type,
            channels: self.channels,
            payload: Some(self.payload),
            payload_expires_at: micros(self.payload_expires_at).unwrap_or(self.payload_expires_at),
            created_at: micros(self.now).unwrap_or(self.now),
            traceparent: self.traceparent,
        }
    }
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Id.
    pub id: MessageId,
    /// Owner.
    pub app_id: AppId,
    /// Client's id.
    pub event_id: Option<String>,
    /// Event type.
    pub event_type: String,
    /// Channels.
    pub channels: Option<Vec<String>>,
    /// Raw payload; `None` once expunged or expired.
    pub payload: Option<String>,
    /// When the payload may be deleted.
    pub payload_expires_at: DateTime<Utc>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// The W3C `traceparent` of the span that created it.
    pub traceparent: Option<String>,
}

/// What `create_message` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedMessage {
    /// The message.
    pub message: Message,
    /// How many delivery rows were written with it.
    pub deliveries: usize,
}

/// Filters for listing messages.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    /// Only these event types (empty = all).
    pub event_types: Vec<String>,
    /// Only messages on this channel.
    pub channel: Option<String>,
    /// Only messages created strictly before.
    pub before: Option<DateTime<Utc>>,
    /// Only messages created strictly after.
    pub after: Option<DateTime<Utc>>,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeliveryStatus {
    /// Waiting for its next attempt.
    Pending,
    /// Its endpoint is disabled: kept, not attempted, until replayed.
    Held,
    /// An attempt got a 2xx.
    Delivered,
    /// Every attempt failed.
    DeadLettered,
}

impl DeliveryStatus {
    /// The stored text form.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Held => "held",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::DeadLettered => "dead_lettered",
        }
    }

    /// Parses the stored text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => DeliveryStatus::Pending,
            "held" => DeliveryStatus::Held,
            "delivered" => DeliveryStatus::Delivered,
            "dead_lettered" => DeliveryStatus::DeadLettered,
            _ => return None,
        })
    }
}

/// The delivery of one message to one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Id.
    pub id: DeliveryId,
    /// Owner.
    pub app_id: AppId,
    /// The message.
    pub msg_id: MessageId,
    /// The endpoint.
    pub endpoint_id: EndpointId,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made in the current run of the schedule (reset by resend and replay).
    pub attempts: u32,
    /// 4xx responses in the current run (the policy allows only a few).
    pub client_errors: u32,
    /// Status code of the last attempt's response, if it got one.
    pub last_status: Option<u16>,
    /// Why it was dead-lettered, when it was.
    pub dead_letter_reason: Option<String>,
    /// When it is next due.
    pub next_attempt_at: DateTime<Utc>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// An operator asked for the next attempt (resend, replay, recover): it is recorded as a
    /// manual attempt. Recording any attempt clears it.
    pub manual: bool,
}
