//! The delivery queue: what the delivery workers and the attempt/replay API need from a store.
//!
//! The store is the queue. A delivery row (written with its message, see
//! [`crate::Messages::create_message`]) is *claimed* by a worker with an
//! expiring lease and a fresh lease token; the worker attempts it and *records* the outcome, which
//! only lands while the token still matches (fencing: a worker whose lease expired and was taken
//! over cannot overwrite the newer owner's result). Claims and records are batched so one
//! transaction serves many deliveries.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{AppId, AttemptId, DeliveryId, EndpointId, MessageId, ReplayId};

use crate::idempotency::{Applied, Completion};
use crate::model::{Delivery, DeliveryStatus, Endpoint, EndpointSecret, Message, MessageFilter};
use crate::{Seek, StoreResult};

/// Identifies one lease of one delivery; a new claim makes a new token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseToken(pub String);

/// What a worker asks for.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// Claim deliveries with status `pending`, `next_attempt_at <= now`, and no lease or an
    /// expired one (`lease_until <= now`).
    pub now: DateTime<Utc>,
    /// The lease lasts until `now + lease`.
    pub lease: chrono::Duration,
    /// At most this many, endpoint by endpoint: the endpoint whose earliest due delivery has
    /// waited longest first, each endpoint's earliest due deliveries up to its room. A claim
    /// that returns fewer left nothing claimable behind, with one bounded exception: a store may
    /// pass over, for up to a second of claim time, a delivery whose lease expired (or that
    /// committed late) below the earliest one it last claimed of that endpoint (PostgreSQL
    /// does, so its claims need not walk the index entries of delivered rows).
    pub limit: usize,
    /// At most this many per endpoint (what each endpoint has room for in this process).
    pub room: EndpointRoom,
}

/// How many deliveries a claim may hand out per endpoint: [`default`](Self::default) for most,
/// fewer for the endpoints that already have some in flight (0 skips an endpoint).
///
/// A store finds work endpoint by endpoint, so an endpoint without room costs a claim nothing,
/// however long its backlog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRoom {
    /// The room of an endpoint not in `except`.
    pub default: usize,
    /// Endpoints with less room than `default`.
    pub except: HashMap<EndpointId, usize>,
}

impl EndpointRoom {
    /// No per-endpoint bound.
    pub fn unlimited() -> Self {
        Self {
            default: usize::MAX,
            except: HashMap::new(),
        }
    }

    /// No per-endpoint bound, except that `skipped` get nothing.
    pub fn skipping(skipped: impl IntoIterator<Item = EndpointId>) -> Self {
        Self {
            except: skipped.into_iter().map(|ep| (ep, 0)).collect(),
            ..Self::unlimited()
        }
    }

    /// The room of `endpoint`.
    pub fn of(&self, endpoint: &EndpointId) -> usize {
        self.except.get(endpoint).copied().unwrap_or(self.default)
    }
}

/// Everything a worker needs to attempt one delivery, read in the claiming transaction.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    /// The delivery as it was claimed (attempts so far, client errors so far, ...).
    pub delivery: Delivery,
    /// The lease token to present when recording.
    pub lease: LeaseToken,
    /// The lease's end.
    pub lease_until: DateTime<Utc>,
    /// The message's event type.
    pub event_type: String,
    /// The exact payload text; `None` when it expired or was expunged (the delivery is then
    /// dead-lettered without an attempt).
    pub payload: Option<String>,
    /// The message's W3C `traceparent`, if it was created within a trace.
    pub traceparent: Option<String>,
    /// The endpoint's state when claimed.
    pub endpoint: DeliveryTarget,
}

/// The parts of an endpoint a delivery attempt uses.
#[derive(Debug, Clone)]
pub struct DeliveryTarget {
    /// URL to POST to.
    pub url: String,
    /// Custom headers.
    pub headers: std::collections::BTreeMap<String, String>,
    /// Disabled endpoints are not attempted (the delivery goes back to `held`).
    pub disabled: bool,
    /// Messages per second, if throttled.
    pub throttle_rate: Option<u16>,
    /// Secrets valid at claim time, current first.
    pub secrets: Vec<EndpointSecret>,
    /// Signature style, timeout and retry schedule.
    pub options: crate::model::DeliveryOptions,
    /// When the endpoint last changed (lets workers cache per endpoint).
    pub updated_at: DateTime<Utc>,
}

