//! Claiming due deliveries under a lease, renewing leases, and when the next one falls due.
//!
//! Work is found endpoint by endpoint ([`ENDPOINTS_WITH_WORK`]: one index seek per endpoint with
//! pending rows), so an endpoint with no room in the claiming process costs one seek however
//! long its backlog, and each endpoint gives at most its room.
//!
//! A claim is one statement: the claiming `UPDATE` and, joined to what it returns, the claimed
//! deliveries' messages and endpoints (with the secrets valid at `now`). A message or endpoint
//! deleted since the statement's snapshot took its deliveries with it (ON DELETE CASCADE), so such
//! a delivery no longer exists and is simply left out of the answer.
//!
//! The claim runs on a plan kept per connection, made of index reads only ([`kept_plans`]);
//! lease renewal, made every few seconds, is planned for each call
//! ([`sqlx::query::Query::persistent`]`(false)`), with its arrays and the tables' sizes as
//! they are now. A plan PostgreSQL cached while a table was small joined it by a sequential
//! scan, and kept doing so as it grew, until autovacuum's next analyze: measured, a claim and
//! a record each scanned all 19,941 rows of `deliveries` to update 15.

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use vow_core::{DeliveryId, EndpointId};
use vow_store::queue::DeliveryClaims;
use vow_store::queue::{ClaimRequest, ClaimedDelivery, DeliveryTarget, LeaseToken};
use vow_store::rows::{FromColumns, Reader};
use vow_store::rules::lease::lease_until;
use vow_store::{Delivery, EndpointSecret, StoreResult};

use crate::convert::{self, PgColumns};
use crate::delivery::COLUMNS;
use crate::error::db_error;
use crate::{kept_plans, PgStore};

use super::floors::ClaimFloors;

/// `endpoints_with_work (ep)`: every endpoint with pending rows, by a loose scan of the index on
/// pending rows' `(endpoint_id, next_attempt_at)`: one seek per endpoint (the last row is NULL).
/// It scans backwards, so each seek lands on an endpoint's latest due rows, which are live,
/// not on the entries of rows delivered since the last vacuum, which sit at the front of its
/// range (see [`super::floors`]).
pub(crate) const ENDPOINTS_WITH_WORK: &str = "endpoints_with_work (ep) AS (
        (SELECT endpoint_id FROM deliveries WHERE status = 'pending'
         ORDER BY endpoint_id DESC, next_attempt_at DESC LIMIT 1)
      UNION ALL
        SELECT (SELECT d.endpoint_id FROM deliveries d
                WHERE d.status = 'pending' AND d.endpoint_id < w.ep
                ORDER BY d.endpoint_id DESC, d.next_attempt_at DESC LIMIT 1)
        FROM endpoints_with_work w WHERE w.ep IS NOT NULL)";

/// A claimed delivery as the claim returns it: [`Delivery::COLUMNS`] (`RETURNING` of the
/// claiming `UPDATE`), its message's event type, payload (NULL when expunged or expired at the
/// claim's `now`) and traceparent, then its endpoint: [`DeliveryTarget::COLUMNS`] and its
/// secrets valid at `now` as two arrays (current first, then rotated-out ones newest first).
fn claimed_row(row: PgRow) -> sqlx::Result<(Delivery, MessagePart, DeliveryTarget)> {
    let columns = PgColumns(&row);
    let mut r = Reader::new(&columns);
    let delivery: Delivery = r.take()?;
    let message = MessagePart {
        event_type: r.text()?,
        payload: r.opt_text()?,
        traceparent: r.opt_text()?,
    };
    let mut target: DeliveryTarget = r.take()?;
    let at = r.at();
    let keys: Vec<String> = row.try_get(at)?;
    let valid_until: Vec<Option<DateTime<Utc>>> = row.try_get(at + 1)?;
    target.secrets = keys
        .into_iter()
        .zip(valid_until)
        .map(|(key, valid_until)| EndpointSecret { key, valid_until })
        .collect();
    Ok((delivery, message, target))
}

