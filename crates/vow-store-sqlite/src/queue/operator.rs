//! What operators do to deliveries: resend one, replay an endpoint's failed ones, count them.

use crate::idempotency::keyed;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension, ToSql};
use vow_core::{AppId, DeliveryId, EndpointId, MessageId, ReplayId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::queue::DeliveryOperators;
use vow_store::queue::{DeliveryStats, ReplayFilter, StatsFilter};
use vow_store::StoreResult;
use vow_store::{Delivery, StoreError};

use crate::convert::{micros, read, to_json};
use crate::endpoint;
use crate::error::Result;
use crate::message::DELIVERY_COLUMNS;
use crate::SqliteStore;

/// Makes the delivery of `msg` to `ep` pending and due at `now` with a fresh run of the
/// schedule, writing it if the message never went to that endpoint.
pub(crate) fn resend(
    conn: &Connection,
    app: AppId,
    msg: MessageId,
    ep: EndpointId,
    now: DateTime<Utc>,
) -> Result<Delivery> {
    let (app_s, msg_s, ep_s) = (app.to_string(), msg.to_string(), ep.to_string());
    let has_message = conn
        .prepare_cached("SELECT 1 FROM messages WHERE app_id = ?1 AND id = ?2")?
        .query_row([&app_s, &msg_s], |_| Ok(()))
        .optional()?
        .is_some();
    if !has_message {
        return Err(StoreError::NotFound("message").into());
    }
    endpoint::require(conn, &app, &ep)?;
    let now = micros(now);
    let sql = format!(
        "UPDATE deliveries SET status = 'pending', next_attempt_at = ?4, attempts = 0,
         client_errors = 0, dead_letter_reason = NULL, lease_token = NULL, lease_until = NULL,
         manual = 1, replay_id = NULL, updated_at = ?4
         WHERE app_id = ?1 AND msg_id = ?2 AND endpoint_id = ?3 RETURNING {DELIVERY_COLUMNS}"
    );
    let reset = conn
        .prepare_cached(&sql)?
        .query_row(params![app_s, msg_s, ep_s, now], read)
        .optional()?;
    if let Some(delivery) = reset {
        return Ok(delivery);
    }
    let sql = format!(
        "INSERT INTO deliveries
         (id, app_id, msg_id, endpoint_id, status, attempts, next_attempt_at, created_at,
          updated_at, manual)
         VALUES (?1, ?2, ?3, ?4, 'pending', 0, ?5, ?5, ?5, 1) RETURNING {DELIVERY_COLUMNS}"
    );
    Ok(conn.prepare_cached(&sql)?.query_row(
        params![DeliveryId::new().to_string(), app_s, msg_s, ep_s, now],
        read,
    )?)
}

/// The WHERE clause (over `deliveries`) and parameters of a replay.
fn replay_where(
    app: AppId,
    ep: EndpointId,
    filter: &ReplayFilter,
) -> Result<(String, Vec<Box<dyn ToSql>>)> {
    let mut conds = vec![
        "app_id = ?1".to_string(),
        "endpoint_id = ?2".to_string(),
        "status IN ('dead_lettered', 'held')".to_string(),
    ];
    let mut values: Vec<Box<dyn ToSql>> = vec![Box::new(app.to_string()), Box::new(ep.to_string())];
    let mut add = |cond: &str, value: Box<dyn ToSql>| {
        values.push(value);
        conds.push(cond.replace('?', &format!("?{}", values.len())));
    };
    if let Some(since) = filter.since {
        add("created_at >= ?", Box::new(micros(since)));
    }
    if let Some(until) = filter.until {
        add("created_at < ?", Box::new(micros(until)));
    }
    if let Some(status) = filter.last_status {
        add("last_status = ?", Box::new(status));
    }
    if !filter.event_types.is_empty() {
        add(
            "EXISTS (SELECT 1 FROM messages m WHERE m.app_id = deliveries.app_id
                     AND m.id = deliveries.msg_id
                     AND m.event_type IN (SELECT value FROM json_each(?)))",
            Box::new(to_json(&filter.event_types)?),
        );
    }
    Ok((conds.join(" AND "), values))
}

