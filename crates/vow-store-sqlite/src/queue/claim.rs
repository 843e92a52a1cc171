//! Claiming due deliveries with a lease, renewing leases, and when the next one is due.
//!
//! A claim is one writer job (the writer runs one job at a time, so two claims can never pick the
//! same row). It finds work endpoint by endpoint, so an endpoint with no room in the claiming
//! process costs nothing however long its backlog:
//!
//! 1. take the due rows whose lease expired (`deliveries_leased`; as many as were in flight);
//! 2. walk the endpoints that have unleased pending rows, one index seek each, reading each one's
//!    earliest due time (`deliveries_claimable`, see `migrations/0003_claim_by_endpoint.sql`);
//! 3. serve the due endpoints longest-waiting first: each one's earliest due rows, up to its room,
//!    until `limit`; lease them;
//! 4. read what the worker needs: each distinct message once and each distinct endpoint once.
//!
//! The cost is one seek per endpoint with pending work plus at most `limit` rows, never the
//! backlog.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use vow_core::{DeliveryId, EndpointId, MessageId};
use vow_store::queue::DeliveryClaims;
use vow_store::queue::{ClaimRequest, ClaimedDelivery, DeliveryTarget, LeaseToken};
use vow_store::rules::lease::lease_until;
use vow_store::StoreResult;
use vow_store::{Delivery, StoreError};

use crate::convert::{id, micros, read, truncate};
use crate::endpoint;
use crate::error::Result;
use crate::message::DELIVERY_COLUMNS;
use crate::SqliteStore;

/// The next endpoint (after `?1`) with unleased pending rows, and its earliest due time.
const NEXT_ENDPOINT: &str = "SELECT endpoint_id, next_attempt_at FROM deliveries
     WHERE status = 'pending' AND lease_until IS NULL AND endpoint_id > ?1
     ORDER BY endpoint_id, next_attempt_at LIMIT 1";

/// An endpoint's (`?1`) earliest unleased rows due at `?2`, at most `?3`.
const UNLEASED_OF_ENDPOINT: &str = "SELECT id FROM deliveries
     WHERE status = 'pending' AND lease_until IS NULL AND endpoint_id = ?1
       AND next_attempt_at <= ?2
     ORDER BY next_attempt_at LIMIT ?3";

/// Pending rows whose lease expired by `?1` and that are due, at most `?2`.
const EXPIRED_LEASES: &str = "SELECT id, endpoint_id FROM deliveries
     WHERE status = 'pending' AND lease_until IS NOT NULL AND lease_until <= ?1
       AND next_attempt_at <= ?1
     ORDER BY lease_until LIMIT ?2";

/// Every endpoint with unleased pending rows and its earliest due time, in endpoint order.
pub(crate) fn endpoint_heads(conn: &Connection) -> Result<Vec<(EndpointId, i64)>> {
    let mut stmt = conn.prepare_cached(NEXT_ENDPOINT)?;
    let mut heads = Vec::new();
    let mut after = String::new();
    while let Some(head) = stmt
        .query_row([&after], |r| {
            Ok((id::<EndpointId>(r, 0)?, r.get::<_, i64>(1)?))
        })
        .optional()?
    {
        after = head.0.to_string();
        heads.push(head);
    }
    Ok(heads)
}

/// The ids a claim leases: first the due rows whose lease expired (they are overdue), then
/// endpoint by endpoint, the one whose earliest unleased delivery has waited longest first, each
/// endpoint's earliest due rows up to its room, until `limit`. Reads at most `limit` rows besides
/// one head per endpoint.
fn pick(conn: &Connection, req: &ClaimRequest, now: i64) -> Result<Vec<String>> {
    let mut taken: HashMap<EndpointId, usize> = HashMap::new();
    let room_left = |ep: EndpointId, taken: &HashMap<EndpointId, usize>| {
        req.room
            .of(&ep)
            .saturating_sub(taken.get(&ep).copied().unwrap_or(0))
    };
    let mut picked = Vec::new();
    let mut expired = conn.prepare_cached(EXPIRED_LEASES)?;
    let limit = i64::try_from(req.limit).unwrap_or(i64::MAX);
    let rows = expired.query_map(params![now, limit], |r| {
        Ok((r.get::<_, String>(0)?, id::<EndpointId>(r, 1)?))
    })?;
    for row in rows {
        let (delivery, ep) = row?;
        if room_left(ep, &taken) > 0 {
            *taken.entry(ep).or_default() += 1;
            picked.push(delivery);
        }
    }
    let mut heads = endpoint_heads(conn)?;
    heads.retain(|(_, due)| *due <= now);
    heads.sort_by_key(|(ep, due)| (*due, *ep));
    let mut unleased = conn.prepare_cached(UNLEASED_OF_ENDPOINT)?;
    for (ep, _) in heads {
        let take = room_left(ep, &taken).min(req.limit - picked.len());
        if take == 0 {
            continue;
        }
        let take = i64::try_from(take).unwrap_or(i64::MAX);
        let rows = unleased.query_map(params![ep.to_string(), now, take], |r| r.get(0))?;
        for row in rows {
            picked.push(row?);
        }
        if picked.len() >= req.limit {
            break;
        }
    }
    Ok(picked)
}

