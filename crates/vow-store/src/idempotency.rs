//! `Idempotency-Key` records in the store (ADR 6): the types the [`crate::Store`] methods
//! `begin_idempotent`, `release_idempotent` and [`crate::IdempotencyRecords::apply`] take, re-exported from
//! `vow-idempotency`, plus what a create carries to complete its record in the same transaction:
//! the write itself ([`Write`]), what it produced ([`Written`]) and the [`Completion`].
//!
//! How long records live ([`Settings`]: the lease, the replay window, the tombstone) is the
//! caller's to say, on every call that writes a deadline: stores keep no settings of their own,
//! so the server's configuration is the one place they come from.
//!
//! Every API write that honours the header (the creates, and the inbound operations: a pull
//! consumer's claim, complete and fail, an operator's resolve, replay, release and discard) is
//! one [`Write`]: one store method
//! ([`crate::IdempotencyRecords::apply`]) runs any of them in one transaction, with or without a record to
//! complete, so each backend owns that transaction once instead of once per route.

pub use vow_idempotency::{
    Begun, Fingerprint, KeyState, KeyStatus, LeaseToken, Recorded, Scope, Settings, StoredResponse,
};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{AppId, DestinationId, EndpointId, InboundEventId, MessageId, SourceId};

use crate::inbound::decisions::Decided;
use crate::inbound::processing::{Resolution, WorkClaim, WorkOutcome, WorkRequest};
use crate::inbound::{InboundEvent, InboundState, NewSource, Source};
use crate::queue::ReplayFilter;
use crate::{Application, CreatedMessage, Delivery, Endpoint, EventType, NewApplication};
use crate::{NewEndpoint, NewMessage, StoreResult};

/// A write the API makes at most once per `Idempotency-Key`: each variant is the input of the
/// store method of the same name. Its `Debug` names the variant only (secrets ride in some).
#[derive(Clone)]
#[non_exhaustive]
pub enum Write {
    /// [`crate::Applications::create_application`].
    CreateApplication(NewApplication),
    /// [`crate::EventTypes::create_event_type`].
    CreateEventType(EventType),
    /// [`crate::EventTypes::update_event_type`] (reviving an archived event type on create).
    UpdateEventType(EventType),
    /// [`crate::Endpoints::create_endpoint`].
    CreateEndpoint(NewEndpoint),
    /// [`crate::Messages::create_message`], or [`crate::Messages::create_message_to_endpoint`] when
    /// `only` names the endpoint.
    CreateMessage {
        /// The message.
        new: NewMessage,
        /// The one endpoint to deliver to, whatever its filters (send-example).
        only: Option<EndpointId>,
        /// The application to create first, in the same transaction (a uid that names none
        /// yet, created from `MessageIn.application`); `new.app_id` is its id. A uid taken
        /// meanwhile is a [`crate::StoreError::Conflict`], and nothing is written.
        app: Option<NewApplication>,
    },
    /// [`crate::Endpoints::rotate_endpoint_secret`].
    RotateEndpointSecret {
        /// The application.
        app: AppId,
        /// The endpoint.
        endpoint: EndpointId,
        /// The new current secret.
        new_key: String,
        /// Until when the previous secret stays valid.
        old_valid_until: DateTime<Utc>,
    },
    /// [`crate::queue::DeliveryOperators::resend`].
    Resend {
        /// The application.
        app: AppId,
        /// The message.
        msg: MessageId,
        /// The endpoint.
        endpoint: EndpointId,
        /// When.
        now: DateTime<Utc>,
    },
    /// [`crate::queue::DeliveryOperators::replay`] (never a dry run: a dry run writes nothing).
    Replay {
        /// The application.
        app: AppId,
        /// The endpoint.
        endpoint: EndpointId,
        /// Which deliveries.
        filter: ReplayFilter,
        /// When.
        now: DateTime<Utc>,
        /// How far apart the replayed deliveries are scheduled.
        spacing: chrono::Duration,
    },
    /// [`crate::inbound::Sources::create_source`].
    CreateSource(NewSource),
    /// [`crate::inbound::InboundWork::claim_inbound_work`] (a pull consumer's claim).
    ClaimInboundWork(WorkRequest),
    /// [`crate::inbound::InboundWork::record_inbound_work`] (a pull consumer's complete or fail),
    /// producing [`Written::InboundEvent`]; a lost lease is the error
    /// [`crate::inbound::processing::lease_lost`]
    /// ([`crate::inbound::processing::WorkRecorded::into_event`]).
    RecordInboundWork(WorkOutcome),
    /// [`crate::inbound::InboundDecisions::resolve_uncertain`], producing [`Written::Decided`].
    ResolveUncertain {
        /// The source.
        source: SourceId,
        /// The event.
        event: InboundEventId,
        /// The operator's decision.
        resolution: Resolution,
        /// The one destination to decide on; `None`: every uncertain one.
        destination: Option<DestinationId>,
        /// When.
        now: DateTime<Utc>,
    },
    /// [`crate::inbound::InboundDecisions::replay_inbound`], producing [`Written::Decided`].
    ReplayInbound {
        /// The source.
        source: SourceId,
        /// The event.
        event: InboundEventId,
        /// The one destination to forward to again; `None`: every failed one.
        destination: Option<DestinationId>,
        /// When.
        now: DateTime<Utc>,
    },
    /// [`crate::inbound::InboundEvents::resolve_quarantined`] (release or discard).
    ResolveQuarantined {
        /// The source.
        source: SourceId,
        /// The event.
        event: InboundEventId,
        /// `Received` (release) or `Discarded`.
        to: InboundState,
        /// When.
        now: DateTime<Utc>,
    },
}

