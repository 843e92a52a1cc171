//! Messages, and the fan-out that writes one delivery row per matching endpoint with each
//! message, in the same transaction.
//!
//! The payload is stored as TEXT exactly as the client sent it: JSONB would reorder keys and
//! change what the endpoint's signature covers. With `only`, a message goes to that one endpoint
//! whatever its filters (send-example).

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::{Arguments, PgConnection, PgPool, Postgres, QueryBuilder};
use vow_core::matching::{endpoint_matches, EndpointFilter};
use vow_core::{AppId, DeliveryId, EndpointId};
use vow_idempotency::postgres as records;
use vow_store::idempotency::{Render, StoredResponse, Written};
use vow_store::{
    CreatedMessage, DeliveryStatus, Message, MessageFilter, MessageKey, NewMessage, Seek,
    StoreError, StoreResult,
};

use crate::convert::{self, not_found};
use crate::error::db_error;
use crate::idempotency::record_error;
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

/// One transaction: the message is inserted ([`insert`]), the application's endpoints are read
/// ([`fan_out`]) and one delivery per match is inserted in a single statement
/// ([`insert_deliveries`]). Any error drops the transaction, which rolls it back.
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
    let message = insert(tx, &new, None)
        .await?
        .ok_or_else(|| StoreError::Backend("the message insert returned no row".into()))?;
    let fan_out = fan_out(tx, &new, only).await?;
    insert_deliveries(tx, &new, &fan_out, None).await?;
    Ok(CreatedMessage {
        message,
        deliveries: fan_out.ids.len(),
    })
}

/// What [`create_claiming`] did.
pub(crate) enum Claimed {
    /// The key was free: the message, its deliveries, the record and its response are written.
    Created(Box<(Written, StoredResponse)>),
    /// The scope has a record: nothing was written; `render` comes back unused.
    Held(Render),
}

/// [`create_in`] for a key with no record begun (ADR 6): the key's claim rides on the message's
/// insert as a CTE and its response on the deliveries' insert, so a keyed create makes as many
/// round trips as a plain one. The claim comes first in the transaction, as in
/// [`records::claim_completed`]: a concurrent request with the key waits on it.
pub(crate) async fn create_claiming(
    tx: &mut PgConnection,
    new: &NewMessage,
    only: Option<EndpointId>,
    claim: &records::Claim<'_>,
    render: Render,
) -> StoreResult<Claimed> {
    let Some(message) = insert(tx, new, Some(claim)).await? else {
        return Ok(Claimed::Held(render));
    };
    let fan_out = fan_out(tx, new, only).await?;
    let written = Written::Message(CreatedMessage {
        message,
        deliveries: fan_out.ids.len(),
    });
    let response = render(&written);
    let record = records::Response {
        scope: claim.scope,
        token: claim.token,
        response: &response,
    };
    insert_deliveries(tx, new, &fan_out, Some(&record)).await?;
    Ok(Claimed::Created(Box::new((written, response))))
}

/// The values of a message's columns, `$1`..`$8` in [`COLUMNS`] order.
const MESSAGE_PARAMS: usize = 8;

/// Inserts the message. No separate check that the application exists: the insert's foreign
/// key does it (and takes the same key-share lock), and its violation reads as "application not
/// found"; `messages_app_id_event_id_key` → `Conflict`. With `claim`, after the claim's CTE and
/// only if it claimed: `None` when the scope has a record.
async fn insert(
    tx: &mut PgConnection,
    new: &NewMessage,
    claim: Option<&records::Claim<'_>>,
) -> StoreResult<Option<Message>> {
    static PLAIN: LazyLock<String> = LazyLock::new(|| {
        format!(
            "INSERT INTO messages ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             RETURNING {COLUMNS}"
        )
    });
    static CLAIMING: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH {} INSERT INTO messages ({COLUMNS}) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM claim) \
             RETURNING {COLUMNS}",
            records::Claim::cte(MESSAGE_PARAMS + 1)
        )
    });
    let mut args = PgArguments::default();
    add(&mut args, new.id.to_string())?;
    add(&mut args, new.app_id.to_string())?;
    add(&mut args, new.event_id.as_deref())?;
    add(&mut args, new.event_type.as_str())?;
    add(&mut args, new.channels.as_deref())?;
    add(&mut args, new.payload.as_str())?;
    add(&mut args, new.payload_expires_at)?;
    add(&mut args, new.now)?;
    let sql = match claim {
        None => &*PLAIN,
        Some(claim) => {
            claim.add_to(&mut args).map_err(record_error)?;
            &*CLAIMING
        }
    };
    sqlx::query_as_with::<_, MessageRow, _>(sql.as_str(), args)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?
        .map(MessageRow::into_model)
        .transpose()
}

