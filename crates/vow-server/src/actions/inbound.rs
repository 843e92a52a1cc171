//! An operator's decisions on inbound events: on a quarantined one (an event id that came back
//! with another payload), release it (it is processed like any other event) or discard it,
//! once (a second decision is a 409); on an uncertain one (a forward whose effect is unknown),
//! settle it as completed, or forward it again.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use vow_core::DestinationId;
use vow_core::{InboundEventId, SourceId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::decisions::Decided;
use vow_store::inbound::processing::Resolution;
use vow_store::inbound::{InboundEvent, InboundState};
use vow_store::{Store, StoreResult};

use super::Action;
use crate::state::AppState;

/// A decision: `to` is [`InboundState::Received`] (release) or [`InboundState::Discarded`].
#[derive(Debug, Clone)]
pub struct Resolve {
    source: SourceId,
    event: InboundEventId,
    to: InboundState,
    now: DateTime<Utc>,
    /// Woken after a release: the forwarding workers have a new event.
    wake: Arc<Notify>,
}

impl Resolve {
    /// The decision to move `event` of `source` to `to`.
    pub fn new(
        state: &AppState,
        source: SourceId,
        event: InboundEventId,
        to: InboundState,
    ) -> Self {
        Self {
            source,
            event,
            to,
            now: state.now(),
            wake: state.inbound_wake.clone(),
        }
    }
}

impl Action for Resolve {
    type Done = InboundEvent;

    async fn write(
        self,
        store: Arc<dyn Store>,
        keyed: Option<Completion<InboundEvent>>,
    ) -> StoreResult<Applied<InboundEvent>> {
        let Resolve {
            source,
            event,
            to,
            now,
            wake,
        } = self;
        let applied = (store.resolve_quarantined_keyed(source, event, to, now, keyed)).await?;
        tracing::info!(source = %source, event = %event, to = to.as_str(), "quarantined inbound event resolved");
        if to == InboundState::Received {
            wake.notify_one();
        }
        Ok(applied)
    }
}

/// Settling an uncertain event's destinations (only `destination`'s when named).
#[derive(Debug, Clone)]
pub struct Settle {
    source: SourceId,
    event: InboundEventId,
    resolution: Resolution,
    destination: Option<DestinationId>,
    now: DateTime<Utc>,
    /// Woken after a retry: the forwarding workers have work again.
    wake: Arc<Notify>,
}

impl Settle {
    /// `resolution` for `event`'s uncertain destinations (only `destination` when named).
    pub fn new(
        state: &AppState,
        source: SourceId,
        event: InboundEventId,
        resolution: Resolution,
        destination: Option<DestinationId>,
    ) -> Self {
        Self {
            source,
            event,
            resolution,
            destination,
            now: state.now(),
            wake: state.inbound_wake.clone(),
        }
    }
}

impl Action for Settle {
    type Done = Decided;

    async fn write(
        self,
        store: Arc<dyn Store>,
        keyed: Option<Completion<Decided>>,
    ) -> StoreResult<Applied<Decided>> {
        let Settle {
            source,
            event,
            resolution,
            destination,
            now,
            wake,
        } = self;
        let applied = store
            .resolve_uncertain_keyed(source, event, resolution, destination, now, keyed)
            .await?;
        tracing::info!(%source, %event, ?resolution, destinations = applied.0.changed.len(),
            "uncertain inbound destinations resolved");
        if resolution == Resolution::Retry {
            wake.notify_one();
        }
        Ok(applied)
    }
}
