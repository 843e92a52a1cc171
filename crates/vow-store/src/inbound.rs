//! Inbound webhooks (issue 5, ADR 7): the sources providers send to, and the events vow claimed
//! from them. What the ingest route (`POST /in/{source_id}`) and the operators' API need from a
//! store; implemented by every backend next to [`crate::Store`].
//!
//! The heart of it is [`crate::inbound::InboundEvents::claim_inbound`]: ONE transaction whose first statement is
//! an insert under a unique constraint on (source, account, provider event id), so under any
//! race exactly one delivery of an id becomes the `received` row. A later delivery of the same
//! id with the same payload digest is a [`Claim::Duplicate`] (nothing new is stored); with a
//! different digest it is stored as its own `quarantined` row ([`Claim::Quarantined`]) for an
//! operator to release or discard. A delivery without an event id is always a new row: two
//! identical bodies can be two events.
//!
//! What happens next (workers forwarding to destinations, pull consumers, outcomes, ordering by
//! version, operators' decisions) is in [`processing`]; replaying a source's dead letters in bulk
//! is in [`source_replay`].
//!
//! Secrets live in [`SourceFields::secrets`] and [`Destination::secret`]; every `Debug` here
//! leaves them out.

use std::fmt;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vow_core::{DestinationId, InboundEventId, RejectionId, SourceId};

use crate::idempotency::{Applied, Completion};
use crate::{Seek, StoreResult};

pub mod activity;
pub mod claim_target;
pub mod decisions;
pub mod processing;
pub mod replay_guard;
pub mod source_replay;

pub use activity::InboundActivity;
use decisions::Decided;
use processing::{
    Forward, LeaseToken, Resolution, WorkClaim, WorkOutcome, WorkRecorded, WorkRequest,
};
pub use replay_guard::ReplayGuard;
pub use source_replay::SourceReplays;

/// Where to find a value in an inbound delivery: a header, or a JSON pointer into the body.
/// Serialised as `{"header": "x-request-id"}` or `{"pointer": "/data/id"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub enum Locator {
    /// The value of this header (lowercase name).
    Header(String),
    /// The string or number at this JSON pointer (RFC 6901) of a JSON body.
    Pointer(String),
}

/// A generic HMAC scheme's configuration, as stored (the server turns it into
/// `vow_signature::provider::HmacConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct HmacSettings {
    /// The header carrying the MAC (lowercase).
    pub header: String,
    /// A prefix the header value starts with (`sha256=`), if any.
    #[serde(default)]
    pub prefix: Option<String>,
    /// `hex` or `base64`.
    #[serde(default = "default_encoding")]
    pub encoding: String,
    /// `sha256` or `sha512`.
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    /// What is signed, e.g. `{timestamp}.{body}`.
    #[serde(default = "default_template")]
    pub template: String,
    /// The header carrying a unix timestamp, if any.
    #[serde(default)]
    pub timestamp_header: Option<String>,
    /// The header carrying the message id, if any.
    #[serde(default)]
    pub id_header: Option<String>,
}

fn default_encoding() -> String {
    "hex".into()
}

fn default_algorithm() -> String {
    "sha256".into()
}

fn default_template() -> String {
    "{body}".into()
}

/// One place a source's events are forwarded to by vow's inbound workers.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Destination {
    /// Its id, stable across updates of the source.
    pub id: DestinationId,
    /// The URL (validated as [`vow_core::EndpointUrl`]).
    pub url: String,
    /// The Standard Webhooks secret (`whsec_…`) vow signs forwarded events with.
    pub secret: String,
    /// Whether the destination deduplicates by event id itself, so an uncertain forward may
    /// simply be retried.
    pub idempotent: bool,
}

impl fmt::Debug for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Destination")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("idempotent", &self.idempotent)
            .finish_non_exhaustive()
    }
}

