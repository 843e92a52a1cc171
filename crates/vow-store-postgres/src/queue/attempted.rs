//! Svix's attempted destinations (the endpoints a message went to) and attempted messages (the
//! messages an endpoint was sent): the endpoint or message listing restricted by a subquery on
//! `deliveries`, then the page's delivery rows, both in one `REPEATABLE READ` transaction so the
//! statuses are those of the listed rows' snapshot.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Postgres, Transaction};
use vow_core::{AppId, EndpointId, MessageId};
use vow_store::queue::AttemptedListings;
use vow_store::queue::{AttemptedDestination, AttemptedMessage, DeliveryState, MessageStatus};
use vow_store::rows::{delivery_state, DELIVERY_STATE_COLUMNS};
use vow_store::{MessageFilter, Seek, StoreResult};

use crate::convert::PgColumns;
use crate::endpoint;
use crate::error::db_error;
use crate::message::{self, DeliveredTo};
use crate::PgStore;

async fn snapshot(pool: &PgPool) -> StoreResult<Transaction<'static, Postgres>> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
    Ok(tx)
}

/// The deliveries with `key_col = key` and `other_col` in `others`, by `other_col`.
async fn states(
    tx: &mut Transaction<'static, Postgres>,
    app: AppId,
    (key_col, key): (&str, String),
    (other_col, others): (&str, Vec<String>),
    now: DateTime<Utc>,
) -> StoreResult<HashMap<String, DeliveryState>> {
    sqlx::query(&format!(
        "SELECT {DELIVERY_STATE_COLUMNS}, {other_col} FROM deliveries
         WHERE app_id = $1 AND {key_col} = $2 AND {other_col} = ANY($3)"
    ))
    .bind(app.to_string())
    .bind(key)
    .bind(others)
    .try_map(|row: PgRow| delivery_state(&PgColumns(&row), now))
    .fetch_all(&mut **tx)
    .await
    .map_err(db_error)
    .map(|rows| rows.into_iter().collect())
}

#[async_trait]
impl AttemptedListings for PgStore {
    async fn list_attempted_destinations(
        &self,
        app: AppId,
        msg: MessageId,
        now: DateTime<Utc>,
        seek: &Seek,
    ) -> StoreResult<Vec<AttemptedDestination>> {
        let mut tx = snapshot(&self.pool).await?;
        let found = endpoint::list(&mut *tx, app, Some(msg), seek).await?;
        let ids = found.iter().map(|e| e.id.to_string()).collect();
        let key = ("msg_id", msg.to_string());
        let states = states(&mut tx, app, key, ("endpoint_id", ids), now).await?;
        Ok(AttemptedDestination::pair_up(found, states))
    }

    async fn list_attempted_messages(
        &self,
        app: AppId,
        endpoint: EndpointId,
        filter: &MessageFilter,
        status: Option<MessageStatus>,
        now: DateTime<Utc>,
        seek: &Seek,
    ) -> StoreResult<Vec<AttemptedMessage>> {
        let mut tx = snapshot(&self.pool).await?;
        let to = DeliveredTo {
            endpoint,
            status: status.map(MessageStatus::condition),
            now,
        };
        let found = message::list(&mut *tx, app, filter, Some(&to), seek).await?;
        let ids = found.iter().map(|m| m.id.to_string()).collect();
        let key = ("endpoint_id", endpoint.to_string());
        let states = states(&mut tx, app, key, ("msg_id", ids), now).await?;
        Ok(AttemptedMessage::pair_up(found, states))
    }
}
