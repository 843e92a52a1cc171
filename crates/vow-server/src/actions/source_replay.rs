//! Replaying an inbound source's dead-lettered and rejected forwards in bulk, filtered by
//! received time and destination (`vow_store::inbound::source_replay`). A dry run counts what
//! a replay would requeue and writes nothing. Each replay has an id, recorded on the forwards
//! it requeues, so its progress counts them apart from the source's others.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use vow_core::{ReplayId, SourceId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::source_replay::{SourceReplayFilter, SourceReplayed};
use vow_store::{Store, StoreResult};

use super::Action;
use crate::state::AppState;

/// A replay of `source`'s forwards that `filter` picks.
#[derive(Debug, Clone)]
pub struct SourceReplay {
    source: SourceId,
    id: ReplayId,
    filter: SourceReplayFilter,
    now: DateTime<Utc>,
    /// Woken after a replay that requeued something: the forwarders have work.
    wake: Arc<Notify>,
}

impl SourceReplay {
    /// Replay `id` of `source`'s forwards that `filter` picks (checked by the caller: `since`
    /// before `until`, a destination of the source).
    pub fn new(
        state: &AppState,
        source: SourceId,
        id: ReplayId,
        filter: SourceReplayFilter,
    ) -> Self {
        Self {
            source,
            id,
            filter,
            now: state.now(),
            wake: state.inbound_wake.clone(),
        }
    }

    /// What the replay would do now (a dry run: writes nothing).
    pub async fn count(&self, state: &AppState) -> StoreResult<SourceReplayed> {
        (state.inbound)
            .count_source_replay(self.source, &self.filter)
            .await
    }
}

impl Action for SourceReplay {
    type Done = SourceReplayed;

    async fn write(
        self,
        store: Arc<dyn Store>,
        keyed: Option<Completion<SourceReplayed>>,
    ) -> StoreResult<Applied<SourceReplayed>> {
        let SourceReplay {
            source,
            id,
            filter,
            now,
            wake,
        } = self;
        let applied = (store.replay_source_keyed(source, id, &filter, now, keyed)).await?;
        let done = applied.0;
        tracing::info!(%source, replay = %id, requeued = done.requeued, skipped = done.skipped,
            "inbound source replayed");
        if done.requeued > 0 {
            wake.notify_one();
        }
        Ok(applied)
    }
}
