//! vow's domain vocabulary: the pure types and decisions every other crate shares.
//!
//! Nothing here does IO. Handlers parse untrusted input into these types once, at the edge, and
//! everything behind them (the store, the workers) can rely on the invariants they carry.
//!
//! # Layout
//! - [`id`]: typed, prefixed, time-sortable ids (`app_…`, `ep_…`, `msg_…`, `src_…`) from one macro.
//! - [`name`]: validated names: uids, event-type names, channels, endpoint URLs.
//! - [`matching`]: which endpoints a message fans out to.
//! - [`patch`]: the three states of a field in a PATCH body (absent, null, value).
//! - [`style`]: how an endpoint wants deliveries signed.
//! - [`retry`]: the delivery outcome policy: retry schedule, attempt classification, auto-disable.
//! - [`version`]: what an inbound event's version means, so an entity's events are ordered by it.

pub mod id;
pub mod matching;
pub mod name;
#[cfg(feature = "utoipa")]
mod openapi;
pub mod patch;
pub mod retry;
pub mod style;
pub mod version;

pub use id::{
    AppId, AttemptId, DeliveryId, DestinationId, EndpointId, IdError, InboundEventId, MessageId,
    RejectionId, ReplayId, SourceId,
};
pub use name::{Channel, EndpointUrl, EventTypeName, InvalidName, Uid};
pub use patch::Patch;
pub use retry::{
    decide, should_disable, AttemptContext, AttemptResult, DeadLetterReason, Decision,
    RetrySchedule, ScheduleError,
};
pub use style::SignatureStyle;
