//! An operator's decision on a quarantined inbound event (an event id that came back with
//! another payload): release it (it is processed like any other event) or discard it. Either
//! happens once; a second decision is a 409.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use vow_core::{InboundEventId, SourceId};
use vow_store::idempotency::{Applied, Completion};
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
