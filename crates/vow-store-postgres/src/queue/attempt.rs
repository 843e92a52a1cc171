//! Attempt rows: one per HTTP request made for a delivery, written by `record`. Here: listing
//! and reading them (always scoped by application), and expunging one's response body.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Postgres, QueryBuilder};
use vow_core::{AppId, AttemptId, MessageId};
use vow_store::queue::Attempts;
use vow_store::queue::{Attempt, AttemptFilter, AttemptTrigger, NewAttempt};
use vow_store::{Seek, StoreResult};

use crate::convert::{self, not_found};
use crate::error::{corrupt, db_error};
use crate::seek::push_seek;
use crate::PgStore;

/// The columns [`AttemptRow`] reads.
const COLUMNS: &str = "id, app_id, msg_id, endpoint_id, delivery_id, started_at, url, \
                       response_status, response, duration_ms, success, error, trigger";

/// One `attempts` row.
#[derive(sqlx::FromRow)]
struct AttemptRow {
    id: String,
    app_id: String,
    msg_id: String,
    endpoint_id: String,
    delivery_id: String,
    started_at: DateTime<Utc>,
    url: String,
    response_status: Option<i32>,
    response: String,
    duration_ms: i64,
    success: bool,
    error: Option<String>,
    trigger: String,
}

impl AttemptRow {
    fn into_model(self) -> StoreResult<Attempt> {
        let trigger = match self.trigger.as_str() {
            "scheduled" => AttemptTrigger::Scheduled,
            "manual" => AttemptTrigger::Manual,
            other => return Err(corrupt(format!("attempts.trigger {other:?}"))),
        };
        Ok(Attempt {
            id: convert::id("attempts.id", &self.id)?,
            app_id: convert::id("attempts.app_id", &self.app_id)?,
            msg_id: convert::id("attempts.msg_id", &self.msg_id)?,
            endpoint_id: convert::id("attempts.endpoint_id", &self.endpoint_id)?,
            delivery_id: convert::id("attempts.delivery_id", &self.delivery_id)?,
            attempt: NewAttempt {
                id: convert::id("attempts.id", &self.id)?,
                started_at: self.started_at,
                url: self.url,
                response_status: convert::status("attempts.response_status", self.response_status)?,
                response: self.response,
                duration_ms: u64::try_from(self.duration_ms).map_err(|_| {
                    corrupt(format!(
                        "attempts.duration_ms is negative: {}",
                        self.duration_ms
                    ))
                })?,
                success: self.success,
                error: self.error,
                trigger,
            },
        })
    }
}

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
            qb.push(" AND msg_id = ").push_bind(msg.to_string());
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
        push_seek(&mut qb, "id", seek);
        qb.build_query_as::<AttemptRow>()
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?
            .into_iter()
            .map(AttemptRow::into_model)
            .collect()
    }

    async fn get_attempt(
        &self,
        app: AppId,
        msg: MessageId,
        id: AttemptId,
    ) -> StoreResult<Option<Attempt>> {
        sqlx::query_as::<_, AttemptRow>(&format!(
            "SELECT {COLUMNS} FROM attempts WHERE app_id = $1 AND msg_id = $2 AND id = $3"
        ))
        .bind(app.to_string())
        .bind(msg.to_string())
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .map(AttemptRow::into_model)
        .transpose()
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
