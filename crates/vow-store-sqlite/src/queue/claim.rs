//! Claiming due deliveries with a lease, renewing leases, and when the next one is due.
//!
//! A claim is one writer job: one `UPDATE … RETURNING` leases up to `limit` rows picked from two
//! exact index ranges (unleased pending rows by due time, and pending rows whose lease expired;
//! see `migrations/0002_delivery_queue.sql`), then the same job reads what the worker needs:
//! each distinct message once and each distinct endpoint once. The writer runs one job at a
//! time, so two claims can never pick the same row.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use vow_core::{DeliveryId, EndpointId, MessageId};
use vow_store::queue::{ClaimRequest, ClaimedDelivery, DeliveryTarget, LeaseToken};
use vow_store::StoreError;

use crate::endpoints;
use crate::error::Result;
use crate::messages::{delivery_from_row, DELIVERY_COLUMNS};
use crate::rows::{micros, to_json, truncate};

/// The claim statement; `?4` (the endpoints to skip, a JSON array) only when `skip`.
fn claim_sql(skip: bool) -> String {
    let skip = if skip {
        " AND endpoint_id NOT IN (SELECT value FROM json_each(?4))"
    } else {
        ""
    };
    // The compound SELECT merges two ordered ranges (SQLite's ORDER BY on a compound is a
    // merge), so LIMIT stops the walk early; no row another worker holds is visited.
    format!(
        "UPDATE deliveries SET lease_token = ?1, lease_until = ?2
         WHERE id IN (SELECT id FROM (
             SELECT id, next_attempt_at FROM deliveries
              WHERE status = 'pending' AND lease_until IS NULL AND next_attempt_at <= ?3{skip}
             UNION ALL
             SELECT id, next_attempt_at FROM deliveries
              WHERE status = 'pending' AND lease_until IS NOT NULL AND lease_until <= ?3
                AND next_attempt_at <= ?3{skip}
             ORDER BY 2 LIMIT ?5))
         RETURNING {DELIVERY_COLUMNS}"
    )
}

/// Leases due deliveries to a fresh token and reads what attempting them needs.
pub(crate) fn claim(conn: &Connection, req: &ClaimRequest) -> Result<Vec<ClaimedDelivery>> {
    if req.limit == 0 {
        return Ok(Vec::new());
    }
    let token = LeaseToken(ulid::Ulid::new().to_string());
    let now = micros(req.now);
    let lease_until = truncate(
        req.now
            .checked_add_signed(req.lease)
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
    );
    let skip = if req.skip_endpoints.is_empty() {
        None
    } else {
        let ids: Vec<String> = req.skip_endpoints.iter().map(ToString::to_string).collect();
        Some(to_json(&ids)?)
    };
    let limit = i64::try_from(req.limit).unwrap_or(i64::MAX);

    let mut stmt = conn.prepare_cached(&claim_sql(skip.is_some()))?;
    let rows = stmt.query_map(
        params![token.0, micros(lease_until), now, skip, limit],
        delivery_from_row,
    )?;
    let mut claimed = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    // RETURNING yields rows in no particular order.
    claimed.sort_by_key(|d| (d.next_attempt_at, d.id));

    let mut messages: HashMap<MessageId, (String, Option<String>)> = HashMap::new();
    let mut targets: HashMap<EndpointId, DeliveryTarget> = HashMap::new();
    let mut message_stmt = conn.prepare_cached(
        "SELECT event_type, CASE WHEN payload_expires_at > ?3 THEN payload END
         FROM messages WHERE app_id = ?1 AND id = ?2",
    )?;
    let mut out = Vec::with_capacity(claimed.len());
    for delivery in claimed {
        let (event_type, payload) = match messages.entry(delivery.msg_id) {
            Entry::Occupied(found) => found.get().clone(),
            Entry::Vacant(slot) => {
                let app_msg = params![delivery.app_id.to_string(), slot.key().to_string(), now];
                let found: (String, Option<String>) = message_stmt
                    .query_row(app_msg, |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?
                    .ok_or_else(|| orphan(delivery.id, "message"))?;
                slot.insert(found).clone()
            }
        };
        let endpoint = match targets.entry(delivery.endpoint_id) {
            Entry::Occupied(found) => found.get().clone(),
            Entry::Vacant(slot) => {
                let target = endpoints::target(conn, &slot.key().to_string(), now)?
                    .ok_or_else(|| orphan(delivery.id, "endpoint"))?;
                slot.insert(target).clone()
            }
        };
        out.push(ClaimedDelivery {
            delivery,
            lease: token.clone(),
            lease_until,
            event_type,
            payload,
            endpoint,
        });
    }
    Ok(out)
}

/// A delivery whose message or endpoint row is missing: the foreign keys forbid it.
fn orphan(delivery: DeliveryId, what: &str) -> crate::error::Error {
    StoreError::Backend(format!("delivery {delivery} has no {what} row").into()).into()
}

/// Moves each lease still held with its token to `until`; returns how many were.
pub(crate) fn renew(
    conn: &Connection,
    leases: &[(DeliveryId, LeaseToken)],
    until: DateTime<Utc>,
) -> Result<usize> {
    let mut stmt = conn.prepare_cached(
        "UPDATE deliveries SET lease_until = ?3 WHERE id = ?1 AND lease_token = ?2",
    )?;
    let mut renewed = 0;
    for (id, token) in leases {
        renewed += stmt.execute(params![id.to_string(), token.0, micros(until)])?;
    }
    Ok(renewed)
}

/// The first unleased due time (one index entry), and the earliest a leased row frees up (a walk
/// over the leases, which are as many as deliveries in flight).
const NEXT_DUE: &str = "SELECT min(due) FROM (
    SELECT * FROM (SELECT next_attempt_at AS due FROM deliveries
     WHERE status = 'pending' AND lease_until IS NULL ORDER BY next_attempt_at LIMIT 1)
    UNION ALL
    SELECT min(max(next_attempt_at, lease_until)) FROM deliveries
     WHERE status = 'pending' AND lease_until IS NOT NULL)";