/// What an attempt produced, to be stored as an attempt row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAttempt {
    /// Its id.
    pub id: AttemptId,
    /// When the request started.
    pub started_at: DateTime<Utc>,
    /// The URL attempted.
    pub url: String,
    /// HTTP status, when a response arrived.
    pub response_status: Option<u16>,
    /// Up to 4 KiB of the response body (lossy UTF-8), or the error text.
    pub response: String,
    /// Time to the response (or failure), in milliseconds.
    pub duration_ms: u64,
    /// Whether this attempt succeeded (2xx).
    pub success: bool,
    /// Why it failed, when it did not get a response (timeout, refused address, ...).
    pub error: Option<String>,
    /// `scheduled` or `manual`.
    pub trigger: AttemptTrigger,
}

/// What started an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptTrigger {
    /// The schedule (first attempt or a retry).
    Scheduled,
    /// An operator (resend, replay).
    Manual,
}

impl AttemptTrigger {
    /// The stored text form.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptTrigger::Scheduled => "scheduled",
            AttemptTrigger::Manual => "manual",
        }
    }

    /// Parses the stored text form.
    pub fn parse(s: &str) -> Option<Self> {
        [AttemptTrigger::Scheduled, AttemptTrigger::Manual]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// Where a delivery goes after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextState {
    /// Delivered: done.
    Delivered,
    /// Try again at this time; `client_errors` is the new count of 4xx responses so far.
    RetryAt {
        /// When.
        at: DateTime<Utc>,
        /// 4xx responses so far, this one included.
        client_errors: u32,
    },
    /// Give up: dead-lettered (kept, replayable).
    DeadLetter {
        /// Why, for the log and the API.
        reason: String,
        /// Disable the endpoint at once (410 Gone).
        disable_endpoint: bool,
    },
    /// The endpoint was disabled when the worker got to it: back to `held`, no attempt row.
    Hold,
}

impl NextState {
    /// Its name in metrics labels and trace spans: `delivered`, `retry`, `dead_lettered`,
    /// `held`.
    pub fn kind(&self) -> &'static str {
        match self {
            NextState::Delivered => "delivered",
            NextState::RetryAt { .. } => "retry",
            NextState::DeadLetter { .. } => "dead_lettered",
            NextState::Hold => "held",
        }
    }

    /// What recording it writes to its delivery's columns.
    pub fn stored(&self) -> StoredNext<'_> {
        let (status, next_attempt_at, client_errors, dead_letter_reason) = match self {
            NextState::Delivered => (DeliveryStatus::Delivered, None, None, None),
            NextState::RetryAt { at, client_errors } => (
                DeliveryStatus::Pending,
                Some(*at),
                Some(*client_errors),
                None,
            ),
            NextState::DeadLetter { reason, .. } => (
                DeliveryStatus::DeadLettered,
                None,
                None,
                Some(reason.as_str()),
            ),
            NextState::Hold => (DeliveryStatus::Held, None, None, None),
        };
        StoredNext {
            status,
            next_attempt_at,
            client_errors,
            dead_letter_reason,
        }
    }
}

/// A [`NextState`] as its delivery's columns (`status`, `next_attempt_at`, `client_errors`,
/// `dead_letter_reason`), which both backends write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredNext<'a> {
    /// The new status.
    pub status: DeliveryStatus,
    /// The new due time; `None` keeps the stored one.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The new count of 4xx responses; `None` keeps the stored one.
    pub client_errors: Option<u32>,
    /// Why it was dead-lettered; `None` clears it.
    pub dead_letter_reason: Option<&'a str>,
}

/// One outcome to record.
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    /// The delivery.
    pub delivery_id: DeliveryId,
    /// The lease it was attempted under.
    pub lease: LeaseToken,
    /// The attempt row to add (`None` for [`NextState::Hold`] and for a payload that expired).
    pub attempt: Option<NewAttempt>,
    /// The delivery's new state.
    pub next: NextState,
    /// Record time.
    pub now: DateTime<Utc>,
}

