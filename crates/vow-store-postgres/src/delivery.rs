//! Deliveries: one row per (message, endpoint), written by `message::create`, claimed and
//! recorded by the delivery workers through `queue`. Here: the row type and reading them back.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use vow_core::{AppId, MessageId};
use vow_store::{Delivery, DeliveryStatus, StoreResult};

use crate::convert;
use crate::error::{corrupt, db_error};

/// The columns [`DeliveryRow`] reads, unqualified.
pub(crate) const COLUMNS: &str = "id, app_id, msg_id, endpoint_id, status, attempts, \
                                  client_errors, last_status, dead_letter_reason, \
                                  next_attempt_at, created_at, manual";

/// One `deliveries` row (lease and bookkeeping columns aside).
#[derive(sqlx::FromRow)]
pub(crate) struct DeliveryRow {
    pub(crate) id: String,
    pub(crate) app_id: String,
    pub(crate) msg_id: String,
    pub(crate) endpoint_id: String,
    pub(crate) status: String,
    pub(crate) attempts: i32,
    pub(crate) client_errors: i32,
    pub(crate) last_status: Option<i32>,
    pub(crate) dead_letter_reason: Option<String>,
    pub(crate) next_attempt_at: DateTime<Utc>,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) manual: bool,
}

impl DeliveryRow {
    pub(crate) fn into_model(self) -> StoreResult<Delivery> {
        Ok(Delivery {
            id: convert::id("deliveries.id", &self.id)?,
            app_id: convert::id("deliveries.app_id", &self.app_id)?,
            msg_id: convert::id("deliveries.msg_id", &self.msg_id)?,
            endpoint_id: convert::id("deliveries.endpoint_id", &self.endpoint_id)?,
            status: DeliveryStatus::parse(&self.status)
                .ok_or_else(|| corrupt(format!("deliveries.status {:?}", self.status)))?,
            attempts: convert::count("deliveries.attempts", self.attempts)?,
            client_errors: convert::count("deliveries.client_errors", self.client_errors)?,
            last_status: convert::status("deliveries.last_status", self.last_status)?,
            dead_letter_reason: self.dead_letter_reason,
            next_attempt_at: self.next_attempt_at,
            created_at: self.created_at,
            manual: self.manual,
        })
    }
}

/// A message's deliveries, ordered by id.
pub(crate) async fn list_for_message(
    pool: &PgPool,
    app: AppId,
    msg: MessageId,
) -> StoreResult<Vec<Delivery>> {
    sqlx::query_as::<_, DeliveryRow>(&format!(
        "SELECT {COLUMNS} FROM deliveries WHERE app_id = $1 AND msg_id = $2 ORDER BY id"
    ))
    .bind(app.to_string())
    .bind(msg.to_string())
    .fetch_all(pool)
    .await
    .map_err(db_error)?
    .into_iter()
    .map(DeliveryRow::into_model)
    .collect()
}
