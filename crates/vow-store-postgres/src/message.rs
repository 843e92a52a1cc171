//! Messages, and the fan-out that writes one delivery row per matching endpoint with each
//! message, in the same transaction.
//!
//! The payload is stored as TEXT exactly as the client sent it: JSONB would reorder keys and
//! change what the endpoint's signature covers. With `only`, a message goes to that one endpoint
//! whatever its filters (send-example).

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder};
use vow_core::matching::{endpoint_matches, EndpointFilter};
use vow_core::{AppId, DeliveryId, EndpointId};
use vow_store::{
    CreatedMessage, DeliveryStatus, Message, MessageFilter, MessageKey, NewMessage, Seek,
    StoreResult,
};

use crate::convert::{self, not_found};
use crate::error::db_error;
use crate::seek::push_seek;

/// The columns [`MessageRow`] reads.
const COLUMNS: &str =
    "id, app_id, event_id, event_type, channels, payload, payload_expires_at, created_at";

/// One `messages` row.
#[derive(sqlx::FromRow)]
struct MessageRow {
    id: String,
    app_id: String,
    event_id: Option<String>,
    event_type: String,
    channels: Option<Vec<String>>,
    payload: Option<String>,
    payload_expires_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
}

impl MessageRow {
    fn into_model(self) -> StoreResult<Message> {
        Ok(Message {
            id: convert::id("messages.id", &self.id)?,
            app_id: convert::id("messages.app_id", &self.app_id)?,
            event_id: self.event_id,
            event_type: self.event_type,
            channels: self.channels,
            payload: self.payload,
            payload_expires_at: self.payload_expires_at,
            created_at: self.created_at,
        })
    }
}

/// The part of an endpoint the fan-out needs.
#[derive(sqlx::FromRow)]
struct FanOutRow {
    id: String,
    disabled: bool,
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
}

/// One transaction: the application must exist (and is key-share locked, so it cannot be deleted
/// under us), the message is inserted (`messages_app_id_event_id_key` → `Conflict`), then the
/// application's endpoints are read (key-share locked: a concurrent delete waits and then
/// cascades to our rows) and one delivery per match is inserted in a single `UNNEST` statement.
/// Any error drops the transaction, which rolls it back.
pub(crate) async fn create(
    pool: &PgPool,
    new: NewMessage,
    only: Option<EndpointId>,
) -> StoreResult<CreatedMessage> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    let created = create_in(&mut tx, new, only).await?;
    tx.commit().await.map_err(db_error)?;
    Ok(created)
}