/// What recording one outcome did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// Stored. `endpoint_disabled` is true when this outcome disabled the endpoint (410, or the
    /// dead-letter that reached the auto-disable threshold).
    Stored {
        /// The endpoint was disabled by this outcome.
        endpoint_disabled: bool,
    },
    /// The lease was no longer ours (expired and claimed by another worker, or the delivery was
    /// deleted): nothing was written.
    LeaseLost,
}

/// A stored attempt (Svix's `MessageAttemptOut`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Id.
    pub id: AttemptId,
    /// Owner.
    pub app_id: AppId,
    /// Message.
    pub msg_id: MessageId,
    /// Endpoint.
    pub endpoint_id: EndpointId,
    /// Delivery.
    pub delivery_id: DeliveryId,
    /// What was stored.
    pub attempt: NewAttempt,
}

/// How many characters of a failed attempt's response a [`RecentAttempt`] carries.
pub const EXCERPT_CHARS: usize = 300;

/// An attempt as a health summary reads it: when it ran, how long it took and how it went, and
/// for a failure the start of the response, without the request or the whole response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentAttempt {
    /// Id.
    pub id: AttemptId,
    /// Endpoint.
    pub endpoint_id: EndpointId,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// The response's status, if one came.
    pub response_status: Option<u16>,
    /// How long it took.
    pub duration_ms: u64,
    /// Whether it succeeded.
    pub success: bool,
    /// Why no response came, if none did.
    pub error: Option<String>,
    /// A failure's response, its first [`EXCERPT_CHARS`] characters; empty for a success.
    pub excerpt: String,
}

/// An attempt as `vow tail` streams it: the attempt without its response body, with its
/// message's event type, its number among its delivery's attempts, and its delivery's next try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailedAttempt {
    /// Id.
    pub id: AttemptId,
    /// Owner.
    pub app_id: AppId,
    /// Message.
    pub msg_id: MessageId,
    /// Endpoint.
    pub endpoint_id: EndpointId,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// The URL attempted.
    pub url: String,
    /// The response's status, if one came.
    pub response_status: Option<u16>,
    /// How long it took.
    pub duration_ms: u64,
    /// Whether it succeeded.
    pub success: bool,
    /// Why no response came, if none did.
    pub error: Option<String>,
    /// The message's event type.
    pub event_type: String,
    /// 1 for the delivery's first attempt, 2 for the next, ...
    pub attempt: u32,
    /// When the delivery is tried again, if it is still pending when read and due after this
    /// attempt started.
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// Which attempts a tail reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TailFilter {
    /// Whose.
    pub scope: TailScope,
    /// Only successful (`Some(true)`) or failed (`Some(false)`) ones.
    pub success: Option<bool>,
}

/// Whose attempts a tail reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TailScope {
    /// Every application's.
    #[default]
    All,
    /// One application's.
    App(AppId),
    /// One endpoint's, looked for within its application only.
    Endpoint(AppId, EndpointId),
}

impl TailScope {
    /// The application, unless every one's.
    pub fn app(self) -> Option<AppId> {
        match self {
            TailScope::All => None,
            TailScope::App(app) | TailScope::Endpoint(app, _) => Some(app),
        }
    }

    /// The endpoint, if one.
    pub fn endpoint(self) -> Option<EndpointId> {
        match self {
            TailScope::Endpoint(_, endpoint) => Some(endpoint),
            TailScope::All | TailScope::App(_) => None,
        }
    }
}

/// Filters for listing attempts.
#[derive(Debug, Clone, Default)]
pub struct AttemptFilter {
    /// Only this message's.
    pub msg_id: Option<MessageId>,
    /// Only to this endpoint.
    pub endpoint_id: Option<EndpointId>,
    /// Only successful (`Some(true)`) or failed (`Some(false)`) ones.
    pub success: Option<bool>,
    /// Only with this response status.
    pub status_code: Option<u16>,
    /// Only in this class of response status.
    pub status_class: Option<StatusClass>,
    /// Only started before.
    pub before: Option<DateTime<Utc>>,
    /// Only started after.
    pub after: Option<DateTime<Utc>>,
    /// Only of messages of these event types (empty = all).
    pub event_types: Vec<String>,
    /// Only of messages sent on this channel.
    pub channel: Option<String>,
}

