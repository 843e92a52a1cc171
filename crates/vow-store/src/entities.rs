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

use crate::idempotency::{Applied, Completion};
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

    /// Whether the schema has every migration this binary knows (a database a newer binary
    /// migrated further is current too): `/health/ready` fails while it is behind.
    async fn schema_current(&self) -> StoreResult<bool>;

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
    async fn create_application(&self, new: NewApplication) -> StoreResult<Application> {
        Ok(self.create_application_keyed(new, None).await?.0)
    }

    /// [`Applications::create_application`], completing `keyed`'s record in its transaction.
    async fn create_application_keyed(
        &self,
        new: NewApplication,
        keyed: Option<Completion<Application>>,
    ) -> StoreResult<Applied<Application>>;

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
    async fn create_event_type(&self, new: EventType) -> StoreResult<EventType> {
        Ok(self.create_event_type_keyed(new, None).await?.0)
    }

    /// [`EventTypes::create_event_type`], completing `keyed`'s record in its transaction.
    async fn create_event_type_keyed(
        &self,
        new: EventType,
        keyed: Option<Completion<EventType>>,
    ) -> StoreResult<Applied<EventType>>;

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
    async fn update_event_type(&self, updated: EventType) -> StoreResult<EventType> {
        Ok(self.update_event_type_keyed(updated, None).await?.0)
    }

    /// [`EventTypes::update_event_type`], completing `keyed`'s record in its transaction
    /// (reviving an archived event type on create).
    async fn update_event_type_keyed(
        &self,
        updated: EventType,
        keyed: Option<Completion<EventType>>,
    ) -> StoreResult<Applied<EventType>>;

    /// Deletes an event type row for good (`expunge`). `NotFound` when absent.
    async fn expunge_event_type(&self, name: &str) -> StoreResult<()>;
}

/// An application's endpoints and their signing secrets.
#[async_trait]
pub trait Endpoints: Send + Sync + 'static {
    /// Creates an endpoint with its first secret. `NotFound` when the application is gone,
    /// `Conflict` when the uid is taken within the application.
    async fn create_endpoint(&self, new: NewEndpoint) -> StoreResult<Endpoint> {
        Ok(self.create_endpoint_keyed(new, None).await?.0)
    }

    /// [`Endpoints::create_endpoint`], completing `keyed`'s record in its transaction.
    async fn create_endpoint_keyed(
        &self,
        new: NewEndpoint,
        keyed: Option<Completion<Endpoint>>,
    ) -> StoreResult<Applied<Endpoint>>;

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
    ) -> StoreResult<()> {
        let rotated = self.rotate_endpoint_secret_keyed(app, id, new_key, old_valid_until, None);
        rotated.await.map(drop)
    }

    /// [`Endpoints::rotate_endpoint_secret`], completing `keyed`'s record in its transaction.
    async fn rotate_endpoint_secret_keyed(
        &self,
        app: AppId,
        id: EndpointId,
        new_key: String,
        old_valid_until: DateTime<Utc>,
        keyed: Option<Completion<()>>,
    ) -> StoreResult<Applied<()>>;
}

/// A message create: the message, and how it is written.
#[derive(Debug, Clone)]
pub struct MessageCreate {
    /// The message.
    pub new: NewMessage,
    /// The one endpoint to deliver to, whatever its filters (Svix's send-example): one
    /// delivery row, `Held` when the endpoint is disabled; `NotFound` when the endpoint (within
    /// the application) is gone.
    pub only: Option<EndpointId>,
    /// The application to create first, in the same transaction (a uid that names none
    /// yet, created from `MessageIn.application`); `new.app_id` is its id. A uid taken
    /// meanwhile is a [`crate::StoreError::Conflict`], and nothing is written.
    pub app: Option<NewApplication>,
}

/// Messages and the delivery rows they fan out into.
#[async_trait]
pub trait Messages: Send + Sync + 'static {
    /// Writes a message and one delivery row per matching endpoint of its application, in one
    /// transaction (see [`vow_core::matching`]; deliveries to disabled endpoints are `Held`).
    /// `Conflict` when the application already has a message with this `event_id`; `NotFound`
    /// when the application is gone. Nothing is written on any error.
    async fn create_message(&self, new: NewMessage) -> StoreResult<CreatedMessage> {
        let create = MessageCreate {
            new,
            only: None,
            app: None,
        };
        Ok(self.create_message_keyed(create, None).await?.0)
    }

    /// [`Messages::create_message`] for a message vow owes rather than one a client offers (an
    /// operational event): never refused when the store is overloaded
    /// ([`crate::StoreError::Overloaded`]), which `create_message` may be.
    async fn create_owed_message(&self, new: NewMessage) -> StoreResult<CreatedMessage>;

    /// [`Messages::create_message`] as [`MessageCreate`] says (to one endpoint only, after
    /// creating its application), completing `keyed`'s record in its transaction.
    async fn create_message_keyed(
        &self,
        create: MessageCreate,
        keyed: Option<Completion<CreatedMessage>>,
    ) -> StoreResult<Applied<CreatedMessage>>;

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
