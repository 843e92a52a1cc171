//! What operators do to deliveries: resend one, replay an endpoint's failures, and count an
//! endpoint's deliveries by state.

use crate::idempotency::{keyed, step};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Postgres, QueryBuilder};
use vow_core::{AppId, DeliveryId, EndpointId, MessageId, ReplayId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::queue::DeliveryOperators;
use vow_store::queue::{DeliveryStats, ReplayFilter, StatsFilter};
use vow_store::{Delivery, StoreResult};

use crate::convert::{not_found, read};
use crate::delivery::COLUMNS;
use crate::error::db_error;
use crate::PgStore;

/// Makes the delivery of `msg` to `endpoint` pending and due at `now`, with a fresh run of the
/// schedule (attempts and client errors at 0, no lease: a worker still holding the old lease
/// records `LeaseLost`); inserts the delivery when the message never went to that endpoint.
///
/// Both must belong to `app` (`NotFound("message")`, then `NotFound("endpoint")`). Ids never
/// change owner, so checking first is enough; one deleted in between fails the upsert's foreign
/// key, which reads as the same `NotFound`.
pub(crate) async fn resend(
    conn: &mut PgConnection,
    app: AppId,
    msg: MessageId,
    endpoint: EndpointId,
    now: DateTime<Utc>,
) -> StoreResult<Delivery> {
    let app = app.to_string();
    let msg = msg.to_string();
    let endpoint = endpoint.to_string();
    let (has_message, has_endpoint): (bool, bool) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM messages WHERE app_id = $1 AND id = $2),
                EXISTS (SELECT 1 FROM endpoints WHERE app_id = $1 AND id = $3)",
    )
    .bind(&app)
    .bind(&msg)
    .bind(&endpoint)
    .fetch_one(&mut *conn)
    .await
    .map_err(db_error)?;
    if !has_message {
        return Err(not_found("message"));
    }
    if !has_endpoint {
        return Err(not_found("endpoint"));
    }
    sqlx::query(&format!(
        "INSERT INTO deliveries
             (id, app_id, msg_id, endpoint_id, status, attempts, client_errors, next_attempt_at,
              created_at, updated_at, manual)
         VALUES ($1, $2, $3, $4, 'pending', 0, 0, $5, $5, $5, true)
         ON CONFLICT ON CONSTRAINT deliveries_msg_id_endpoint_id_key DO UPDATE SET
             status = 'pending', attempts = 0, client_errors = 0, manual = true,
             next_attempt_at = EXCLUDED.next_attempt_at, lease_token = NULL, lease_until = NULL,
             dead_letter_reason = NULL, replay_id = NULL, updated_at = EXCLUDED.updated_at
         RETURNING {COLUMNS}"
    ))
    .bind(DeliveryId::new().to_string())
    .bind(&app)
    .bind(&msg)
    .bind(&endpoint)
    .bind(now)
    .try_map(read::<Delivery>)
    .fetch_one(&mut *conn)
    .await
    .map_err(db_error)
}

/// Appends the replay selection (an endpoint's dead-lettered and held deliveries matching
/// `filter`) to a query that selects `FROM deliveries d`.
fn push_replay_selection(
    qb: &mut QueryBuilder<'_, Postgres>,
    app: AppId,
    endpoint: EndpointId,
    filter: &ReplayFilter,
) {
    if !filter.event_types.is_empty() {
        qb.push(" JOIN messages m ON m.app_id = d.app_id AND m.id = d.msg_id");
    }
    qb.push(" WHERE d.app_id = ")
        .push_bind(app.to_string())
        .push(" AND d.endpoint_id = ")
        .push_bind(endpoint.to_string())
        .push(" AND d.status IN ('dead_lettered', 'held')");
    if let Some(since) = filter.since {
        qb.push(" AND d.created_at >= ").push_bind(since);
    }
    if let Some(until) = filter.until {
        qb.push(" AND d.created_at < ").push_bind(until);
    }
    if !filter.event_types.is_empty() {
        qb.push(" AND m.event_type = ANY(")
            .push_bind(filter.event_types.clone())
            .push(")");
    }
    if let Some(status) = filter.last_status {
        qb.push(" AND d.last_status = ")
            .push_bind(i32::from(status));
    }
}