/// A source's replaceable configuration.
#[derive(Clone, PartialEq, Eq)]
pub struct SourceFields {
    /// Free text for operators.
    pub description: String,
    /// The provider scheme's name (`vow_signature::provider::Scheme::as_str`: `stripe`,
    /// `github`, …, `hmac`).
    pub scheme: String,
    /// The generic HMAC's configuration, when `scheme` is `hmac`.
    pub hmac: Option<HmacSettings>,
    /// The secrets a delivery may be signed with, newest first (several during a rotation).
    pub secrets: Vec<String>,
    /// How far a signed timestamp may be from now, in seconds, both directions.
    pub tolerance_secs: u32,
    /// The replay guard's window in seconds ([`ReplayGuard`]): `None` = the scheme's
    /// default, `Some(0)` = off.
    pub replay_window_secs: Option<u32>,
    /// Where the provider's event id is; `None` = the scheme's default.
    pub event_id: Option<Locator>,
    /// Where the account (the id's scope) is; `None` = the scheme's default.
    pub account: Option<Locator>,
    /// JSON pointer to the event's version (for ordering).
    pub version_pointer: Option<String>,
    /// JSON pointer to the id of the entity the event is about (for ordering).
    pub entity_pointer: Option<String>,
    /// Where events are forwarded.
    pub destinations: Vec<Destination>,
}

impl fmt::Debug for SourceFields {
    /// Everything but the secrets (their count only).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceFields")
            .field("description", &self.description)
            .field("scheme", &self.scheme)
            .field("hmac", &self.hmac)
            .field("secrets", &self.secrets.len())
            .field("tolerance_secs", &self.tolerance_secs)
            .field("replay_window_secs", &self.replay_window_secs)
            .field("event_id", &self.event_id)
            .field("account", &self.account)
            .field("version_pointer", &self.version_pointer)
            .field("entity_pointer", &self.entity_pointer)
            .field("destinations", &self.destinations)
            .finish()
    }
}

/// A new source.
#[derive(Clone)]
pub struct NewSource {
    /// Its id, chosen by the caller.
    pub id: SourceId,
    /// The unguessable token of its `POST /in/t/{token}` URL.
    pub token: String,
    /// Its configuration.
    pub fields: SourceFields,
    /// Creation time.
    pub now: DateTime<Utc>,
}

impl fmt::Debug for NewSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewSource")
            .field("id", &self.id)
            .field("fields", &self.fields)
            .finish_non_exhaustive()
    }
}

/// A stored source.
#[derive(Clone, PartialEq, Eq)]
pub struct Source {
    /// Id.
    pub id: SourceId,
    /// The token of its token URL.
    pub token: String,
    /// Configuration.
    pub fields: SourceFields,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("id", &self.id)
            .field("fields", &self.fields)
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .finish_non_exhaustive()
    }
}

/// Where a stored inbound event stands (see [`processing`] for how it moves).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InboundState {
    /// Claimed and durable; waiting to be processed.
    Received,
    /// A reused event id with a different payload: kept for an operator.
    Quarantined,
    /// A quarantined event an operator threw away.
    Discarded,
    /// Claimed by a worker or a pull consumer, under a lease.
    Processing,
    /// Every destination confirmed it.
    Completed,
    /// A destination refused it for good.
    Rejected,
    /// A forward failed harmlessly; due again at `next_attempt_at`.
    Retryable,
    /// A forward may have taken effect: an operator resolves it.
    Uncertain,
    /// Out of attempts: kept for review and replay.
    DeadLettered,
    /// Not newer than what was already processed for its entity: recorded, not forwarded.
    Superseded,
}

impl InboundState {
    /// Every state, for parsing.
    pub const ALL: [InboundState; 10] = [
        Self::Received,
        Self::Quarantined,
        Self::Discarded,
        Self::Processing,
        Self::Completed,
        Self::Rejected,
        Self::Retryable,
        Self::Uncertain,
        Self::DeadLettered,
        Self::Superseded,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::Quarantined => "quarantined",
            Self::Discarded => "discarded",
            Self::Processing => "processing",
            Self::Completed => "completed",
            Self::Rejected => "rejected",
            Self::Retryable => "retryable",
            Self::Uncertain => "uncertain",
            Self::DeadLettered => "dead_lettered",
            Self::Superseded => "superseded",
        }
    }

    /// The state called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// A verified delivery to claim.
