//! When relay targets were last connected ([`vow_store::RelayListeners`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::params;
use vow_store::relay::{RelayListeners, RelayTarget};
use vow_store::StoreResult;

use crate::convert::micros;
use crate::SqliteStore;

#[async_trait]
impl RelayListeners for SqliteStore {
    async fn relays_seen(&self, targets: &[RelayTarget], now: DateTime<Utc>) -> StoreResult<()> {
        let targets = targets.to_vec();
        self.write(move |conn| {
            let mut upsert = conn.prepare_cached(
                "INSERT INTO relay_listeners (id, kind, owner_id, seen_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (id) DO UPDATE SET seen_at = max(relay_listeners.seen_at, excluded.seen_at)",
            )?;
            for t in &targets {
                upsert.execute(params![t.id(), t.kind(), t.owner(), micros(now)])?;
            }
            Ok(())
        })
        .await
    }

    async fn take_stale_relays(
        &self,
        before: DateTime<Utc>,
        batch: usize,
    ) -> StoreResult<Vec<RelayTarget>> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        self.write(move |conn| {
            let mut take = conn.prepare_cached(
                "DELETE FROM relay_listeners WHERE id IN
                 (SELECT id FROM relay_listeners WHERE seen_at < ?1 LIMIT ?2)
                 RETURNING kind, owner_id, id",
            )?;
            let rows = take.query_map(params![micros(before), batch], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?;
            let rows: Vec<(String, String, String)> = rows.collect::<rusqlite::Result<_>>()?;
            Ok(rows
                .iter()
                .filter_map(|(kind, owner, id)| RelayTarget::parse(kind, owner, id))
                .collect())
        })
        .await
    }
}
