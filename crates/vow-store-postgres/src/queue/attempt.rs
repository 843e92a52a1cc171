//! Attempt rows: one per HTTP request made for a delivery, written by `record`. Here: listing
//! and reading them (always scoped by application), and expunging one's response body.

use async_trait::async_trait;
use sqlx::{Postgres, QueryBuilder};
use vow_core::{AppId, AttemptId, EndpointId, MessageId};
use vow_store::queue::Attempts;
use vow_store::queue::{
    Attempt, AttemptFilter, RecentAttempt, StatusClass, TailFilter, TailedAttempt,
};
use vow_store::rows::FromColumns;
use vow_store::{Seek, StoreResult};

use crate::convert::{bigint_param, not_found, read};
use crate::error::db_error;
use crate::seek::push_seek;
use crate::PgStore;

const COLUMNS: &str = Attempt::COLUMNS;

#[async_trait]
impl Attempts for PgStore {
    async fn list_attempts(
        &self,
        app: AppId,
        filter: &AttemptFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<Attempt>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {COLUMNS} FROM attempts WHERE app_id = "
        ));
        qb.push_bind(app.to_string());
        if let Some(msg) = filter.msg_id {
            push_of_message(&mut qb, msg);
        }
        if let Some(endpoint) = filter.endpoint_id {
            qb.push(" AND endpoint_id = ")
                .push_bind(endpoint.to_string());
        }
        if let Some(success) = filter.success {
            qb.push(" AND success = ").push_bind(success);
        }
        if let Some(status) = filter.status_code {
            qb.push(" AND response_status = ")
                .push_bind(i32::from(status));
        }
        if let Some(before) = filter.before {
            qb.push(" AND started_at < ").push_bind(before);
        }
        if let Some(after) = filter.after {
            qb.push(" AND started_at > ").push_bind(after);
        }
        match filter.status_class.map(StatusClass::range) {
            None => {}
            Some(None) => {
                qb.push(" AND response_status IS NULL");
            }
            Some(Some((low, high))) => {
                qb.push(" AND response_status BETWEEN ")
                    .push_bind(i32::from(low))
                    .push(" AND ")
                    .push_bind(i32::from(high));
            }
        }
        // The application is bound again in the subqueries so each runs once, not per row.
        if !filter.event_types.is_empty() {
            qb.push(" AND msg_id IN (SELECT id FROM messages WHERE app_id = ")
                .push_bind(app.to_string())
                .push(" AND event_type = ANY(")
                .push_bind(filter.event_types.clone())
                .push("))");
        }
        if let Some(channel) = &filter.channel {
            crate::message::push_on_channel(&mut qb, "msg_id", app, channel);
        }
        push_seek(&mut qb, "id", seek);
        qb.build()
            .try_map(read::<Attempt>)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)
    }

    async fn recent_attempts(
        &self,
        app: AppId,
        endpoints: &[EndpointId],
        each: usize,
    ) -> StoreResult<Vec<RecentAttempt>> {
        let ids: Vec<String> = endpoints.iter().map(ToString::to_string).collect();
        // One index range (app_id, endpoint_id, id) per endpoint, joined laterally.
        sqlx::query(&format!(
            "SELECT a.* FROM unnest($2::text[]) WITH ORDINALITY AS e(id, ord)
             CROSS JOIN LATERAL (
                 SELECT {} FROM attempts
                  WHERE app_id = $1 AND endpoint_id = e.id
                  ORDER BY id DESC LIMIT $3) AS a
             ORDER BY e.ord, a.id DESC",
            RecentAttempt::COLUMNS
        ))
        .bind(app.to_string())
        .bind(ids)
        .bind(bigint_param(each))
        .try_map(read::<RecentAttempt>)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)
    }

    async fn tail_attempts(
        &self,
        filter: &TailFilter,
        after: AttemptId,
        limit: usize,
    ) -> StoreResult<Vec<TailedAttempt>> {
        let mut qb = tail_query(filter, after);
        qb.push(" ORDER BY a.id LIMIT ")
            .push_bind(bigint_param(limit));
        qb.build()
            .try_map(read::<TailedAttempt>)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)
    }

    async fn get_attempt(
        &self,
        app: AppId,
        msg: MessageId,
        id: AttemptId,
    ) -> StoreResult<Option<Attempt>> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM attempts WHERE app_id = $1 AND msg_id = $2 AND id = $3"
        ))
        .bind(app.to_string())
        .bind(msg.to_string())
        .bind(id.to_string())
        .try_map(read::<Attempt>)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)
    }

    async fn expunge_attempt_content(
        &self,
        app: AppId,
        msg: MessageId,
        id: AttemptId,
    ) -> StoreResult<()> {
        let done = sqlx::query(
            "UPDATE attempts SET response = '' WHERE app_id = $1 AND msg_id = $2 AND id = $3",
        )
        .bind(app.to_string())
        .bind(msg.to_string())
        .bind(id.to_string())
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        if done.rows_affected() == 0 {
            return Err(not_found("attempt"));
        }
        Ok(())
    }
}

/// Narrows an attempts query to the message `msg`'s attempts: its deliveries' (by message,
/// `deliveries_msg_id_endpoint_id_key`), each one's by `attempts_delivery_id_idx`.
fn push_of_message(qb: &mut QueryBuilder<'_, Postgres>, msg: MessageId) {
    qb.push(" AND msg_id = ")
        .push_bind(msg.to_string())
        .push(" AND delivery_id IN (SELECT id FROM deliveries WHERE msg_id = ")
        .push_bind(msg.to_string())
        .push(")");
}

/// The tail read of `filter` after `after`, up to its order: one index range from the cursor
/// on, the endpoint's `(app_id, endpoint_id, id)`, the application's `(app_id, id)` or the
/// primary key's. With an endpoint but no application, a condition that selects nothing.
fn tail_query(filter: &TailFilter, after: AttemptId) -> QueryBuilder<'static, Postgres> {
    let mut qb = QueryBuilder::<Postgres>::new(format!(
        "SELECT {} FROM attempts a
           JOIN messages m ON m.app_id = a.app_id AND m.id = a.msg_id
           JOIN deliveries d ON d.id = a.delivery_id
          WHERE a.id > ",
        TailedAttempt::COLUMNS
    ));
    qb.push_bind(after.to_string());
    if let Some(app) = filter.scope.app() {
        qb.push(" AND a.app_id = ").push_bind(app.to_string());
    }
    if let Some(endpoint) = filter.scope.endpoint() {
        qb.push(" AND a.endpoint_id = ")
            .push_bind(endpoint.to_string());
    }
    if let Some(success) = filter.success {
        qb.push(" AND a.success = ").push_bind(success);
    }
    qb
}