#[derive(Clone)]
pub struct NewInboundEvent {
    /// The row's id, chosen by the caller (used only if a row is written).
    pub id: InboundEventId,
    /// The source.
    pub source_id: SourceId,
    /// The id's scope within the source (`""` when the provider has none).
    pub account: String,
    /// The provider's event id; `None`: stored, never deduplicated.
    pub event_id: Option<String>,
    /// The exact body bytes.
    pub payload: Vec<u8>,
    /// The request headers minus credentials and signatures, in order.
    pub headers: Vec<(String, String)>,
    /// Lowercase hex SHA-256 of `payload`.
    pub sha256: String,
    /// The value at the source's version pointer, if any.
    pub version: Option<String>,
    /// The value at the source's entity pointer, if any.
    pub entity: Option<String>,
    /// The source's replay guard, when it is on.
    pub replay_guard: Option<ReplayGuard>,
    /// Arrival time.
    pub now: DateTime<Utc>,
}

impl fmt::Debug for NewInboundEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewInboundEvent")
            .field("id", &self.id)
            .field("source_id", &self.source_id)
            .field("event_id", &self.event_id)
            .field("size", &self.payload.len())
            .finish_non_exhaustive()
    }
}

/// A stored inbound event, without its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundEvent {
    /// Id.
    pub id: InboundEventId,
    /// The source.
    pub source_id: SourceId,
    /// The id's scope (`""`: none).
    pub account: String,
    /// The provider's event id.
    pub event_id: Option<String>,
    /// Its state.
    pub state: InboundState,
    /// For a quarantined row: the row that holds the claim on its event id.
    pub conflicts_with: Option<InboundEventId>,
    /// Lowercase hex SHA-256 of the payload.
    pub sha256: String,
    /// The payload's size in bytes.
    pub size: u64,
    /// How many later deliveries had this id and this digest.
    pub duplicates: u64,
    /// The value at the version pointer.
    pub version: Option<String>,
    /// The value at the entity pointer.
    pub entity: Option<String>,
    /// Arrival time.
    pub received_at: DateTime<Utc>,
    /// Last change (state, duplicate count).
    pub updated_at: DateTime<Utc>,
    /// Processing attempts so far (claims by a worker or a pull consumer).
    pub attempts: u32,
    /// When a `received` or `retryable` event is due to be processed.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The last problem (a failed forward, why it was superseded), for operators.
    pub last_error: Option<String>,
}

/// An inbound event's raw content, until retention removes it.
#[derive(Clone, PartialEq, Eq)]
pub struct InboundContent {
    /// The headers as stored (no credentials, no signatures).
    pub headers: Vec<(String, String)>,
    /// The exact body bytes.
    pub payload: Vec<u8>,
}

impl fmt::Debug for InboundContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboundContent")
            .field("headers", &self.headers.len())
            .field("size", &self.payload.len())
            .finish()
    }
}

/// One inbound event with its content (`None` once purged) and its destinations' outcomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredInbound {
    /// The event.
    pub event: InboundEvent,
    /// Its content.
    pub content: Option<InboundContent>,
    /// What became of it at each destination (or at its pull consumer), by destination.
    pub forwards: Vec<Forward>,
}

/// What a claim did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// A new `received` row: the first delivery of its id, or one without an id.
    Received(InboundEvent),
    /// The id was claimed already with this very payload (by the claim or by a quarantined
    /// row): nothing new is stored; the row it repeats, its duplicate count incremented.
    Duplicate(InboundEvent),
    /// The id was claimed with another payload: this one is stored as its own `quarantined`
    /// row, pointing at the claim.
    Quarantined(InboundEvent),
    /// A new id, but the [`ReplayGuard`] saw the same signed content accepted within its
    /// window: nothing is stored (the transaction is rolled back); the event that content was
    /// accepted as.
    Replayed(InboundEvent),
}