/// When the earliest pending delivery can next be claimed: its `next_attempt_at`, or for a
/// leased one the later of that and its lease's end.
pub(crate) fn next_due(conn: &Connection) -> Result<Option<DateTime<Utc>>> {
    let due: Option<i64> = conn.prepare_cached(NEXT_DUE)?.query_row([], |r| r.get(0))?;
    Ok(due.and_then(DateTime::from_timestamp_micros))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `detail` column of `EXPLAIN QUERY PLAN sql`.
    fn plan(conn: &Connection, sql: &str) -> Vec<String> {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let nulls = std::iter::repeat_n(rusqlite::types::Null, stmt.parameter_count());
        let rows = stmt
            .query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
            .unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    }

    /// Whether a plan reads the deliveries table itself from end to end.
    fn full_scan(plan: &str) -> bool {
        plan.lines().any(|l| l.trim() == "SCAN deliveries")
    }

    fn migrated() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::migrate::migrate(&mut conn).unwrap();
        conn
    }

    #[test]
    fn a_claim_walks_the_two_lease_indexes_and_never_scans_deliveries() {
        let conn = migrated();
        for skip in [false, true] {
            let plan = plan(&conn, &claim_sql(skip)).join("\n");
            assert!(plan.contains("INDEX deliveries_claimable"), "{plan}");
            assert!(plan.contains("INDEX deliveries_leased"), "{plan}");
            assert!(!full_scan(&plan), "{plan}");
            // The unleased range is read in due order, so LIMIT ends the walk early.
            let unleased = plan
                .lines()
                .skip_while(|l| !l.contains("deliveries_claimable"))
                .take(2)
                .collect::<Vec<_>>()
                .join("\n");
            assert!(!unleased.contains("TEMP B-TREE"), "{plan}");
        }
    }

    #[test]
    fn next_due_reads_the_lease_indexes() {
        let conn = migrated();
        let plan = plan(&conn, NEXT_DUE).join("\n");
        assert!(plan.contains("deliveries_claimable"), "{plan}");
        assert!(plan.contains("deliveries_leased"), "{plan}");
        assert!(!full_scan(&plan), "{plan}");
    }
}
