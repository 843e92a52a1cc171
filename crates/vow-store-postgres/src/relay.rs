//! When relay targets were last connected ([`vow_store::RelayListeners`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_store::relay::{RelayListeners, RelayTarget};
use vow_store::StoreResult;

use crate::convert;
use crate::error::db_error;
use crate::PgStore;

#[async_trait]
impl RelayListeners for PgStore {
    async fn relays_seen(&self, targets: &[RelayTarget], now: DateTime<Utc>) -> StoreResult<()> {
        let ids: Vec<String> = targets.iter().map(RelayTarget::id).collect();
        let kinds: Vec<&str> = targets.iter().map(RelayTarget::kind).collect();
        let owners: Vec<String> = targets.iter().map(RelayTarget::owner).collect();
        sqlx::query(
            "INSERT INTO relay_listeners (id, kind, owner_id, seen_at)
             SELECT id, kind, owner_id, $4 FROM UNNEST($1::text[], $2::text[], $3::text[])
                 AS t (id, kind, owner_id)
             ORDER BY id
             ON CONFLICT (id) DO UPDATE SET seen_at = GREATEST(relay_listeners.seen_at, excluded.seen_at)",
        )
        .bind(&ids)
        .bind(&kinds)
        .bind(&owners)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn take_stale_relays(
        &self,
        before: DateTime<Utc>,
        batch: usize,
    ) -> StoreResult<Vec<RelayTarget>> {
        // SKIP LOCKED: nodes sweeping at once take disjoint rows rather than wait for each other.
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "DELETE FROM relay_listeners WHERE id IN
             (SELECT id FROM relay_listeners WHERE seen_at < $1
              ORDER BY seen_at LIMIT $2 FOR UPDATE SKIP LOCKED)
             RETURNING kind, owner_id, id",
        )
        .bind(before)
        .bind(convert::bigint_param(batch))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows
            .iter()
            .filter_map(|(kind, owner, id)| RelayTarget::parse(kind, owner, id))
            .collect())
    }
}
