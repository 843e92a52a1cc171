//! The store's per-entity traits, one per kind of row: [`Admin`] (the backend itself and the
//! admin token), [`Applications`], [`EventTypes`], [`Endpoints`] (with their secrets) and
//! [`Messages`] (with their deliveries). [`crate::Store`] gathers them with the queue, inbound and
//! idempotency traits; each backend implements each trait in the module that owns its SQL.
//!
//! Methods scoped to an application take its [`AppId`] and never touch another application's
//! rows: an endpoint id that exists under another application is simply not found.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{AppId, EndpointId, MessageId};

use crate::{
    AppKey, Application, ApplicationFields, CreatedMessage, Delivery, Endpoint, EndpointFields,
    EndpointKey, EndpointSecret, EventType, Message, MessageFilter, MessageKey, NewApplication,
    NewEndpoint, NewMessage, Seek, StoreResult,
};

/// The backend itself: its name, a round trip, and the settings it keeps (the admin token).
#[async_trait]
pub trait Admin: Send + Sync + 'static {
    /// Which backend this is (`"sqlite"`, `"postgres"`), for logs and health output.
    fn backend(&self) -> &'static str;

    /// Cheap round trip to the database. Fails with [`crate::StoreError::Unavailable`] when it is down.
    async fn ping(&self) -> StoreResult<()>;

    /// Stores the admin token's hash unless one is stored already; returns the hash in force
    /// (the existing one when there was one), so two processes starting at once agree.
    async fn init_admin_token_hash(&self, hash: &str) -> StoreResult<String>;

    /// The stored admin token hash, if any.
    async fn admin_token_hash(&self) -> StoreResult<Option<String>>;
}

/// Applications.
#[async_trait]
pub trait Applications: Send + Sync + 'static {
    /// Creates an application. `Conflict` when its uid is taken.
    async fn create_application(&self, new: NewApplication) -> StoreResult<Application>;

    /// Finds an application by id or uid.
    async fn get_application(&self, key: &AppKey) -> StoreResult<Option<Application>>;

    /// Lists applications ordered by id.
    async fn list_applications(&self, seek: &Seek) -> StoreResult<Vec<Application>>;

    /// Replaces an application's fields. `NotFound` when it does not exist, `Conflict` when the
    /// new uid is taken.
    async fn update_application(
        &self,
        id: AppId,
        fields: ApplicationFields,
    ) -> StoreResult<Application>;

    /// Deletes an application and everything that belongs to it. `NotFound` when absent.
    async fn delete_application(&self, id: AppId) -> StoreResult<()>;
}

/// Event types (global, not per application).
#[async_trait]
pub trait EventTypes: Send + Sync + 'static {
    /// Creates an event type. `Conflict` when the name exists (archived or not).
    async fn create_event_type(&self, new: EventType) -> StoreResult<EventType>;

    /// Finds an event type by name, archived ones included.
    async fn get_event_type(&self, name: &str) -> StoreResult<Option<EventType>>;

    /// Lists event types ordered by name; archived ones only when asked.
    async fn list_event_types(
        &self,
        seek: &Seek,
        include_archived: bool,
    ) -> StoreResult<Vec<EventType>>;

    /// Replaces an event type's mutable fields (everything but name and createdAt).
    /// `NotFound` when absent.
    async fn update_event_type(&self, updated: EventType) -> StoreResult<EventType>;

    /// Deletes an event type row for good (`expunge`). `NotFound` when absent.
    async fn expunge_event_type(&self, name: &str) -> StoreResult<()>;
}

/// An application's endpoints and their signing secrets.
#[async_trait]
pub trait Endpoints: Send + Sync + 'static {
    /// Creates an endpoint with its first secret. `NotFound` when the application is gone,
    /// `Conflict` when the uid is taken within the application.
    async fn create_endpoint(&self, new: NewEndpoint) -> StoreResult<Endpoint>;

    /// Finds an endpoint of `app` by id or uid.
    async fn get_endpoint(&self, app: AppId, key: &EndpointKey) -> StoreResult<Option<Endpoint>>;

    /// Lists an application's endpoints ordered by id.
    async fn list_endpoints(&self, app: AppId, seek: &Seek) -> StoreResult<Vec<Endpoint>>;

    /// Replaces an endpoint's fields. `NotFound` / `Conflict` as for applications.
    async fn update_endpoint(
        &self,
        app: AppId,
        id: EndpointId,
        fields: EndpointFields,
    ) -> StoreResult<Endpoint>;

    /// Deletes an endpoint and its secrets and deliveries. `NotFound` when absent.
    async fn delete_endpoint(&self, app: AppId, id: EndpointId) -> StoreResult<()>;

    /// The endpoint's secrets that are valid at `now`, newest first: the current one, then
    /// rotated-out ones still inside their grace period. `NotFound` when the endpoint is absent.
    async fn endpoint_secrets(
        &self,
        app: AppId,
        id: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<EndpointSecret>>;

    /// Makes `new_key` the current secret; the previous current secret stays valid until
    /// `old_valid_until`. One transaction. `NotFound` when the endpoint is absent.
    async fn rotate_endpoint_secret(
        &self,
        app: AppId,
        id: EndpointId,
        new_key: String,
        old_valid_until: DateTime<Utc>,
    ) -> StoreResult<()>;
}

/// Messages and the delivery rows they fan out into.
#[async_trait]
pub trait Messages: Send + Sync + 'static {
    /// Writes a message and one delivery row per matching endpoint of its application, in one
    /// transaction (see [`vow_core::matching`]; deliveries to disabled endpoints are `Held`).
    /// `Conflict` when the application already has a message with this `event_id`; `NotFound`
    /// when the application is gone. Nothing is written on any error.
    async fn create_message(&self, new: NewMessage) -> StoreResult<CreatedMessage>;

    /// Writes a message with one delivery row, to `endpoint` only, whatever its filters (Svix's
    /// send-example), in one transaction; `Held` when the endpoint is disabled. `NotFound` when
    /// the application or the endpoint (within it) is gone; nothing is written on any error.
    async fn create_message_to_endpoint(
        &self,
        new: NewMessage,
        endpoint: EndpointId,
    ) -> StoreResult<CreatedMessage>;

    /// Finds a message of `app` by id or event id.
    async fn get_message(&self, app: AppId, key: &MessageKey) -> StoreResult<Option<Message>>;

    /// Lists an application's messages, newest first unless `seek` says otherwise, filtered.
    async fn list_messages(
        &self,
        app: AppId,
        filter: &MessageFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<Message>>;

    /// The delivery rows of a message (for tests and, later, the attempts API).
    async fn list_deliveries(&self, app: AppId, msg: MessageId) -> StoreResult<Vec<Delivery>>;
}
