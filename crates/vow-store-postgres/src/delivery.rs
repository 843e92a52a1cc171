//! Deliveries: one row per (message, endpoint), written by `message::create`, claimed by the
//! delivery workers by `(status, next_attempt_at)`. Here: reading them back.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use vow_core::{AppId, MessageId};
use vow_store::{Delivery, DeliveryStatus, StoreResult};

use crate::convert;
use crate::error::{corrupt, db_error};

/// One `deliveries` row.
#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: String,
    app_id: String,
    msg_id: String,
    endpoint_id: String,
    status: String,
    attempts: i32,
    next_attempt_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
}

impl DeliveryRow {
    fn into_model(self) -> StoreResult<Delivery> {
        Ok(Delivery {
            id: convert::id("deliveries.id", &self.id)?,
            app_id: convert::id("deliveries.app_id", &self.app_id)?,
            msg_id: convert::id("deliveries.msg_id", &self.msg_id)?,
            endpoint_id: convert::id("deliveries.endpoint_id", &self.endpoint_id)?,
            status: DeliveryStatus::parse(&self.status)
                .ok_or_else(|| corrupt(format!("deliveries.status {:?}", self.status)))?,
            attempts: convert::count("deliveries.attempts", self.attempts)?,
            next_attempt_at: self.next_attempt_at,
            created_at: self.created_at,
        })
    }
}

/// A message's deliveries, ordered by id.
pub(crate) async fn list_for_message(
    pool: &PgPool,
    app: AppId,
    msg: MessageId,
) -> StoreResult<Vec<Delivery>> {
    sqlx::query_as::<_, DeliveryRow>(
        "SELECT id, app_id, msg_id, endpoint_id, status, attempts, next_attempt_at, created_at
         FROM deliveries WHERE app_id = $1 AND msg_id = $2 ORDER BY id",
    )
    .bind(app.to_string())
    .bind(msg.to_string())
    .fetch_all(pool)
    .await
    .map_err(db_error)?
    .into_iter()
    .map(DeliveryRow::into_model)
    .collect()
}
