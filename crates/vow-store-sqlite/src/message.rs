//! Messages and their deliveries: the hot write path.
//!
//! [`create`] is one writer job: it checks the application, inserts the message (the unique
//! `(app_id, event_id)` index turns a duplicate into a `Conflict`), then writes one delivery row
//! per endpoint that [`vow_core::matching::endpoint_matches`] accepts: `pending` and due now, or
//! `held` when the endpoint is disabled. Its savepoint makes the whole of it all-or-nothing.
//! With `only`, the message goes to that one endpoint whatever its filters (send-example).

use crate::idempotency::keyed;
use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use vow_core::{AppId, DeliveryId, EndpointId, MessageId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::rows::FromColumns;
use vow_store::rules::fan_out::{self, FanOutEndpoint};
use vow_store::MessageCreate;
use vow_store::Messages;
use vow_store::StoreResult;
use vow_store::{CreatedMessage, Delivery, Message, MessageFilter, MessageKey, NewMessage, Seek};

use crate::convert::{micros, read, seek_sql, to_json, to_opt_json};
use crate::error::Result;
use crate::SqliteStore;
use crate::{application, endpoint};

const COLUMNS: &str = Message::COLUMNS;

pub(crate) fn create(
    conn: &Connection,
    new: NewMessage,
    only: Option<EndpointId>,
) -> Result<CreatedMessage> {
    application::require(conn, &new.app_id)?;
    if let Some(ep) = &only {
        endpoint::require(conn, &new.app_id, ep)?;
    }
    let app = new.app_id.to_string();
    let msg = new.id.to_string();
    let now = micros(new.now);
    let channels = to_opt_json(new.channels.as_ref())?;
    conn.prepare_cached(
        "INSERT INTO messages
         (id, app_id, event_id, event_type, channels, payload, payload_expires_at, created_at,
          traceparent)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        msg,
        app,
        new.event_id,
        new.event_type,
        channels,
        new.payload,
        micros(new.payload_expires_at),
        now,
        new.traceparent,
    ])?;
    if channels.is_some() {
        conn.prepare_cached(
            "INSERT OR IGNORE INTO message_channels (app_id, channel, msg_id)
             SELECT ?1, value, ?2 FROM json_each(?3)",
        )?
        .execute(params![app, msg, channels])?;
    }

    let sql = format!(
        "SELECT {} FROM endpoints WHERE app_id = ?1 AND (?2 IS NULL OR id = ?2)",
        FanOutEndpoint::COLUMNS
    );
    let mut endpoints = conn.prepare_cached(&sql)?;
    let only = only.map(|ep| ep.to_string());
    let rows = endpoints.query_map(params![app, only], read::<FanOutEndpoint>)?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO deliveries
         (id, app_id, msg_id, endpoint_id, status, attempts, next_attempt_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6)",
    )?;
    let mut deliveries = 0;
    for endpoint in rows {
        let endpoint = endpoint?;
        let Some(status) = fan_out::delivery_status(&endpoint, &new, only.is_some()) else {
            continue;
        };
        insert.execute(params![
            DeliveryId::new().to_string(),
            app,
            msg,
            endpoint.id,
            status.as_str(),
            now,
        ])?;
        deliveries += 1;
    }

    Ok(CreatedMessage {
        message: new.into_stored(),
        deliveries,
    })
}

/// Restricts a message listing to the messages with a delivery to one endpoint, optionally in
/// one state (an SQL condition over `deliveries`; `$now` stands for the bound time, `?7`).
pub(crate) struct DeliveredTo {
    pub(crate) endpoint: EndpointId,
    pub(crate) status: Option<&'static str>,
    pub(crate) now: i64,
}

