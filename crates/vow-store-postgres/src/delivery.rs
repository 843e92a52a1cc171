//! Deliveries: one row per (message, endpoint), written by `message::create`, claimed and
//! recorded by the delivery workers through `queue`. Here: reading them back.

use sqlx::PgPool;
use vow_core::{AppId, MessageId};
use vow_store::rows::FromColumns;
use vow_store::{Delivery, StoreResult};

use crate::convert::read;
use crate::error::db_error;

/// The columns a [`Delivery`] reads, unqualified.
pub(crate) const COLUMNS: &str = Delivery::COLUMNS;

/// A message's deliveries, ordered by id.
pub(crate) async fn list_for_message(
    pool: &PgPool,
    app: AppId,
    msg: MessageId,
) -> StoreResult<Vec<Delivery>> {
    sqlx::query(&format!(
        "SELECT {COLUMNS} FROM deliveries WHERE app_id = $1 AND msg_id = $2 ORDER BY id"
    ))
    .bind(app.to_string())
    .bind(msg.to_string())
    .try_map(read::<Delivery>)
    .fetch_all(pool)
    .await
    .map_err(db_error)
}