/// A class of attempt outcomes by response status (Svix's `StatusCodeClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    /// No response: the request failed before an answer (connection refused, timeout, ...).
    NoResponse,
    /// Answered with a status in `hundred..hundred + 100` (`hundred` is 100, 200, ... 500).
    Answered(u16),
}

impl StatusClass {
    /// The inclusive range of response statuses of an answered class.
    pub fn range(self) -> Option<(u16, u16)> {
        match self {
            StatusClass::NoResponse => None,
            StatusClass::Answered(hundred) => Some((hundred, hundred + 99)),
        }
    }
}

/// Which deliveries of an endpoint an operator replays.
#[derive(Debug, Clone, Default)]
pub struct ReplayFilter {
    /// Only deliveries created at or after.
    pub since: Option<DateTime<Utc>>,
    /// Only deliveries created before.
    pub until: Option<DateTime<Utc>>,
    /// Only these event types (empty = all).
    pub event_types: Vec<String>,
    /// Only deliveries whose last attempt got this status.
    pub last_status: Option<u16>,
}

/// Which of an endpoint's deliveries [`DeliveryOperators::endpoint_stats`] counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct StatsFilter {
    /// Only deliveries created at or after.
    pub since: Option<DateTime<Utc>>,
    /// Only deliveries created before.
    pub until: Option<DateTime<Utc>>,
    /// Only the deliveries this replay requeued (and no later replay or resend took over).
    pub replay: Option<ReplayId>,
}

impl StatsFilter {
    /// The deliveries created at or after `since`.
    pub fn since(since: DateTime<Utc>) -> Self {
        Self {
            since: Some(since),
            ..Self::default()
        }
    }
}

/// Counts of an endpoint's deliveries by state (Svix's `EndpointStats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeliveryStats {
    /// Delivered.
    pub success: u64,
    /// Waiting for an attempt (held ones included).
    pub pending: u64,
    /// Leased by a worker right now.
    pub sending: u64,
    /// Dead-lettered.
    pub fail: u64,
}

/// Where a delivery stands as Svix reports it (`MessageStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageStatus {
    /// Delivered.
    Success,
    /// Waiting for an attempt, or `held` behind a disabled endpoint (it goes out once replayed).
    Pending,
    /// Dead-lettered.
    Fail,
    /// Leased by a worker: an attempt is under way.
    Sending,
}

impl MessageStatus {
    /// Svix's `statusText`: `success`, `pending`, `fail` or `sending`.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Success => "success",
            MessageStatus::Pending => "pending",
            MessageStatus::Fail => "fail",
            MessageStatus::Sending => "sending",
        }
    }

    /// The condition over a `deliveries` row for this status at `$now` (a backend puts its
    /// placeholder for the time there): what a listing filters by and `stats` counts.
    pub fn condition(self) -> &'static str {
        match self {
            MessageStatus::Success => "status = 'delivered'",
            MessageStatus::Fail => "status = 'dead_lettered'",
            MessageStatus::Sending => "status = 'pending' AND lease_until > $now",
            MessageStatus::Pending => {
                "status = 'held' OR (status = 'pending' AND (lease_until IS NULL OR lease_until <= $now))"
            }
        }
    }

    /// The status of a delivery in `status` whose lease (if any) ends at `lease_until`, at `now`.
    pub fn of(
        status: DeliveryStatus,
        lease_until: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Self {
        match status {
            DeliveryStatus::Delivered => MessageStatus::Success,
            DeliveryStatus::DeadLettered => MessageStatus::Fail,
            DeliveryStatus::Pending if lease_until.is_some_and(|t| t > now) => {
                MessageStatus::Sending
            }
            DeliveryStatus::Pending | DeliveryStatus::Held => MessageStatus::Pending,
        }
    }
}