pub(crate) fn list(
    conn: &Connection,
    app: AppId,
    filter: &MessageFilter,
    delivered_to: Option<&DeliveredTo>,
    seek: &Seek,
) -> Result<Vec<Message>> {
    // Only the conditions in use appear in the text (a handful of variants, each cached), and
    // every parameter is always bound (NULL when unused).
    let mut filters = vec!["app_id = ?1".to_string()];
    // One type is an equality, which reads `messages_by_event_type` in id order; SQLite will
    // not use that index for a list (it would have to sort), so several types are checked per
    // message of the application.
    match filter.event_types.len() {
        0 => {}
        1 => filters.push("event_type = ?2".into()),
        _ => filters.push("event_type IN (SELECT value FROM json_each(?2))".into()),
    }
    if filter.channel.is_some() {
        filters.push(
            "id IN (SELECT msg_id FROM message_channels WHERE app_id = ?1 AND channel = ?3)".into(),
        );
    }
    if filter.before.is_some() {
        filters.push("created_at < ?4".into());
    }
    if filter.after.is_some() {
        filters.push("created_at > ?5".into());
    }
    if let Some(to) = delivered_to {
        let status = to
            .status
            .map(|s| format!(" AND ({})", s.replace("$now", "?7")));
        let status = status.unwrap_or_default();
        filters.push(format!(
            "id IN (SELECT msg_id FROM deliveries WHERE app_id = ?1 AND endpoint_id = ?6{status})"
        ));
    }
    let filters: Vec<&str> = filters.iter().map(String::as_str).collect();
    let sql = seek_sql(
        &format!("{COLUMNS} FROM messages"),
        &filters,
        "id",
        seek,
        8,
        9,
    );
    let event_types = match filter.event_types.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        several => Some(to_json(several)?),
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        params![
            app.to_string(),
            event_types,
            filter.channel,
            filter.before.map(micros),
            filter.after.map(micros),
            delivered_to.map(|d| d.endpoint.to_string()),
            delivered_to.map(|d| d.now),
            seek.after,
            seek.fetch(),
        ],
        read,
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The columns a [`Delivery`] reads.
pub(crate) const DELIVERY_COLUMNS: &str = Delivery::COLUMNS;

pub(crate) fn deliveries(conn: &Connection, app: AppId, msg: MessageId) -> Result<Vec<Delivery>> {
    let sql = format!(
        "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE app_id = ?1 AND msg_id = ?2
         ORDER BY endpoint_id"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map([app.to_string(), msg.to_string()], read)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

#[async_trait]
impl Messages for SqliteStore {
    async fn create_message_keyed(
        &self,
        create_message: MessageCreate,
        completion: Option<Completion<CreatedMessage>>,
    ) -> StoreResult<Applied<CreatedMessage>> {
        let MessageCreate { new, only, app } = create_message;
        let write = move |c: &Connection| {
            if let Some(app) = app {
                application::create(c, app)?;
            }
            create(c, new, only)
        };
        self.write_intake(move |c| keyed(c, completion, write))
            .await
    }

    async fn create_owed_message(&self, new: NewMessage) -> StoreResult<CreatedMessage> {
        self.write(move |c| create(c, new, None)).await
    }

    async fn get_message(&self, app: AppId, key: &MessageKey) -> StoreResult<Option<Message>> {
        let key = key.clone();
        self.read(move |conn| {
            let key: &MessageKey = &key;
            let (sql, value) = match key {
                MessageKey::Id(id) => (
                    format!("SELECT {COLUMNS} FROM messages WHERE app_id = ?1 AND id = ?2"),
                    id.to_string(),
                ),
                MessageKey::EventId(event_id) => (
                    format!("SELECT {COLUMNS} FROM messages WHERE app_id = ?1 AND event_id = ?2"),
                    event_id.clone(),
                ),
            };
            Ok(conn
                .prepare_cached(&sql)?
                .query_row([app.to_string(), value], read)
                .optional()?)
        })
        .await
    }

    async fn list_messages(
        &self,
        app: AppId,
        filter: &MessageFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<Message>> {
        let filter = filter.clone();
        let seek = seek.clone();
        self.read(move |c| list(c, app, &filter, None, &seek)).await
    }

    async fn list_deliveries(&self, app: AppId, msg: MessageId) -> StoreResult<Vec<Delivery>> {
        self.read(move |c| deliveries(c, app, msg)).await
    }
}
