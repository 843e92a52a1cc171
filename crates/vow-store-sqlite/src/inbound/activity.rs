//! A source's activity for `vow tail --source` ([`vow_store::inbound::activity`]): three
//! keyset reads after one cursor, by the `*_by_arrival` and `inbound_forwards_by_time`
//! indexes, merged.

use async_trait::async_trait;
use rusqlite::{params, Connection};
use vow_store::inbound::activity::{
    first, Activity, ActivityFilter, ActivityKey, ForwardActivity, InboundActivity,
};
use vow_store::inbound::{InboundEvent, Rejection};
use vow_store::rows::FromColumns;
use vow_store::StoreResult;

use crate::convert::{micros, read};
use crate::error::Result;
use crate::SqliteStore;

/// The statements of the three reads: a source's arrivals, its refusals, its forwards'
/// outcomes, each after the cursor `(?2, ?3[, ?4])`. The forwards' `CROSS JOIN` keeps SQLite
/// reading the outcomes since the cursor first (each event then by its key), not every event
/// the source ever had.
fn statements() -> [String; 3] {
    [
        format!(
            "SELECT {} FROM inbound_events
             WHERE source_id = ?1 AND (received_at, id) > (?2, ?3)
               AND (NOT ?4 OR conflicts_with IS NOT NULL)
             ORDER BY received_at, id LIMIT ?5",
            InboundEvent::COLUMNS
        ),
        format!(
            "SELECT {} FROM inbound_rejections
             WHERE source_id = ?1 AND (received_at, id) > (?2, ?3)
             ORDER BY received_at, id LIMIT ?4",
            Rejection::COLUMNS
        ),
        format!(
            "SELECT {} FROM inbound_forwards f CROSS JOIN inbound_events e ON e.id = f.event_id
             WHERE (f.updated_at, f.event_id, f.destination) > (?2, ?3, ?4)
               AND e.source_id = ?1 AND (NOT ?5 OR f.outcome <> 'completed')
             ORDER BY f.updated_at, f.event_id, f.destination LIMIT ?6",
            ForwardActivity::COLUMNS
        ),
    ]
}

/// The first `limit` rows of each table after `after`, merged.
fn tail(
    conn: &Connection,
    filter: ActivityFilter,
    after: &ActivityKey,
    limit: usize,
) -> Result<Vec<Activity>> {
    let (source, at) = (filter.source.to_string(), micros(after.at));
    let failures = filter.failures_only;
    let n = i64::try_from(limit).unwrap_or(i64::MAX);
    let [events, rejections, forwards] = statements();
    let mut rows = Vec::new();
    let mut stmt = conn.prepare_cached(&events)?;
    let found = stmt.query_map(params![source, at, after.id, failures, n], read)?;
    for event in found {
        rows.push(Activity::Event(event?));
    }
    let mut stmt = conn.prepare_cached(&rejections)?;
    for rejection in stmt.query_map(params![source, at, after.id, n], read)? {
        rows.push(Activity::Rejection(rejection?));
    }
    let mut stmt = conn.prepare_cached(&forwards)?;
    let found = stmt.query_map(params![source, at, after.id, after.part, failures, n], read)?;
    for forward in found {
        rows.push(Activity::Forward(forward?));
    }
    Ok(first(rows, limit))
}

#[async_trait]
impl InboundActivity for SqliteStore {
    async fn tail_inbound(
        &self,
        filter: &ActivityFilter,
        after: &ActivityKey,
        limit: usize,
    ) -> StoreResult<Vec<Activity>> {
        let (filter, after) = (*filter, after.clone());
        self.read(move |c| tail(c, filter, &after, limit)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{full_scan, migrated, plan};

    #[test]
    fn each_read_is_one_index_range_from_the_cursor_in_key_order() {
        let conn = migrated();
        let indexes = [
            "inbound_events_by_arrival (source_id=? AND (received_at,id)>(?,?))",
            "inbound_rejections_by_arrival (source_id=? AND (received_at,id)>(?,?))",
            "inbound_forwards_by_time ((updated_at,event_id,destination)>(?,?,?))",
        ];
        for (sql, index) in statements().iter().zip(indexes) {
            let plan = plan(&conn, sql);
            assert!(plan.contains(index), "{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
            assert!(
                !plan.contains("(source_id=?)"),
                "never a source's whole history: {plan}"
            );
            for table in [
                "inbound_events",
                "inbound_rejections",
                "inbound_forwards",
                "e",
                "f",
            ] {
                assert!(!full_scan(&plan, table), "{plan}");
            }
        }
    }
}