/// A delivery with its Svix status at the time it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryState {
    /// The delivery.
    pub delivery: Delivery,
    /// Its status.
    pub status: MessageStatus,
}

impl DeliveryState {
    /// For backends: pairs each listed row with its delivery's state, found in `states` under
    /// `key(row)`; a row whose delivery is not there (deleted in between) is left out.
    pub fn pair<T, U>(
        rows: Vec<T>,
        mut states: HashMap<String, DeliveryState>,
        key: impl Fn(&T) -> String,
        pair: impl Fn(T, DeliveryState) -> U,
    ) -> Vec<U> {
        rows.into_iter()
            .filter_map(|row| {
                let state = states.remove(&key(&row))?;
                Some(pair(row, state))
            })
            .collect()
    }
}

impl AttemptedDestination {
    /// For backends: each listed endpoint with its delivery's state, found in `states` by the
    /// endpoint's id; one whose delivery is not there (deleted in between) is left out.
    pub fn pair_up(endpoints: Vec<Endpoint>, states: HashMap<String, DeliveryState>) -> Vec<Self> {
        let key = |e: &Endpoint| e.id.to_string();
        DeliveryState::pair(endpoints, states, key, |endpoint, delivery| {
            AttemptedDestination { endpoint, delivery }
        })
    }
}

impl AttemptedMessage {
    /// For backends: each listed message with its delivery's state, found in `states` by the
    /// message's id; one whose delivery is not there (deleted in between) is left out.
    pub fn pair_up(messages: Vec<Message>, states: HashMap<String, DeliveryState>) -> Vec<Self> {
        let key = |m: &Message| m.id.to_string();
        DeliveryState::pair(messages, states, key, |message, delivery| {
            AttemptedMessage { message, delivery }
        })
    }
}

/// One endpoint a message was sent to (Svix's `MessageEndpointOut`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptedDestination {
    /// The endpoint as it is now.
    pub endpoint: Endpoint,
    /// The message's delivery to it.
    pub delivery: DeliveryState,
}

/// One message sent to an endpoint (Svix's `EndpointMessageOut`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptedMessage {
    /// The message.
    pub message: Message,
    /// Its delivery to the endpoint.
    pub delivery: DeliveryState,
}

/// The delivery queue: every queue trait of a backend, in one (blanket impl). Part of
/// [`crate::Store`].
pub trait DeliveryQueue:
    DeliveryClaims + DeliveryOutcomes + Attempts + DeliveryOperators + AttemptedListings + Retention
{
}

impl<
        T: DeliveryClaims
            + DeliveryOutcomes
            + Attempts
            + DeliveryOperators
            + AttemptedListings
            + Retention,
    > DeliveryQueue for T
{
}