/// A refused inbound request, to record. Never holds a secret, a signature or the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRejection {
    /// Its id.
    pub id: RejectionId,
    /// The source the request was addressed to.
    pub source_id: SourceId,
    /// A stable code (`signature_mismatch`, `timestamp_too_old`, `body_too_large`, …).
    pub reason: String,
    /// The status answered.
    pub status: u16,
    /// The body's size in bytes (at least the limit, for a body over it).
    pub body_size: u64,
    /// When.
    pub now: DateTime<Utc>,
}

/// A recorded rejection.
pub type Rejection = NewRejection;

/// How many refusals of one reason a source has had, exactly (the log keeps only the newest
/// rows; see [`crate::inbound::InboundEvents::record_rejection`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectionCount {
    /// The reason code.
    pub reason: String,
    /// How many refusals had it.
    pub count: u64,
    /// The first one's time.
    pub first_at: DateTime<Utc>,
    /// The last one's time.
    pub last_at: DateTime<Utc>,
}

/// Filters for listing a source's events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboundFilter {
    /// Only events in this state.
    pub state: Option<InboundState>,
}

/// The error of [`crate::inbound::InboundEvents::resolve_quarantined`] on an event that is not quarantined
/// (every backend says the same).
pub fn not_quarantined() -> crate::StoreError {
    crate::StoreError::Conflict("this inbound event is not quarantined".into())
}

/// The inbound side of a store: every inbound trait of a backend, in one (blanket impl). Part of
/// [`crate::Store`].
pub trait InboundStore:
    Sources + InboundEvents + InboundWork + InboundDecisions + InboundActivity + SourceReplays
{
}

impl<
        T: Sources + InboundEvents + InboundWork + InboundDecisions + InboundActivity + SourceReplays,
    > InboundStore for T
{
}

/// Sources of inbound webhooks.
#[async_trait]
pub trait Sources: Send + Sync + 'static {
    /// Creates a source. `Conflict` when its id or token is taken.
    async fn create_source(&self, new: NewSource) -> StoreResult<Source> {
        Ok(self.create_source_keyed(new, None).await?.0)
    }

    /// [`Sources::create_source`], completing `keyed`'s record in its transaction.
    async fn create_source_keyed(
        &self,
        new: NewSource,
        keyed: Option<Completion<Source>>,
    ) -> StoreResult<Applied<Source>>;

    /// Finds a source by id.
    async fn get_source(&self, id: SourceId) -> StoreResult<Option<Source>>;

    /// Finds a source by the token of its token URL.
    async fn get_source_by_token(&self, token: &str) -> StoreResult<Option<Source>>;

    /// Lists sources ordered by id.
    async fn list_sources(&self, seek: &Seek) -> StoreResult<Vec<Source>>;

    /// Replaces a source's fields (not its token), stamping `now`. `NotFound` when absent.
    async fn update_source(
        &self,
        id: SourceId,
        fields: SourceFields,
        now: DateTime<Utc>,
    ) -> StoreResult<Source>;

    /// Deletes a source with its events and rejections. `NotFound` when absent.
    async fn delete_source(&self, id: SourceId) -> StoreResult<()>;
}

