//! Svix's attempted destinations (the endpoints a message went to) and attempted messages (the
//! messages an endpoint was sent): the endpoint or message listing restricted by a subquery on
//! `deliveries`, then the page's delivery rows, both read in one transaction (one snapshot).

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection};
use vow_core::{AppId, EndpointId, MessageId};
use vow_store::queue::AttemptedListings;
use vow_store::queue::{AttemptedDestination, AttemptedMessage, DeliveryState, MessageStatus};
use vow_store::rows::{delivery_state, DELIVERY_STATE_COLUMNS};
use vow_store::StoreResult;
use vow_store::{MessageFilter, Seek};

use crate::convert::{micros, to_json, SqliteColumns};
use crate::error::Result;
use crate::message::DeliveredTo;
use crate::SqliteStore;
use crate::{endpoint, message};

/// The deliveries with `key_col = key` and `other_col` in `others`, by `other_col`.
fn states(
    conn: &Connection,
    app: AppId,
    (key_col, key): (&str, String),
    (other_col, others): (&str, Vec<String>),
    now: DateTime<Utc>,
) -> Result<HashMap<String, DeliveryState>> {
    let sql = format!(
        "SELECT {DELIVERY_STATE_COLUMNS}, {other_col} FROM deliveries
         WHERE app_id = ?1 AND {key_col} = ?2 AND {other_col} IN (SELECT value FROM json_each(?3))"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![app.to_string(), key, to_json(&others)?], |r| {
        delivery_state(&SqliteColumns(r), now)
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub(crate) fn messages(
    conn: &Connection,
    app: AppId,
    endpoint: EndpointId,
    filter: &MessageFilter,
    status: Option<MessageStatus>,
    now: DateTime<Utc>,
    seek: &Seek,
) -> Result<Vec<AttemptedMessage>> {
    let tx = conn.unchecked_transaction()?;
    let to = DeliveredTo {
        endpoint,
        status: status.map(MessageStatus::condition),
        now: micros(now),
    };
    let found = message::list(&tx, app, filter, Some(&to), seek)?;
    let ids = found.iter().map(|m| m.id.to_string()).collect();
    let key = ("endpoint_id", endpoint.to_string());
    let states = states(&tx, app, key, ("msg_id", ids), now)?;
    Ok(AttemptedMessage::pair_up(found, states))
}

#[async_trait]
impl AttemptedListings for SqliteStore {
    async fn list_attempted_destinations(
        &self,
        app: AppId,
        msg: MessageId,
        now: DateTime<Utc>,
        seek: &Seek,
    ) -> StoreResult<Vec<AttemptedDestination>> {
        let seek = seek.clone();
        self.read(move |conn| {
            let seek: &Seek = &seek;
            let tx = conn.unchecked_transaction()?;
            let found = endpoint::list(&tx, app, Some(msg), seek)?;
            let ids = found.iter().map(|e| e.id.to_string()).collect();
            let states = states(
                &tx,
                app,
                ("msg_id", msg.to_string()),
                ("endpoint_id", ids),
                now,
            )?;
            Ok(AttemptedDestination::pair_up(found, states))
        })
        .await
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
        let (filter, seek) = (filter.clone(), seek.clone());
        self.read(move |c| messages(c, app, endpoint, &filter, status, now, &seek))
            .await
    }
}
