//! Replaying an endpoint's dead-lettered (and held) deliveries, filtered by time range, event
//! type and last status; Svix's `recover` is the same with a time range only. A dry run counts
//! what a replay would requeue and writes nothing. Each replay has an id, recorded on the
//! deliveries it requeues, so its progress counts them apart from the endpoint's others.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use vow_core::{AppId, EndpointId, EventTypeName, ReplayId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::queue::ReplayFilter;
use vow_store::{Store, StoreResult};

use super::Action;
use crate::error::ApiResult;
use crate::http::api::validate::Problems;
use crate::state::AppState;

/// How far apart replayed deliveries are scheduled, so a receiver that just came back is not
/// flooded (50 per second per endpoint).
pub const SPACING: Duration = Duration::milliseconds(20);

/// A replay of `endpoint`'s deliveries matching `filter`.
#[derive(Debug, Clone)]
pub struct Replay {
    /// The endpoint's application.
    pub app: AppId,
    /// The endpoint.
    pub endpoint: EndpointId,
    /// The replay's id, recorded on each delivery it requeues.
    pub id: ReplayId,
    /// Which deliveries.
    pub filter: ReplayFilter,
    /// When the replayed deliveries fall due (the first of them).
    pub now: DateTime<Utc>,
}

impl Replay {
    /// Checks a filter: event type names valid, `since` before `until`. `at` names the fields
    /// in a refusal (`["body"]` for the API).
    pub fn filter(at: &str, filter: ReplayFilter) -> ApiResult<ReplayFilter> {
        let mut p = Problems::default();
        for (i, t) in filter.event_types.iter().enumerate() {
            let field = i.to_string();
            p.check(
                &[at, "eventTypes", &field],
                EventTypeName::parse(t.as_str()),
            );
        }
        if let (Some(since), Some(until)) = (filter.since, filter.until) {
            p.require(
                since < until,
                &[at, "until"],
                "must be after `since`",
                "value_error.range",
            );
        }
        p.finish()?;
        Ok(filter)
    }

    /// How many deliveries the replay would requeue now (a dry run: writes nothing).
    pub async fn count(&self, state: &AppState) -> StoreResult<u64> {
        (state.queue)
            .replay(
                self.app,
                self.endpoint,
                self.id,
                &self.filter,
                self.now,
                SPACING,
                true,
            )
            .await
    }
}

impl Action for Replay {
    type Done = u64;

    async fn write(
        self,
        store: Arc<dyn Store>,
        keyed: Option<Completion<u64>>,
    ) -> StoreResult<Applied<u64>> {
        let Replay {
            app,
            endpoint,
            id,
            filter,
            now,
        } = self;
        (store.replay_keyed(app, endpoint, id, &filter, now, SPACING, keyed)).await
    }
}
