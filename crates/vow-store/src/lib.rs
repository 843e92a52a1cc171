//! The storage contract of vow: one [`Store`] trait, implemented once per backend.
//!
//! Every state change the API makes is one `Store` method and so one transaction in the backend:
//! a message and its delivery rows are written together or not at all. Backends translate their
//! own error codes (unique violations, lost connections) into [`StoreError`] so callers never see
//! SQL. The [`conformance`] module holds the behaviour suite every backend must pass, generic over
//! the trait, so SQLite and PostgreSQL stay equivalent.
//!
//! # Layout
//! - [`model`]: the rows: applications, event types, endpoints, messages, deliveries.
//! - [`page`]: keyset pagination (`Seek`) and Svix-style pages (`iterator`, `prevIterator`).
//! - [`queue`]: [`DeliveryQueue`], the delivery queue workers claim from and record into.
//! - [`inbound`]: [`InboundStore`], sources of inbound webhooks and the events claimed from them.
//! - [`error`]: the error type, [`StoreError`].
//! - [`idempotency`]: what the `Idempotency-Key` methods take: the write ([`idempotency::Write`])
//!   and the record it completes ([`idempotency::Completion`]).
//! - [`rules`]: the business rules both backends apply, as pure functions (superseding by
//!   version, dead-letter counting, leases).
//! - [`conformance`]: the shared behaviour suite and the macro that instantiates it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod conformance;
pub mod error;
pub mod idempotency;
pub mod inbound;
pub mod model;
pub mod page;
pub mod queue;
pub mod rules;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use idempotency::{
    Begun, Completion, Fingerprint, KeyStatus, LeaseToken, Scope, Settings, StoredResponse, Write,
    Written,
};
use vow_core::{AppId, EndpointId, MessageId};

pub use error::{StoreError, StoreResult};
pub use inbound::InboundStore;
pub use model::*;
pub use page::{Order, Seek};
pub use queue::DeliveryQueue;

/// Everything vow persists. Implementations: `vow-store-sqlite`, `vow-store-postgres`.
///
/// Methods scoped to an application take its [`AppId`] and never touch another application's
/// rows: an endpoint id that exists under another application is simply not found.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Which backend this is (`"sqlite"`, `"postgres"`), for logs and health output.
    fn backend(&self) -> &'static str;

    /// Cheap round trip to the database. Fails with [`StoreError::Unavailable`] when it is down.
    async fn ping(&self) -> StoreResult<()>;

    // ---- settings -----------------------------------------------------------------------------

    /// Stores the admin token's hash unless one is stored already; returns the hash in force
    /// (the existing one when there was one), so two processes starting at once agree.
    async fn init_admin_token_hash(&self, hash: &str) -> StoreResult<String>;

    /// The stored admin token hash, if any.
    async fn admin_token_hash(&self) -> StoreResult<Option<String>>;

    // ---- applications -------------------------------------------------------------------------

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

    // ---- event types --------------------------------------------------------------------------

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

    // ---- endpoints ----------------------------------------------------------------------------

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

    // ---- messages -----------------------------------------------------------------------------

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

    // ---- idempotency records (ADR 6) ----------------------------------------------------------

    /// Claims `scope` for a request with `fingerprint` and `canonical_body` at `now`, in its own
    /// short transaction, or says why not ([`Begun`]). A claim (new, or taken over) gets
    /// `settings`' lease and expiry.
    async fn begin_idempotent(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<Begun>;

    /// Deletes the `in_progress` record `token` owns (an outcome that is not final). Whether
    /// there was one.
    async fn release_idempotent(&self, scope: &Scope, token: &LeaseToken) -> StoreResult<bool>;

    /// Ages idempotency records at `now`, at most `batch` rows: an expired completed record
    /// becomes a tombstone (scope, fingerprint, resource; no bodies), and ended tombstones and
    /// abandoned claims are deleted. How many rows changed. Each row carries its own deadlines,
    /// set from the [`Settings`] it was written with.
    async fn purge_idempotent(&self, now: DateTime<Utc>, batch: usize) -> StoreResult<usize>;

    /// Completes the record `token` owns with `response`, on its own: for a final outcome that
    /// wrote nothing (the create answered 404 or 409), so a retry replays it.
    /// [`StoreError::Fenced`] when the token no longer owns the record. Its expiry and
    /// tombstone count from `now` by `settings`.
    async fn complete_idempotent(
        &self,
        scope: &Scope,
        token: &LeaseToken,
        response: StoredResponse,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<()>;

    /// Runs `write` in ONE transaction, and with a `completion`, completes its idempotency
    /// record in that same transaction: checks the token first (fence), runs the write, renders
    /// the response and stores it, completed at `completion.now` with `completion.settings`'
    /// expiry and tombstone. Without one it is the write's
    /// own store method. [`StoreError::Fenced`] when the token no longer owns the record; nothing
    /// is written on any error. Returns what the write produced and the stored response.
    async fn apply(
        &self,
        write: Write,
        completion: Option<Completion>,
    ) -> StoreResult<(Written, Option<StoredResponse>)>;

    /// Where `scope`'s key stands at `now` (`None`: the key is free).
    async fn idempotency_status(
        &self,
        scope: &Scope,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<KeyStatus>>;

    /// When the oldest idempotency claim still in progress began, if any (a stuck request
    /// shows here until its record expires): its lease's end less `settings`' lease.
    async fn oldest_idempotent_claim(
        &self,
        settings: &Settings,
    ) -> StoreResult<Option<DateTime<Utc>>>;
}