/// Makes the matching deliveries pending again with a fresh run of the schedule, the `i`th in
/// creation order due at `now + i * spacing`, and records `id` on each, in one statement;
/// returns how many matched. `NotFound("endpoint")` when `app` has no such endpoint (as the
/// SQLite store).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn replay(
    conn: &mut PgConnection,
    app: AppId,
    endpoint: EndpointId,
    id: ReplayId,
    filter: &ReplayFilter,
    now: DateTime<Utc>,
    spacing: chrono::Duration,
    dry_run: bool,
) -> StoreResult<u64> {
    if dry_run {
        let mut qb = QueryBuilder::<Postgres>::new("SELECT count(*) FROM deliveries d");
        push_replay_selection(&mut qb, app, endpoint, filter);
        let count: i64 = qb
            .build_query_scalar()
            .fetch_one(&mut *conn)
            .await
            .map_err(db_error)?;
        if count == 0 {
            require_endpoint(conn, app, endpoint).await?;
        }
        return Ok(u64::try_from(count).unwrap_or_default());
    }
    let spacing_us = spacing.num_microseconds().unwrap_or(i64::MAX).max(0);
    let mut qb = QueryBuilder::<Postgres>::new(
        "WITH picked AS (
             SELECT d.id AS picked_id,
                    row_number() OVER (ORDER BY d.created_at, d.id) - 1 AS position
             FROM deliveries d",
    );
    push_replay_selection(&mut qb, app, endpoint, filter);
    qb.push(
        ")
         UPDATE deliveries d SET
             status = 'pending', attempts = 0, client_errors = 0, manual = true,
             next_attempt_at = ",
    )
    .push_bind(now)
    .push(" + (p.position * ")
    .push_bind(spacing_us)
    .push(
        ")::double precision * interval '1 microsecond',
             lease_token = NULL, lease_until = NULL, dead_letter_reason = NULL,
             replay_id = ",
    )
    .push_bind(id.to_string())
    .push(", updated_at = ")
    .push_bind(now)
    // Re-checked against the latest row version: a concurrent resend or replay wins.
    .push(
        " FROM picked p
          WHERE d.id = p.picked_id AND d.status IN ('dead_lettered', 'held')",
    );
    let done = qb.build().execute(&mut *conn).await.map_err(db_error)?;
    if done.rows_affected() == 0 {
        require_endpoint(conn, app, endpoint).await?;
    }
    Ok(done.rows_affected())
}

/// `NotFound("endpoint")` unless `app` has `endpoint`. Only asked when a replay matched nothing,
/// so a replay that found work costs no extra round trip.
async fn require_endpoint(
    conn: &mut PgConnection,
    app: AppId,
    endpoint: EndpointId,
) -> StoreResult<()> {
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM endpoints WHERE app_id = $1 AND id = $2)")
            .bind(app.to_string())
            .bind(endpoint.to_string())
            .fetch_one(conn)
            .await
            .map_err(db_error)?;
    if !exists {
        return Err(not_found("endpoint"));
    }
    Ok(())
}

#[async_trait]
impl DeliveryOperators for PgStore {
    async fn resend_keyed(
        &self,
        app: AppId,
        msg: MessageId,
        endpoint: EndpointId,
        now: DateTime<Utc>,
        completion: Option<Completion<Delivery>>,
    ) -> StoreResult<Applied<Delivery>> {
        let write = step(move |tx| Box::pin(resend(tx, app, msg, endpoint, now)));
        self.waking(keyed(&self.pool, completion, write)).await
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
        let write = step(move |tx| {
            let replayed =
                async move { replay(tx, app, endpoint, id, &filter, now, spacing, false).await };
            Box::pin(replayed)
        });
        self.waking(keyed(&self.pool, completion, write)).await
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
        let mut conn = self.conn().await?;
        replay(&mut conn, app, endpoint, id, filter, now, spacing, dry_run).await
    }

    async fn endpoint_stats(
        &self,
        app: AppId,
        endpoint: EndpointId,
        filter: &StatsFilter,
        now: DateTime<Utc>,
    ) -> StoreResult<DeliveryStats> {
        // Only a replay's own rows, by their index, when asked.
        let replay = if filter.replay.is_some() {
            " AND replay_id = $6"
        } else {
            ""
        };
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM endpoints WHERE app_id = $1 AND id = $2),
                    count(*) FILTER (WHERE status = 'delivered'),
                    count(*) FILTER (WHERE status = 'held' OR (status = 'pending'
                                     AND (lease_until IS NULL OR lease_until <= $5))),
                    count(*) FILTER (WHERE status = 'pending' AND lease_until > $5),
                    count(*) FILTER (WHERE status = 'dead_lettered')
             FROM deliveries
             WHERE app_id = $1 AND endpoint_id = $2
               AND ($3::timestamptz IS NULL OR created_at >= $3)
               AND ($4::timestamptz IS NULL OR created_at < $4){replay}"
        );
        let mut query = sqlx::query_as(&sql)
            .bind(app.to_string())
            .bind(endpoint.to_string())
            .bind(filter.since)
            .bind(filter.until)
            .bind(now);
        if let Some(id) = filter.replay {
            query = query.bind(id.to_string());
        }
        let (exists, success, pending, sending, fail): (bool, i64, i64, i64, i64) =
            query.fetch_one(&self.pool).await.map_err(db_error)?;
        if !exists {
            return Err(not_found("endpoint"));
        }
        let n = |v: i64| u64::try_from(v).unwrap_or_default();
        Ok(DeliveryStats {
            success: n(success),
            pending: n(pending),
            sending: n(sending),
            fail: n(fail),
        })
    }
}