/// The part of a message a claim hands out.
struct MessagePart {
    event_type: String,
    payload: Option<String>,
    traceparent: Option<String>,
}

/// The claim: the due endpoints, longest waiting first, each with its earliest due rows from
/// its floor (`$6`) up to its room (`$5`, else `$4`), at most `$2` in all, leased under `$3`
/// until `$7`; `$1` is now. Rooms and floors come as `jsonb` objects keyed by endpoint id
/// ([`by_endpoint`]), looked up by key for each endpoint with work: as arrays, each lookup
/// walked the whole array, so a claim cost endpoints × floors (measured by hand with 5,000 of
/// each: 5.4 s against 7.9 ms by key). The nested loop runs in that order and
/// stops at `$2`, so no more rows are read and locked than are taken (plus one endpoint's).
/// `claimed_id`, not `id`, so RETURNING's bare column names can only mean `deliveries`. Each
/// claimed row is joined to its message and endpoint laterally, by id, in the same statement.
/// (`LIMIT 1` on a row found by its primary key keeps the planner
/// from turning the lateral into a join it may order the other way round: from every
/// endpoint to the claimed rows.) Columns as [`claimed_row`] reads them. Made once.
static CLAIM: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH RECURSIVE {ENDPOINTS_WITH_WORK},
     room AS (
         SELECT w.ep, COALESCE(($5::jsonb ->> w.ep)::bigint, $4) AS n, f.floor, h.head
         FROM endpoints_with_work w
         CROSS JOIN LATERAL (
             SELECT COALESCE(($6::jsonb ->> w.ep)::timestamptz, '-infinity') AS floor) f
         CROSS JOIN LATERAL (
             SELECT next_attempt_at AS head FROM deliveries
             WHERE status = 'pending' AND endpoint_id = w.ep
               AND next_attempt_at >= f.floor
               AND (lease_until IS NULL OR lease_until <= $1)
             ORDER BY next_attempt_at LIMIT 1) h
         WHERE w.ep IS NOT NULL AND h.head <= $1
         ORDER BY h.head, w.ep),
     c AS (
         SELECT p.claimed_id FROM room CROSS JOIN LATERAL (
             SELECT id AS claimed_id FROM deliveries
             WHERE status = 'pending' AND endpoint_id = room.ep
               AND next_attempt_at >= room.floor AND next_attempt_at <= $1
               AND (lease_until IS NULL OR lease_until <= $1)
             ORDER BY next_attempt_at
             LIMIT LEAST(room.n, $2)
             FOR UPDATE SKIP LOCKED) p
         LIMIT $2),
     claimed AS (
         UPDATE deliveries d SET lease_token = $3, lease_until = $7
         FROM c WHERE d.id = c.claimed_id
         RETURNING {COLUMNS})
     SELECT claimed.*, m.event_type, m.payload, m.traceparent, t.*
     FROM claimed
     CROSS JOIN LATERAL (
         SELECT event_type, CASE WHEN payload_expires_at > $1 THEN payload END AS payload,
                traceparent
         FROM messages WHERE id = claimed.msg_id LIMIT 1) m
     CROSS JOIN LATERAL (
         SELECT {target},
                COALESCE(s.keys, '{{}}') AS secret_keys,
                COALESCE(s.valid_until, '{{}}') AS secret_valid_until
         FROM endpoints e
         LEFT JOIN LATERAL (
             SELECT array_agg(key ORDER BY valid_until IS NULL DESC, seq DESC) AS keys,
                    array_agg(valid_until ORDER BY valid_until IS NULL DESC, seq DESC)
                        AS valid_until
             FROM endpoint_secrets
             WHERE endpoint_id = e.id AND (valid_until IS NULL OR valid_until > $1)
         ) s ON TRUE
         WHERE e.id = claimed.endpoint_id LIMIT 1) t",
        target = DeliveryTarget::COLUMNS
    )
});