/// Counts (and unless `dry_run`, replays as `id`) an endpoint's dead-lettered and held
/// deliveries that match, due from `now` on, `spacing` apart in creation order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay(
    conn: &Connection,
    app: AppId,
    ep: EndpointId,
    id: ReplayId,
    filter: &ReplayFilter,
    now: DateTime<Utc>,
    spacing: chrono::Duration,
    dry_run: bool,
) -> Result<u64> {
    endpoint::require(conn, &app, &ep)?;
    let (conds, values) = replay_where(app, ep, filter)?;
    let params = rusqlite::params_from_iter(values.iter());
    if dry_run {
        let sql = format!("SELECT count(*) FROM deliveries WHERE {conds}");
        let n: i64 = conn.prepare_cached(&sql)?.query_row(params, |r| r.get(0))?;
        return Ok(n as u64);
    }
    let sql = format!("SELECT id FROM deliveries WHERE {conds} ORDER BY created_at, id");
    let ids: Vec<String> = conn
        .prepare_cached(&sql)?
        .query_map(params, |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut update = conn.prepare_cached(
        "UPDATE deliveries SET status = 'pending', next_attempt_at = ?2, attempts = 0,
         client_errors = 0, dead_letter_reason = NULL, lease_token = NULL, lease_until = NULL,
         manual = 1, replay_id = ?4, updated_at = ?3 WHERE id = ?1",
    )?;
    let replay_id = id.to_string();
    let step = spacing.num_microseconds().unwrap_or(i64::MAX).max(0);
    let start = micros(now);
    for (i, delivery) in ids.iter().enumerate() {
        let offset = step.saturating_mul(i64::try_from(i).unwrap_or(i64::MAX));
        let due = start.saturating_add(offset);
        update.execute(params![delivery, due, start, replay_id])?;
    }
    Ok(ids.len() as u64)
}

#[async_trait]
impl DeliveryOperators for SqliteStore {
    async fn resend_keyed(
        &self,
        app: AppId,
        msg: MessageId,
        endpoint: EndpointId,
        now: DateTime<Utc>,
        completion: Option<Completion<Delivery>>,
    ) -> StoreResult<Applied<Delivery>> {
        let resent = move |c: &Connection| resend(c, app, msg, endpoint, now);
        self.write(move |c| keyed(c, completion, resent)).await
    }

    async fn replay_keyed(
        &self,
        app: AppId,
        endpoint: EndpointId,
        id: ReplayId,
        filter: &ReplayFilter,
        now: DateTime<Utc>,
        spacing: chrono::Duration,
        completion: Option<Completion<u64>>,
    ) -> StoreResult<Applied<u64>> {
        let filter = filter.clone();
        let replayed =
            move |c: &Connection| replay(c, app, endpoint, id, &filter, now, spacing, false);
        self.write(move |c| keyed(c, completion, replayed)).await
    }

    async fn replay(
        &self,
        app: AppId,
        endpoint: EndpointId,
        id: ReplayId,
        filter: &ReplayFilter,
        now: DateTime<Utc>,
        spacing: chrono::Duration,
        dry_run: bool,
    ) -> StoreResult<u64> {
        let filter = filter.clone();
        let replay =
            move |c: &Connection| replay(c, app, endpoint, id, &filter, now, spacing, dry_run);
        if dry_run {
            self.read(replay).await
        } else {
            self.write(replay).await
        }
    }

    async fn endpoint_stats(
        &self,
        app: AppId,
        ep: EndpointId,
        filter: &StatsFilter,
        now: DateTime<Utc>,
    ) -> StoreResult<DeliveryStats> {
        let StatsFilter {
            since,
            until,
            replay,
        } = *filter;
        self.read(move |conn| {
            endpoint::require(conn, &app, &ep)?;
            let mut conds = "app_id = ?1 AND endpoint_id = ?2".to_string();
            if since.is_some() {
                conds.push_str(" AND created_at >= ?3");
            }
            if until.is_some() {
                conds.push_str(" AND created_at < ?4");
            }
            if replay.is_some() {
                conds.push_str(" AND replay_id = ?5");
            }
            let sql = format!(
                "SELECT count(*) FILTER (WHERE status = 'delivered'),
                        count(*) FILTER (WHERE status = 'held' OR (status = 'pending'
                                         AND (lease_until IS NULL OR lease_until <= ?6))),
                        count(*) FILTER (WHERE status = 'pending' AND lease_until > ?6),
                        count(*) FILTER (WHERE status = 'dead_lettered')
                 FROM deliveries WHERE {conds}"
            );
            let counts = conn.prepare_cached(&sql)?.query_row(
                params![
                    app.to_string(),
                    ep.to_string(),
                    since.map(micros),
                    until.map(micros),
                    replay.map(|r| r.to_string()),
                    micros(now)
                ],
                |r| {
                    Ok(DeliveryStats {
                        success: r.get::<_, i64>(0)? as u64,
                        pending: r.get::<_, i64>(1)? as u64,
                        sending: r.get::<_, i64>(2)? as u64,
                        fail: r.get::<_, i64>(3)? as u64,
                    })
                },
            )?;
            Ok(counts)
        })
        .await
    }
}