/// Inbound events as they arrive (the claim), their listing, quarantine and retention, and the
/// rejection log.
#[async_trait]
pub trait InboundEvents: Send + Sync + 'static {
    /// Claims a verified delivery in ONE transaction (see the module docs), durable when this
    /// returns; with a [`ReplayGuard`], a new row whose content the guard saw within its
    /// window is rolled back ([`Claim::Replayed`]). `NotFound("source")` when the source is
    /// gone.
    async fn claim_inbound(&self, new: NewInboundEvent) -> StoreResult<Claim>;

    /// One event of `source` with its content.
    async fn get_inbound_event(
        &self,
        source: SourceId,
        id: InboundEventId,
    ) -> StoreResult<Option<StoredInbound>>;

    /// A source's events, newest first unless `seek` says otherwise, filtered.
    async fn list_inbound_events(
        &self,
        source: SourceId,
        filter: &InboundFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<InboundEvent>>;

    /// An operator's decision on a quarantined event: `to` is `Received` (release: it will be
    /// processed, due at `now`) or `Discarded`. `NotFound("inbound event")` when absent, `Conflict` when it
    /// is not quarantined (nothing changes).
    async fn resolve_quarantined(
        &self,
        source: SourceId,
        id: InboundEventId,
        to: InboundState,
        now: DateTime<Utc>,
    ) -> StoreResult<InboundEvent> {
        Ok(self
            .resolve_quarantined_keyed(source, id, to, now, None)
            .await?
            .0)
    }

    /// [`InboundEvents::resolve_quarantined`], completing `keyed`'s record in its transaction.
    async fn resolve_quarantined_keyed(
        &self,
        source: SourceId,
        id: InboundEventId,
        to: InboundState,
        now: DateTime<Utc>,
        keyed: Option<Completion<InboundEvent>>,
    ) -> StoreResult<Applied<InboundEvent>>;

    /// Records a refused request in the source's bounded log: the newest `keep` rejections
    /// are kept (a ring of `keep` slots per source, the oldest overwritten in place; slots
    /// beyond a lowered `keep` are dropped), and the source's count for the reason goes up by
    /// one, exactly. A fixed number of row writes whatever the log holds. `NotFound("source")`
    /// when the source is gone. `keep` is at least 1.
    async fn record_rejection(&self, rejection: NewRejection, keep: u32) -> StoreResult<()>;

    /// A source's exact rejection counts, one per reason, by reason.
    async fn rejection_counts(&self, source: SourceId) -> StoreResult<Vec<RejectionCount>>;

    /// A source's rejections, newest first unless `seek` says otherwise.
    async fn list_rejections(&self, source: SourceId, seek: &Seek) -> StoreResult<Vec<Rejection>>;

    /// Retention: removes the content (payload and headers) of events received before
    /// `before`, and deletes rejections recorded before it, at most `batch` rows of each (the
    /// counts stay).
    /// Rows changed. The events themselves stay, so their ids still deduplicate.
    async fn purge_inbound(&self, before: DateTime<Utc>, batch: usize) -> StoreResult<u64>;
}