impl std::fmt::Debug for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::CreateApplication(_) => "CreateApplication",
            Self::CreateEventType(_) => "CreateEventType",
            Self::UpdateEventType(_) => "UpdateEventType",
            Self::CreateEndpoint(_) => "CreateEndpoint",
            Self::CreateMessage { .. } => "CreateMessage",
            Self::RotateEndpointSecret { .. } => "RotateEndpointSecret",
            Self::Resend { .. } => "Resend",
            Self::Replay { .. } => "Replay",
            Self::CreateSource(_) => "CreateSource",
            Self::ClaimInboundWork(_) => "ClaimInboundWork",
            Self::RecordInboundWork(_) => "RecordInboundWork",
            Self::ResolveUncertain { .. } => "ResolveUncertain",
            Self::ReplayInbound { .. } => "ReplayInbound",
            Self::ResolveQuarantined { .. } => "ResolveQuarantined",
        })
    }
}

/// What a [`Write`] produced, variant for variant.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Written {
    /// The application created.
    Application(Application),
    /// The event type created or revived.
    EventType(EventType),
    /// The endpoint created.
    Endpoint(Endpoint),
    /// The message created, with its delivery count.
    Message(CreatedMessage),
    /// The secret rotated.
    SecretRotated,
    /// The delivery made due again.
    Resent(Delivery),
    /// How many deliveries a replay made due again.
    Replayed(u64),
    /// The source created.
    Source(Source),
    /// What a pull claim leased (and settled on the way).
    InboundClaimed(WorkClaim),
    /// The inbound event after a pull consumer's outcome or an operator's release or discard.
    InboundEvent(InboundEvent),
    /// An operator's decision on an inbound event's destinations (resolve, replay).
    Decided(Decided),
}

impl Written {
    /// Whether delivery workers have new work to look at.
    pub fn queues_work(&self) -> bool {
        match self {
            Self::Message(created) => created.deliveries > 0,
            Self::Resent(_) => true,
            Self::Replayed(count) => *count > 0,
            _ => false,
        }
    }
}

/// The response a [`Completion`] stores and replays.
pub enum Render {
    /// Rendered before the write, because the write's success answers exactly this (a
    /// message create: its row is the request's values). The store can then claim the key with
    /// its response, and nothing is rendered inside the transaction; a failed write rolls the
    /// record back with it.
    Ready(StoredResponse),
    /// Rendered from the write's result, inside the transaction.
    From(Box<dyn FnOnce(&Written) -> StoredResponse + Send>),
}

impl Render {
    /// The response for `written`.
    pub fn response(self, written: &Written) -> StoredResponse {
        match self {
            Self::Ready(response) => response,
            Self::From(render) => render(written),
        }
    }
}

/// What completes an idempotency record in the transaction of the write it protects: the record
/// (its scope and the owner's lease token, checked first) and the response to store.
pub struct Completion {
    /// The record's scope.
    pub scope: Scope,
    /// The owner's lease token: from [`Begun::Owner`] or [`Begun::TakenOver`], or, with
    /// `fresh`, a new one the record is claimed with.
    pub token: LeaseToken,
    /// `Some` to claim the key inside the transaction, with no record begun: the transaction
    /// runs the write, then records the key as completed (one insert, one commit for all). A
    /// key whose record was abandoned (an expired lease, an ended tombstone) is taken over by
    /// that record's token and completed instead; a key with any other record by then is
    /// [`crate::StoreError::Fenced`], writing nothing (the caller begins the record to learn its
    /// answer). `None`: the record was begun; the transaction fences it by `token` first and
    /// completes it last.
    pub fresh: Option<FreshClaim>,
    /// When the record completes (its expiry counts from here).
    pub now: DateTime<Utc>,
    /// How long the completed record is replayed and then kept as a tombstone (the caller's
    /// configuration; [`Settings::default`] is 24 h and 7 days).
    pub settings: Settings,
    /// The stored response, rendered before the write or from its result.
    pub render: Render,
}

/// What a fresh claim records: the request's fingerprint and canonical body.
pub struct FreshClaim {
    /// The request's fingerprint.
    pub fingerprint: Fingerprint,
    /// The request's canonical body.
    pub canonical_body: String,
    /// Called, inside the transaction, when the claim took over an abandoned record (the
    /// caller's metrics and log).
    pub on_takeover: Option<Box<dyn FnOnce() + Send>>,
}

impl FreshClaim {
    /// Runs the takeover hook, if any.
    pub fn took_over(&mut self) {
        if let Some(hook) = self.on_takeover.take() {
            hook();
        }
    }
}

impl std::fmt::Debug for FreshClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshClaim")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// `Idempotency-Key` records: claimed, completed (alone or in the transaction of the write they
/// protect), released, aged and inspected.
#[async_trait]
pub trait IdempotencyRecords: Send + Sync + 'static {
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
    /// [`crate::StoreError::Fenced`] when the token no longer owns the record. Its expiry and
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
    /// own store method. [`crate::StoreError::Fenced`] when the token no longer owns the record; nothing
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