/// A `jsonb` object of `(endpoint id, value)` pairs, for the claim to look each endpoint up by
/// key (a `jsonb` object keeps its keys sorted: a binary search).
fn by_endpoint(pairs: impl Iterator<Item = (String, serde_json::Value)>) -> serde_json::Value {
    serde_json::Value::Object(pairs.collect())
}

/// Claims as [`ClaimRequest`] asks, walking each endpoint from its floor in `floors`, which it
/// raises by what it took.
pub(crate) async fn claim(
    pool: &PgPool,
    floors: &ClaimFloors,
    req: &ClaimRequest,
) -> StoreResult<Vec<ClaimedDelivery>> {
    if req.limit == 0 {
        return Ok(Vec::new());
    }
    let walked = floors.for_claim(req.now);
    let lease = LeaseToken::fresh();
    let lease_until = lease_until(req.now, req.lease);
    let rooms = by_endpoint(
        req.room
            .except
            .iter()
            .map(|(ep, n)| (ep.to_string(), convert::bigint_param(*n).into())),
    );
    let floors_at = by_endpoint(
        walked
            .endpoints
            .into_iter()
            .zip(walked.at)
            .map(|(ep, at)| (ep, at.to_rfc3339_opts(SecondsFormat::Micros, true).into())),
    );

    let mut tx = kept_plans::begin(pool).await?;
    let mut rows = sqlx::query(CLAIM.as_str())
        .bind(req.now)
        .bind(convert::bigint_param(req.limit))
        .bind(&lease.0)
        .bind(convert::bigint_param(req.room.default))
        .bind(&rooms)
        .bind(&floors_at)
        .bind(lease_until)
        .try_map(claimed_row)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    // No order comes back; hand them out earliest due first, as they were picked. A delivery
    // whose message or endpoint was deleted since is not among them: it went with it.
    rows.sort_by_key(|(d, _, _)| (d.next_attempt_at, d.id));
    let taken = rows
        .iter()
        .map(|(d, _, _)| (d.endpoint_id, d.next_attempt_at));
    floors.raise(req.now, taken);
    Ok(rows
        .into_iter()
        .map(|(delivery, message, endpoint)| ClaimedDelivery {
            delivery,
            lease: lease.clone(),
            lease_until,
            event_type: message.event_type,
            payload: message.payload,
            traceparent: message.traceparent,
            endpoint,
        })
        .collect())
}

/// Extends the leases whose token still matches; returns how many did.
pub(crate) async fn renew(
    pool: &PgPool,
    leases: &[(DeliveryId, LeaseToken)],
    until: DateTime<Utc>,
) -> StoreResult<usize> {
    renew_leases(pool, "deliveries", "status = 'pending'", leases, until).await
}

/// Sets `lease_until` of the rows of `table` named in `leases` whose `lease_token` still
/// matches and that are still `held` (a condition on the row); how many were.
///
/// The rows are locked in id order first, as the recorder locks them (`queue::record`): in
/// the join's order a renewal and a record of the same batch could each wait for the other,
/// and PostgreSQL breaks such a deadlock only after `deadlock_timeout` (1 s), by failing one.
pub(crate) async fn renew_leases<Id: ToString>(
    pool: &PgPool,
    table: &str,
    held: &str,
    leases: &[(Id, LeaseToken)],
    until: DateTime<Utc>,
) -> StoreResult<usize> {
    if leases.is_empty() {
        return Ok(0);
    }
    let ids: Vec<String> = leases.iter().map(|(id, _)| id.to_string()).collect();
    let tokens: Vec<&str> = leases.iter().map(|(_, t)| t.0.as_str()).collect();
    let sql = format!(
        "WITH locked AS MATERIALIZED (
             SELECT id FROM {table} WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE)
         UPDATE {table} t SET lease_until = $3
         FROM UNNEST($1::text[], $2::text[]) AS u (uid, token)
         WHERE t.id = u.uid AND t.lease_token = u.token AND t.{held}
           AND t.id IN (SELECT id FROM locked)"
    );
    let done = sqlx::query(&sql)
        .persistent(false)
        .bind(&ids)
        .bind(&tokens)
        .bind(until)
        .execute(pool)
        .await
        .map_err(db_error)?;
    Ok(usize::try_from(done.rows_affected()).unwrap_or(usize::MAX))
}