/// Workers' side of the queue: claiming due deliveries with leases, renewing them, and when
/// to look again.
#[async_trait]
pub trait DeliveryClaims: Send + Sync + 'static {
    /// Claims due deliveries (see [`ClaimRequest`]), each with a new lease token, in one
    /// transaction. Two concurrent claims never return the same delivery.
    async fn claim_deliveries(&self, req: &ClaimRequest) -> StoreResult<Vec<ClaimedDelivery>>;

    /// Extends the leases that are still ours to `until`; returns how many were.
    async fn renew_leases(
        &self,
        leases: &[(DeliveryId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize>;

    /// The earliest `next_attempt_at` of any pending delivery, so an idle worker knows when to
    /// look again.
    async fn next_due(&self) -> StoreResult<Option<DateTime<Utc>>>;

    /// Reserves the next send slot of `endpoint` throttled to `rate` messages per second and
    /// returns how long to wait until it (zero when it is now): the first free instant no
    /// earlier than now, the one after it [`gap`](crate::rules::pace::gap)`(rate)` later. Every
    /// worker of the store shares the pace, in whichever process it runs, by the store's own
    /// clock.
    async fn reserve_send_slot(
        &self,
        endpoint: EndpointId,
        rate: u16,
    ) -> StoreResult<std::time::Duration>;
}

/// Recording what the attempts of claimed deliveries came to.
#[async_trait]
pub trait DeliveryOutcomes: Send + Sync + 'static {
    /// Records outcomes, in one transaction, each only if its lease token still matches. A
    /// dead-letter increments the endpoint's count of consecutive dead-letters and disables the
    /// endpoint when it reaches `disable_after` (0 = never); a delivery resets the count. The
    /// result has one entry per outcome, in order.
    async fn record_attempts(
        &self,
        outcomes: Vec<AttemptOutcome>,
        disable_after: u32,
    ) -> StoreResult<Vec<Recorded>>;
}

/// The attempts log.
#[async_trait]
pub trait Attempts: Send + Sync + 'static {
    /// Lists an application's attempts, newest first unless `seek` says otherwise.
    async fn list_attempts(
        &self,
        app: AppId,
        filter: &AttemptFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<Attempt>>;

    /// The newest `each` attempts of every endpoint in `endpoints` that is `app`'s, endpoint by
    /// endpoint in the order given, newest first within one: an endpoint list's health in one
    /// read, bounded whatever the traffic.
    async fn recent_attempts(
        &self,
        app: AppId,
        endpoints: &[EndpointId],
        each: usize,
    ) -> StoreResult<Vec<RecentAttempt>>;

    /// The attempts with ids after `after` that `filter` selects, oldest id first, at most
    /// `limit`: what a tail polls for, one index range whatever the table holds.
    async fn tail_attempts(
        &self,
        filter: &TailFilter,
        after: AttemptId,
        limit: usize,
    ) -> StoreResult<Vec<TailedAttempt>>;

    /// One attempt of a message.
    async fn get_attempt(
        &self,
        app: AppId,
        msg: MessageId,
        id: AttemptId,
    ) -> StoreResult<Option<Attempt>>;

    /// Removes one attempt's response body. `NotFound` when absent.
    async fn expunge_attempt_content(
        &self,
        app: AppId,
        msg: MessageId,
        id: AttemptId,
    ) -> StoreResult<()>;
}

/// An operator's hand on deliveries: resend, replay, stats.
#[async_trait]
pub trait DeliveryOperators: Send + Sync + 'static {
    /// Makes the delivery of `msg` to `endpoint` due now again (creating the delivery row if the
    /// message never went to that endpoint). `NotFound` for a missing message or endpoint.
    async fn resend(
        &self,
        app: AppId,
        msg: MessageId,
        endpoint: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<Delivery> {
        Ok(self.resend_keyed(app, msg, endpoint, now, None).await?.0)
    }

    /// [`DeliveryOperators::resend`], completing `keyed`'s record in its transaction.
    async fn resend_keyed(
        &self,
        app: AppId,
        msg: MessageId,
        endpoint: EndpointId,
        now: DateTime<Utc>,
        keyed: Option<Completion<Delivery>>,
    ) -> StoreResult<Applied<Delivery>>;

    /// Replays an endpoint's dead-lettered and held deliveries that match `filter`: makes them
    /// pending again, due from `now` on, spaced `spacing` apart so a receiver that just came
    /// back is not flooded, and records `id` on each (a resend clears it). With `dry_run`,
    /// changes nothing. Returns how many match.
    #[allow(clippy::too_many_arguments)]
    async fn replay(
        &self,
        app: AppId,
        endpoint: EndpointId,
        id: ReplayId,
        filter: &ReplayFilter,
        now: DateTime<Utc>,
        spacing: chrono::Duration,
        dry_run: bool,
    ) -> StoreResult<u64>;

    /// [`DeliveryOperators::replay`] for real (never a dry run: a dry run writes nothing),
    /// completing `keyed`'s record in its transaction.
    #[allow(clippy::too_many_arguments)]
    async fn replay_keyed(
        &self,
        app: AppId,
        endpoint: EndpointId,
        id: ReplayId,
        filter: &ReplayFilter,
        now: DateTime<Utc>,
        spacing: chrono::Duration,
        keyed: Option<Completion<u64>>,
    ) -> StoreResult<Applied<u64>>;

    /// An endpoint's delivery counts by state, for the deliveries `filter` picks.
    async fn endpoint_stats(
        &self,
        app: AppId,
        endpoint: EndpointId,
        filter: &StatsFilter,
        now: DateTime<Utc>,
    ) -> StoreResult<DeliveryStats>;
}

/// Deliveries seen from a message (its destinations) or from an endpoint (its messages).
#[async_trait]
pub trait AttemptedListings: Send + Sync + 'static {
    /// The endpoints `msg` has a delivery to, ordered by endpoint id, each with that delivery's
    /// status at `now`. Empty when the message is not `app`'s.
    async fn list_attempted_destinations(
        &self,
        app: AppId,
        msg: MessageId,
        now: DateTime<Utc>,
        seek: &Seek,
    ) -> StoreResult<Vec<AttemptedDestination>>;

    /// The messages of `app` with a delivery to `endpoint`, ordered by message id, filtered as
    /// [`crate::Messages::list_messages`] does and, with `status`, by the delivery's status at
    /// `now`. Empty when the endpoint is not `app`'s.
    async fn list_attempted_messages(
        &self,
        app: AppId,
        endpoint: EndpointId,
        filter: &MessageFilter,
        status: Option<MessageStatus>,
        now: DateTime<Utc>,
        seek: &Seek,
    ) -> StoreResult<Vec<AttemptedMessage>>;
}