/// Leases due deliveries to a fresh token and reads what attempting them needs.
pub(crate) fn claim(conn: &Connection, req: &ClaimRequest) -> Result<Vec<ClaimedDelivery>> {
    if req.limit == 0 {
        return Ok(Vec::new());
    }
    let token = LeaseToken::fresh();
    let now = micros(req.now);
    let lease_until = truncate(lease_until(req.now, req.lease));
    let picked = pick(conn, req, now)?;
    let mut lease = conn.prepare_cached(&format!(
        "UPDATE deliveries SET lease_token = ?2, lease_until = ?3 WHERE id = ?1
         RETURNING {DELIVERY_COLUMNS}"
    ))?;
    let mut claimed = Vec::with_capacity(picked.len());
    for delivery in picked {
        let row = params![delivery, token.0, micros(lease_until)];
        claimed.push(lease.query_row(row, read::<Delivery>)?);
    }
    // Handed out earliest due first.
    claimed.sort_by_key(|d| (d.next_attempt_at, d.id));

    let mut messages: HashMap<MessageId, MessagePart> = HashMap::new();
    let mut targets: HashMap<EndpointId, DeliveryTarget> = HashMap::new();
    let mut message_stmt = conn.prepare_cached(
        "SELECT event_type, CASE WHEN payload_expires_at > ?3 THEN payload END, traceparent
         FROM messages WHERE app_id = ?1 AND id = ?2",
    )?;
    let mut out = Vec::with_capacity(claimed.len());
    for delivery in claimed {
        let (event_type, payload, traceparent) = match messages.entry(delivery.msg_id) {
            Entry::Occupied(found) => found.get().clone(),
            Entry::Vacant(slot) => {
                let app_msg = params![delivery.app_id.to_string(), slot.key().to_string(), now];
                let found: MessagePart = message_stmt
                    .query_row(app_msg, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .optional()?
                    .ok_or_else(|| orphan(delivery.id, "message"))?;
                slot.insert(found).clone()
            }
        };
        let endpoint = match targets.entry(delivery.endpoint_id) {
            Entry::Occupied(found) => found.get().clone(),
            Entry::Vacant(slot) => {
                let target = endpoint::target(conn, &slot.key().to_string(), now)?
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
            traceparent,
            endpoint,
        });
    }
    Ok(out)
}

/// The part of a message a claim needs: its event type, its payload (`None` once expired) and
/// its `traceparent`.
type MessagePart = (String, Option<String>, Option<String>);

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

/// The earliest a leased row frees up (a walk over the leases, as many as deliveries in flight).
const NEXT_LEASE_END: &str = "SELECT min(max(next_attempt_at, lease_until)) FROM deliveries
     WHERE status = 'pending' AND lease_until IS NOT NULL";

/// When the earliest pending delivery can next be claimed: an endpoint's earliest unleased due
/// time, or for a leased row the later of its due time and its lease's end.
pub(crate) fn next_due(conn: &Connection) -> Result<Option<DateTime<Utc>>> {
    let unleased = endpoint_heads(conn)?.into_iter().map(|(_, due)| due).min();
    let leased: Option<i64> = conn
        .prepare_cached(NEXT_LEASE_END)?
        .query_row([], |r| r.get(0))?;
    let due = unleased.into_iter().chain(leased).min();
    Ok(due.and_then(DateTime::from_timestamp_micros))
}

#[async_trait]
impl DeliveryClaims for SqliteStore {
    async fn claim_deliveries(&self, req: &ClaimRequest) -> StoreResult<Vec<ClaimedDelivery>> {
        let req = req.clone();
        self.write(move |c| claim(c, &req)).await
    }

    async fn renew_leases(
        &self,
        leases: &[(DeliveryId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize> {
        if leases.is_empty() {
            return Ok(0);
        }
        let leases = leases.to_vec();
        self.write(move |c| renew(c, &leases, until)).await
    }

    async fn next_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        self.read(next_due).await
    }

    async fn reserve_send_slot(
        &self,
        endpoint: EndpointId,
        rate: u16,
    ) -> StoreResult<std::time::Duration> {
        Ok(self.pace.reserve(endpoint, rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{full_scan, migrated, plan};

    /// The statements a claim and `next_due` run.
    const STATEMENTS: [&str; 4] = [
        NEXT_ENDPOINT,
        UNLEASED_OF_ENDPOINT,
        EXPIRED_LEASES,
        NEXT_LEASE_END,
    ];

    #[test]
    fn a_claim_seeks_the_lease_indexes_and_never_scans_or_sorts_deliveries() {
        let conn = migrated();
        for (sql, index) in STATEMENTS.iter().zip([
            "deliveries_claimable",
            "deliveries_claimable",
            "deliveries_leased",
            "deliveries_leased",
        ]) {
            let plan = plan(&conn, sql);
            assert!(plan.contains(index), "{sql}: {plan}");
            assert!(!full_scan(&plan, "deliveries"), "{sql}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql}: {plan}");
        }
    }
}