/// When the next pending delivery can be claimed: its `next_attempt_at`, or the end of its lease
/// when that is later (a lease that is running or that a crashed worker left behind).
///
/// Per endpoint, walks its pending rows only up to the first un-leased one: every row after it is
/// due no earlier, so only the leased rows before it (the ones in flight) can come sooner.
pub(crate) async fn next_due(pool: &PgPool) -> StoreResult<Option<DateTime<Utc>>> {
    sqlx::query_scalar(&format!(
        "WITH RECURSIVE {ENDPOINTS_WITH_WORK}
         SELECT min(due) FROM endpoints_with_work w CROSS JOIN LATERAL (
             SELECT min(GREATEST(next_attempt_at, COALESCE(lease_until, next_attempt_at))) AS due
             FROM deliveries
             WHERE status = 'pending' AND endpoint_id = w.ep
               AND next_attempt_at <= COALESCE(
                   (SELECT next_attempt_at FROM deliveries
                    WHERE status = 'pending' AND endpoint_id = w.ep AND lease_until IS NULL
                    ORDER BY next_attempt_at LIMIT 1),
                   'infinity')) d
         WHERE w.ep IS NOT NULL"
    ))
    .fetch_one(pool)
    .await
    .map_err(db_error)
}

#[async_trait]
impl DeliveryClaims for PgStore {
    async fn claim_deliveries(&self, req: &ClaimRequest) -> StoreResult<Vec<ClaimedDelivery>> {
        claim(&self.pool, &self.claim_floors, req).await
    }

    async fn renew_leases(
        &self,
        leases: &[(DeliveryId, LeaseToken)],
        until: DateTime<Utc>,
    ) -> StoreResult<usize> {
        renew(&self.pool, leases, until).await
    }

    async fn next_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        next_due(&self.pool).await
    }

    async fn reserve_send_slot(
        &self,
        endpoint: EndpointId,
        rate: u16,
    ) -> StoreResult<std::time::Duration> {
        super::pace::reserve(&self.pool, endpoint, rate).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kept_plans::tests::off_index_reads;
    use crate::testing::{deliveries_to_ep_1, ONE_APP_AND_ENDPOINT};

    /// Whatever the tables held when it was made (empty: where a kept plan goes wrong; 100
    /// rows; 20,000), the claim's plan reads every table by an index condition and joins by
    /// nested loops, and walks each endpoint's pending rows on the pending index.
    #[tokio::test]
    async fn the_claims_kept_plan_reads_by_index_conditions_only() {
        let (store, _url) = crate::testing::fresh_store().await;
        let mut conn = store.conn().await.unwrap();
        sqlx::raw_sql(ONE_APP_AND_ENDPOINT)
            .execute(&mut *conn)
            .await
            .unwrap();
        let analyzed = |rows: String| format!("{rows} ANALYZE messages, deliveries, endpoints;");
        for (rows, more) in [
            (0, String::new()),
            (100, analyzed(deliveries_to_ep_1(1, 100, "'pending'"))),
            (
                20_000,
                analyzed(deliveries_to_ep_1(101, 20_000, "'pending'")),
            ),
        ] {
            sqlx::raw_sql(&more).execute(&mut *conn).await.unwrap();
            let (off, plan) = off_index_reads(
                &mut conn,
                CLAIM.as_str(),
                "timestamptz, bigint, text, bigint, jsonb, jsonb, timestamptz",
                "now(), 256, 'lease', 64, '{}', '{}', now()",
            )
            .await;
            assert_eq!(off, Vec::<String>::new(), "{rows} rows: {plan}");
            assert!(
                plan.contains("deliveries_pending_endpoint_id_next_attempt_at_idx"),
                "{rows} rows: {plan}"
            );
        }
    }
}