/// The deliveries a message gets: one per matching endpoint, `held` where it is disabled.
struct FanOut {
    ids: Vec<String>,
    endpoint_ids: Vec<String>,
    statuses: Vec<&'static str>,
}

/// Reads the application's endpoints (key-share locked: a concurrent delete waits and then
/// cascades to our rows) and picks the ones the message goes to.
async fn fan_out(
    tx: &mut PgConnection,
    new: &NewMessage,
    only: Option<EndpointId>,
) -> StoreResult<FanOut> {
    let endpoints = sqlx::query_as::<_, FanOutRow>(
        "SELECT id, disabled, event_types, channels FROM endpoints
         WHERE app_id = $1 AND ($2::text IS NULL OR id = $2) ORDER BY id FOR KEY SHARE",
    )
    .bind(new.app_id.to_string())
    .bind(only.map(|ep| ep.to_string()))
    .fetch_all(&mut *tx)
    .await
    .map_err(db_error)?;
    if only.is_some() && endpoints.is_empty() {
        return Err(not_found("endpoint"));
    }

    let channels = new.channels.as_deref().unwrap_or_default();
    let mut fan_out = FanOut {
        ids: Vec::new(),
        endpoint_ids: Vec::new(),
        statuses: Vec::new(),
    };
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
        fan_out.ids.push(DeliveryId::new().to_string());
        fan_out.endpoint_ids.push(ep.id);
        fan_out.statuses.push(status.as_str());
    }
    Ok(fan_out)
}

/// Inserts the deliveries in one `UNNEST` statement. With `record`, its response is stored in
/// the same statement (a CTE), or alone when there are no deliveries; fenced when the record's
/// token no longer holds it.
async fn insert_deliveries(
    tx: &mut PgConnection,
    new: &NewMessage,
    fan_out: &FanOut,
    record: Option<&records::Response<'_>>,
) -> StoreResult<()> {
    const DELIVERIES: &str = "deliveries
             (id, app_id, msg_id, endpoint_id, status, attempts, next_attempt_at, created_at)
         SELECT d.id, $1, $2, d.endpoint_id, d.status, 0, $3, $3
         FROM UNNEST($4::text[], $5::text[], $6::text[]) AS d (id, endpoint_id, status)";
    const DELIVERY_PARAMS: usize = 6;
    static PLAIN: LazyLock<String> = LazyLock::new(|| format!("INSERT INTO {DELIVERIES}"));
    static RESPONDING: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH {}, inserted AS (INSERT INTO {DELIVERIES} RETURNING 1) \
             SELECT count(*) FROM response",
            records::Response::cte(DELIVERY_PARAMS + 1)
        )
    });
    if fan_out.ids.is_empty() {
        return match record {
            None => Ok(()),
            Some(record) => records::store_response(tx, record)
                .await
                .map_err(record_error),
        };
    }
    let mut args = PgArguments::default();
    add(&mut args, new.app_id.to_string())?;
    add(&mut args, new.id.to_string())?;
    add(&mut args, new.now)?;
    add(&mut args, &fan_out.ids)?;
    add(&mut args, &fan_out.endpoint_ids)?;
    add(&mut args, &fan_out.statuses)?;
    let Some(record) = record else {
        sqlx::query_with(PLAIN.as_str(), args)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        return Ok(());
    };
    record.add_to(&mut args).map_err(record_error)?;
    let stored: i64 = sqlx::query_scalar_with(RESPONDING.as_str(), args)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
    match stored {
        1 => Ok(()),
        _ => Err(StoreError::Fenced),
    }
}

/// Adds one parameter value.
fn add<'q, T>(args: &mut PgArguments, value: T) -> StoreResult<()>
where
    T: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
{
    args.add(value)
        .map_err(|e| db_error(sqlx::Error::Encode(e)))
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
