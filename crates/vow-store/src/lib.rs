//! The storage contract of vow: one [`Store`] trait, implemented once per backend.
//!
//! Every state change the API makes is one `Store` method and so one transaction in the backend:
//! a message and its delivery rows are written together or not at all. Backends translate their
//! own error codes (unique violations, lost connections) into [`StoreError`] so callers never see
//! SQL. The `conformance` module (feature `testing`) holds the behaviour suite every backend must
//! pass, generic over the trait, so SQLite and PostgreSQL stay equivalent.
//!
//! # Layout
//! - [`model`]: the rows: applications, event types, endpoints, messages, deliveries.
//! - [`page`]: keyset pagination (`Seek`) and Svix-style pages (`iterator`, `prevIterator`).
//! - [`queue`]: [`DeliveryQueue`], the delivery queue workers claim from and record into.
//! - [`inbound`]: [`InboundStore`], sources of inbound webhooks and the events claimed from them.
//! - [`error`]: the error type, [`StoreError`].
//! - [`idempotency`]: what the `Idempotency-Key` methods take: the record a keyed write
//!   completes in its own transaction ([`idempotency::Completion`]).
//! - [`rows`]: how a stored row reads back as each model, once for every backend (each
//!   implements [`rows::Columns`] for its row type).
//! - [`session`]: [`Sessions`], the console's browser sessions and app-portal tokens.
//! - [`overview`]: [`Overviews`], the console's Overview: the last hour's and day's delivery
//!   and inbound figures, the backlog, from per-minute activity and index ranges.
//! - [`rules`]: the business rules both backends apply, as pure functions (superseding by
//!   version, dead-letter counting, leases).
//! - `conformance` (feature `testing`, so only test builds compile it): the shared behaviour suite
//!   and the macro that instantiates it; the backends enable it in their dev-dependencies.

#[cfg(feature = "testing")]
pub mod conformance;
pub mod dead_letters;
pub mod entities;
pub mod error;
pub mod idempotency;
pub mod inbound;
pub mod model;
pub mod overview;
pub mod page;
pub mod queue;
pub mod relay;
pub mod rows;
pub mod rules;
pub mod session;

pub use dead_letters::DeadLetterAlerts;
pub use entities::{Admin, Applications, Endpoints, EventTypes, MessageCreate, Messages};
pub use error::{StoreError, StoreResult};
pub use idempotency::IdempotencyRecords;
pub use inbound::InboundStore;
pub use model::*;
pub use overview::Overviews;
pub use page::{Order, Seek};
pub use queue::DeliveryQueue;
pub use relay::RelayListeners;
pub use session::Sessions;

/// Everything vow persists: every per-entity trait of a backend, in one. Implemented by any type
/// that implements them all (`vow-store-sqlite`, `vow-store-postgres`), so an `Arc<dyn Store>`
/// reaches every method, with no trait to import.
pub trait Store:
    Admin
    + Applications
    + EventTypes
    + Endpoints
    + Messages
    + IdempotencyRecords
    + DeliveryQueue
    + InboundStore
    + Sessions
    + RelayListeners
    + DeadLetterAlerts
    + Overviews
{
}

impl<T> Store for T where
    T: Admin
        + Applications
        + EventTypes
        + Endpoints
        + Messages
        + IdempotencyRecords
        + DeliveryQueue
        + InboundStore
        + Sessions
        + RelayListeners
        + DeadLetterAlerts
        + Overviews
{
}

/// Every trait of the store, for callers that hold a concrete backend (`use
/// vow_store::prelude::*;`); callers holding a `dyn Store` or an `S: Store` need none.
pub mod prelude {
    pub use crate::dead_letters::DeadLetterAlerts;
    pub use crate::entities::{
        Admin, Applications, Endpoints, EventTypes, MessageCreate, Messages,
    };
    pub use crate::idempotency::IdempotencyRecords;
    pub use crate::inbound::{
        InboundActivity, InboundDecisions, InboundEvents, InboundStore, InboundWork, SourceReplays,
        Sources,
    };
    pub use crate::overview::Overviews;
    pub use crate::queue::{
        AttemptedListings, Attempts, DeliveryClaims, DeliveryOperators, DeliveryOutcomes,
        DeliveryQueue, Retention,
    };
    pub use crate::relay::RelayListeners;
    pub use crate::session::Sessions;
    pub use crate::Store;
}