/// Processing inbound events (see [`processing`]): claims with leases, outcomes, renewals.
#[async_trait]
pub trait InboundWork: Send + Sync + 'static {
    // ---- processing (see [`processing`]) -------------------------------------------------------

    /// Settles the events whose lease ran out before `request.now`, then claims at most
    /// `request.limit` due events for `request.consumer`, superseding those not newer than
    /// their entity's mark. One transaction.
    async fn claim_inbound_work(&self, request: &WorkRequest) -> StoreResult<WorkClaim> {
        Ok(self.claim_inbound_work_keyed(request, None).await?.0)
    }

    /// [`InboundWork::claim_inbound_work`] (a pull consumer's claim), completing `keyed`'s
    /// record in its transaction.
    async fn claim_inbound_work_keyed(
        &self,
        request: &WorkRequest,
        keyed: Option<Completion<WorkClaim>>,
    ) -> StoreResult<Applied<WorkClaim>>;

    /// Records a claimed event's outcome if its lease is still held, as
    /// [`crate::rules::recording::record`] decides, and moves the event to the
    /// [`processing::aggregate`] of its destinations' outcomes.
    async fn record_inbound_work(&self, outcome: WorkOutcome) -> StoreResult<WorkRecorded>;

    /// A pull consumer's complete or fail: [`InboundWork::record_inbound_work`] where a lost
    /// lease is the error [`processing::lease_lost`] ([`processing::WorkRecorded::into_event`]),
    /// completing `keyed`'s record in its transaction.
    async fn record_inbound_work_keyed(
        &self,
        outcome: WorkOutcome,
        keyed: Option<Completion<InboundEvent>>,
    ) -> StoreResult<Applied<InboundEvent>>;

    /// Extends the leases still held to `until`; how many were.
    async fn renew_inbound_leases(
        &self,
        leases: &[(InboundEventId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize>;

    /// The earliest time a push claim could take something, if anything waits: the first due
    /// event whose entity is not busy, or the first lease end (settling it may make work due).
    async fn next_inbound_due(&self) -> StoreResult<Option<DateTime<Utc>>>;
}

/// Operators' decisions on an inbound event's destinations (see [`decisions`]).
#[async_trait]
pub trait InboundDecisions: Send + Sync + 'static {
    /// An operator's decision on the `uncertain` destinations of an event (only `destination`'s
    /// when named): they become completed, or retryable with the event's attempts reset; the
    /// event becomes the aggregate of its outcomes. Other destinations are untouched.
    /// `NotFound("inbound event")` when absent; `Conflict` ([`decisions::targets`]) when the
    /// event is being processed or nothing is uncertain there (nothing changes).
    async fn resolve_uncertain(
        &self,
        source: SourceId,
        id: InboundEventId,
        resolution: Resolution,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
    ) -> StoreResult<Decided> {
        let resolved = self.resolve_uncertain_keyed(source, id, resolution, destination, now, None);
        Ok(resolved.await?.0)
    }

    /// [`InboundDecisions::resolve_uncertain`], completing `keyed`'s record in its transaction.
    async fn resolve_uncertain_keyed(
        &self,
        source: SourceId,
        id: InboundEventId,
        resolution: Resolution,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
        keyed: Option<Completion<Decided>>,
    ) -> StoreResult<Applied<Decided>>;

    /// Forwards an event again to its `dead_lettered` and `rejected` destinations (only
    /// `destination` when named): they become retryable, the event's attempts are reset and
    /// it is due at `now`; other destinations (an `uncertain` one too) are untouched.
    /// `NotFound` / `Conflict` as for [`crate::inbound::InboundDecisions::resolve_uncertain`].
    async fn replay_inbound(
        &self,
        source: SourceId,
        id: InboundEventId,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
    ) -> StoreResult<Decided> {
        let replayed = self.replay_inbound_keyed(source, id, destination, now, None);
        Ok(replayed.await?.0)
    }

    /// [`InboundDecisions::replay_inbound`], completing `keyed`'s record in its transaction.
    async fn replay_inbound_keyed(
        &self,
        source: SourceId,
        id: InboundEventId,
        destination: Option<DestinationId>,
        now: DateTime<Utc>,
        keyed: Option<Completion<Decided>>,
    ) -> StoreResult<Applied<Decided>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locators_are_tagged_by_where_they_look() {
        let header: Locator = serde_json::from_str(r#"{"header":"x-id"}"#).unwrap();
        assert_eq!(header, Locator::Header("x-id".into()));
        let pointer = Locator::Pointer("/data/id".into());
        assert_eq!(
            serde_json::to_string(&pointer).unwrap(),
            r#"{"pointer":"/data/id"}"#
        );
        assert!(serde_json::from_str::<Locator>(r#"{"cookie":"x"}"#).is_err());
    }

    #[test]
    fn states_round_trip_through_their_names() {
        for state in InboundState::ALL {
            assert_eq!(InboundState::parse(state.as_str()), Some(state));
        }
        assert_eq!(InboundState::parse("in_flight"), None);
    }

    #[test]
    fn debug_never_shows_a_secret() {
        let fields = SourceFields {
            description: String::new(),
            scheme: "github".into(),
            hmac: None,
            secrets: vec!["s3cr3t-provider".into()],
            tolerance_secs: 300,
            replay_window_secs: None,
            event_id: None,
            account: None,
            version_pointer: None,
            entity_pointer: None,
            destinations: vec![Destination {
                id: DestinationId::new(),
                url: "https://d.example".into(),
                secret: "whsec_s3cr3t-destination".into(),
                idempotent: false,
            }],
        };
        let source = Source {
            id: SourceId::new(),
            token: "t0k3n".into(),
            fields,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        };
        let shown = format!("{source:?}");
        for secret in ["s3cr3t", "t0k3n"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("d.example"), "{shown}");
    }
}