/// The writes of [`create`] inside the caller's transaction, which commits them (or, with
/// another write, such as an idempotency record's completion, rolls them back).
pub(crate) async fn create_in(
    tx: &mut PgConnection,
    new: NewMessage,
    only: Option<EndpointId>,
) -> StoreResult<CreatedMessage> {
    let app_id = new.app_id.to_string();
    let msg_id = new.id.to_string();

    // No separate check that the application exists: the insert's foreign key does it (and
    // takes the same key-share lock), and its violation reads as "application not found".
    let message = sqlx::query_as::<_, MessageRow>(&format!(
        "INSERT INTO messages
             (id, app_id, event_id, event_type, channels, payload, payload_expires_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         RETURNING {COLUMNS}"
    ))
    .bind(&msg_id)
    .bind(&app_id)
    .bind(&new.event_id)
    .bind(&new.event_type)
    .bind(&new.channels)
    .bind(&new.payload)
    .bind(new.payload_expires_at)
    .bind(new.now)
    .fetch_one(&mut *tx)
    .await
    .map_err(db_error)?
    .into_model()?;

    let endpoints = sqlx::query_as::<_, FanOutRow>(
        "SELECT id, disabled, event_types, channels FROM endpoints
         WHERE app_id = $1 AND ($2::text IS NULL OR id = $2) ORDER BY id FOR KEY SHARE",
    )
    .bind(&app_id)
    .bind(only.map(|ep| ep.to_string()))
    .fetch_all(&mut *tx)
    .await
    .map_err(db_error)?;
    if only.is_some() && endpoints.is_empty() {
        return Err(not_found("endpoint"));
    }

    let channels = new.channels.as_deref().unwrap_or_default();
    let mut ids = Vec::new();
    let mut endpoint_ids = Vec::new();
    let mut statuses = Vec::new();
    for ep in endpoints {
        let filter = EndpointFilter {
            event_types: ep.event_types.as_deref(),
            channels: ep.channels.as_deref(),
        };
        if only.is_none() && !endpoint_matches(filter, &new.event_type, channels) {
            continue;
        }
        let status = if ep.disabled {
            DeliveryStatus::Held
        } else {
            DeliveryStatus::Pending
        };
        ids.push(DeliveryId::new().to_string());
        endpoint_ids.push(ep.id);
        statuses.push(status.as_str());
    }

    if !ids.is_empty() {
        sqlx::query(
            "INSERT INTO deliveries
                 (id, app_id, msg_id, endpoint_id, status, attempts, next_attempt_at, created_at)
             SELECT d.id, $1, $2, d.endpoint_id, d.status, 0, $3, $3
             FROM UNNEST($4::text[], $5::text[], $6::text[]) AS d (id, endpoint_id, status)",
        )
        .bind(&app_id)
        .bind(&msg_id)
        .bind(new.now)
        .bind(&ids)
        .bind(&endpoint_ids)
        .bind(&statuses)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
    }

    Ok(CreatedMessage {
        message,
        deliveries: ids.len(),
    })
}

pub(crate) async fn get(
    pool: &PgPool,
    app: AppId,
    key: &MessageKey,
) -> StoreResult<Option<Message>> {
    let (column, value) = match key {
        MessageKey::Id(id) => ("id", id.to_string()),
        MessageKey::EventId(event_id) => ("event_id", event_id.clone()),
    };
    sqlx::query_as::<_, MessageRow>(&format!(
        "SELECT {COLUMNS} FROM messages WHERE app_id = $1 AND {column} = $2"
    ))
    .bind(app.to_string())
    .bind(value)
    .fetch_optional(pool)
    .await
    .map_err(db_error)?
    .map(MessageRow::into_model)
    .transpose()
}

/// Restricts a message listing to the messages with a delivery to one endpoint, optionally in
/// one state (an SQL condition over `deliveries`; `$now` stands for the bound time).
pub(crate) struct DeliveredTo {
    pub(crate) endpoint: EndpointId,
    pub(crate) status: Option<&'static str>,
    pub(crate) now: DateTime<Utc>,
}

pub(crate) async fn list<'c>(
    ex: impl sqlx::PgExecutor<'c>,
    app: AppId,
    filter: &MessageFilter,
    delivered_to: Option<&DeliveredTo>,
    seek: &Seek,
) -> StoreResult<Vec<Message>> {
    let mut qb =
        QueryBuilder::<Postgres>::new(format!("SELECT {COLUMNS} FROM messages WHERE app_id = "));
    qb.push_bind(app.to_string());
    if !filter.event_types.is_empty() {
        qb.push(" AND event_type = ANY(")
            .push_bind(filter.event_types.clone())
            .push(")");
    }
    if let Some(channel) = &filter.channel {
        qb.push(" AND ")
            .push_bind(channel.clone())
            .push(" = ANY(channels)");
    }
    if let Some(before) = filter.before {
        qb.push(" AND created_at < ").push_bind(before);
    }
    if let Some(after) = filter.after {
        qb.push(" AND created_at > ").push_bind(after);
    }
    if let Some(to) = delivered_to {
        qb.push(" AND id IN (SELECT msg_id FROM deliveries WHERE app_id = messages.app_id")
            .push(" AND endpoint_id = ")
            .push_bind(to.endpoint.to_string());
        if let Some(status) = to.status {
            let mut parts = status.split("$now");
            qb.push(" AND (").push(parts.next().unwrap_or_default());
            for part in parts {
                qb.push_bind(to.now).push(part);
            }
            qb.push(")");
        }
        qb.push(")");
    }
    push_seek(&mut qb, "id", seek);
    qb.build_query_as::<MessageRow>()
        .fetch_all(ex)
        .await
        .map_err(db_error)?
        .into_iter()
        .map(MessageRow::into_model)
        .collect()
}
