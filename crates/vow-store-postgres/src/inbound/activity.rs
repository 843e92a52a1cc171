//! A source's activity for `vow tail --source` ([`vow_store::inbound::activity`]): three
//! keyset reads after one cursor, by the `*_by_arrival` and `inbound_forwards_by_time`
//! indexes, merged.

use async_trait::async_trait;
use vow_store::inbound::activity::{
    first, Activity, ActivityFilter, ActivityKey, ForwardActivity, InboundActivity,
};
use vow_store::inbound::{InboundEvent, Rejection};
use vow_store::rows::FromColumns;
use vow_store::StoreResult;

use crate::convert::{bigint_param, read};
use crate::error::db_error;
use crate::PgStore;

#[async_trait]
impl InboundActivity for PgStore {
    async fn tail_inbound(
        &self,
        filter: &ActivityFilter,
        after: &ActivityKey,
        limit: usize,
    ) -> StoreResult<Vec<Activity>> {
        let (source, n) = (filter.source.to_string(), bigint_param(limit));
        let failures = filter.failures_only;
        let (events, rejections, forwards) = (
            format!(
                "SELECT {} FROM inbound_events
                 WHERE source_id = $1 AND (received_at, id) > ($2, $3)
                   AND (NOT $4 OR conflicts_with IS NOT NULL)
                 ORDER BY received_at, id LIMIT $5",
                InboundEvent::COLUMNS
            ),
            format!(
                "SELECT {} FROM inbound_rejections
                 WHERE source_id = $1 AND (received_at, id) > ($2, $3)
                 ORDER BY received_at, id LIMIT $4",
                Rejection::COLUMNS
            ),
            format!(
                "SELECT {} FROM inbound_forwards f JOIN inbound_events e ON e.id = f.event_id
                 WHERE (f.updated_at, f.event_id, f.destination) > ($2, $3, $4)
                   AND e.source_id = $1 AND (NOT $5 OR f.outcome <> 'completed')
                 ORDER BY f.updated_at, f.event_id, f.destination LIMIT $6",
                ForwardActivity::COLUMNS
            ),
        );
        let events = sqlx::query(&events)
            .bind(&source)
            .bind(after.at)
            .bind(&after.id)
            .bind(failures)
            .bind(n)
            .try_map(read::<InboundEvent>)
            .fetch_all(&self.pool);
        let rejections = sqlx::query(&rejections)
            .bind(&source)
            .bind(after.at)
            .bind(&after.id)
            .bind(n)
            .try_map(read::<Rejection>)
            .fetch_all(&self.pool);
        let forwards = sqlx::query(&forwards)
            .bind(&source)
            .bind(after.at)
            .bind(&after.id)
            .bind(&after.part)
            .bind(failures)
            .bind(n)
            .try_map(read::<ForwardActivity>)
            .fetch_all(&self.pool);
        let (events, rejections, forwards) =
            tokio::try_join!(events, rejections, forwards).map_err(db_error)?;
        let rows = events
            .into_iter()
            .map(Activity::Event)
            .chain(rejections.into_iter().map(Activity::Rejection))
            .chain(forwards.into_iter().map(Activity::Forward))
            .collect();
        Ok(first(rows, limit))
    }
}