/// Retention of message payloads and attempt response bodies.
#[async_trait]
pub trait Retention: Send + Sync + 'static {
    /// Removes a message's payload (and its attempts' response bodies). `NotFound` when absent.
    async fn expunge_message_content(&self, app: AppId, msg: MessageId) -> StoreResult<()>;

    /// Retention: clears payloads whose `payload_expires_at <= now` and attempt response bodies
    /// older than `responses_before`, and deletes the Overview's activity minutes and the
    /// dead-letter notes older than [`crate::overview::KEPT`] at `now`, at most `batch` rows of
    /// each; returns rows changed.
    async fn purge_expired(
        &self,
        now: DateTime<Utc>,
        responses_before: DateTime<Utc>,
        batch: usize,
    ) -> StoreResult<u64>;

    /// Retention of whole messages: deletes the messages created before `before` whose
    /// deliveries have all ended (none is pending, leased or not; held, delivered and
    /// dead-lettered ones go with their message), with their deliveries, attempts and channels,
    /// at most `batch` messages; returns how many it deleted. A message's id is made when the
    /// message is (see [`NewMessage::id`](crate::NewMessage::id)), so a store finds them as a
    /// range of ids. Concurrent calls (other processes' cleaners) skip each other's rows.
    async fn purge_messages(&self, before: DateTime<Utc>, batch: usize) -> StoreResult<u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_next_state_sets_its_status_and_keeps_what_it_does_not_name() {
        let at = Utc::now();
        let retry = NextState::RetryAt {
            at,
            client_errors: 2,
        };
        assert_eq!(
            retry.stored(),
            StoredNext {
                status: DeliveryStatus::Pending,
                next_attempt_at: Some(at),
                client_errors: Some(2),
                dead_letter_reason: None,
            }
        );
        let dead = NextState::DeadLetter {
            reason: "gone".into(),
            disable_endpoint: true,
        };
        assert_eq!(dead.stored().status, DeliveryStatus::DeadLettered);
        assert_eq!(dead.stored().dead_letter_reason, Some("gone"));
        for (next, status) in [
            (NextState::Delivered, DeliveryStatus::Delivered),
            (NextState::Hold, DeliveryStatus::Held),
        ] {
            let stored = next.stored();
            assert_eq!(stored.status, status);
            assert_eq!(stored.next_attempt_at, None);
            assert_eq!(stored.client_errors, None);
        }
    }

    #[test]
    fn a_trigger_reads_back_from_its_stored_text() {
        for trigger in [AttemptTrigger::Scheduled, AttemptTrigger::Manual] {
            assert_eq!(AttemptTrigger::parse(trigger.as_str()), Some(trigger));
        }
        assert_eq!(AttemptTrigger::parse("cron"), None);
    }
}
