//! Endpoints of an application, and their signing secrets.
//!
//! Every query is scoped by `app_id`, so an endpoint of another application is simply not found.
//! Secrets live in `endpoint_secrets`: exactly one current row (`valid_until IS NULL`, enforced
//! by a partial unique index) plus rotated-out rows that stay valid until their deadline.

use crate::idempotency::keyed;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use vow_core::{AppId, EndpointId, MessageId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::queue::DeliveryTarget;
use vow_store::rows::FromColumns;
use vow_store::Endpoints;
use vow_store::StoreResult;
use vow_store::{
    DeliveryOptions, Endpoint, EndpointFields, EndpointKey, EndpointSecret, NewEndpoint, Seek,
    StoreError,
};

use crate::application;
use crate::convert::{micros, read, seek_sql, to_json, to_opt_json, truncate};
use crate::error::Result;
use crate::now;
use crate::SqliteStore;

const COLUMNS: &str = Endpoint::COLUMNS;

/// The stored form of a retry schedule (its Display form).
fn schedule_text(options: &DeliveryOptions) -> Option<String> {
    options.retry_schedule.as_ref().map(ToString::to_string)
}

fn not_found() -> crate::error::Error {
    StoreError::NotFound("endpoint").into()
}

/// Fails with `NotFound("endpoint")` unless `app` has endpoint `ep`.
pub(crate) fn require(conn: &Connection, app: &AppId, ep: &EndpointId) -> Result<()> {
    conn.prepare_cached("SELECT 1 FROM endpoints WHERE app_id = ?1 AND id = ?2")?
        .query_row([app.to_string(), ep.to_string()], |_| Ok(()))
        .optional()?
        .ok_or_else(not_found)
}

pub(crate) fn create(conn: &Connection, new: NewEndpoint) -> Result<Endpoint> {
    application::require(conn, &new.app_id)?;
    let f = &new.fields;
    conn.prepare_cached(
        "INSERT INTO endpoints (id, app_id, uid, url, description, disabled, event_types,
         channels, throttle_rate, metadata, headers, created_at, updated_at, signature_style,
         timeout_ms, retry_schedule)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13, ?14, ?15)",
    )?
    .execute(params![
        new.id.to_string(),
        new.app_id.to_string(),
        f.uid,
        f.url,
        f.description,
        f.disabled,
        to_opt_json(f.event_types.as_ref())?,
        to_opt_json(f.channels.as_ref())?,
        f.throttle_rate,
        to_json(&f.metadata)?,
        to_json(&f.headers)?,
        micros(new.now),
        f.delivery.signature_style.as_str(),
        f.delivery.timeout_ms,
        schedule_text(&f.delivery),
    ])?;
    insert_current_secret(conn, &new.id, &new.secret)?;
    let now = truncate(new.now);
    Ok(Endpoint {
        id: new.id,
        app_id: new.app_id,
        fields: new.fields,
        disabled_reason: None,
        created_at: now,
        updated_at: now,
    })
}

/// An application's endpoints; with `msg`, only those that message has a delivery to.
pub(crate) fn list(
    conn: &Connection,
    app: AppId,
    msg: Option<MessageId>,
    seek: &Seek,
) -> Result<Vec<Endpoint>> {
    let mut filters = vec!["app_id = ?1"];
    if msg.is_some() {
        filters
            .push("id IN (SELECT endpoint_id FROM deliveries WHERE app_id = ?1 AND msg_id = ?2)");
    }
    let sql = seek_sql(
        &format!("{COLUMNS} FROM endpoints"),
        &filters,
        "id",
        seek,
        3,
        4,
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        params![
            app.to_string(),
            msg.map(|m| m.to_string()),
            seek.after,
            seek.fetch()
        ],
        read,
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn insert_current_secret(conn: &Connection, ep: &EndpointId, key: &str) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO endpoint_secrets (endpoint_id, key, valid_until) VALUES (?1, ?2, NULL)",
    )?
    .execute([ep.to_string(), key.to_string()])?;
    Ok(())
}

/// Makes `new_key` current; the current one becomes valid until `old_valid_until`.
pub(crate) fn rotate_secret(
    conn: &Connection,
    app: AppId,
    ep: EndpointId,
    new_key: &str,
    old_valid_until: DateTime<Utc>,
) -> Result<()> {
    require(conn, &app, &ep)?;
    conn.prepare_cached(
        "UPDATE endpoint_secrets SET valid_until = ?2 WHERE endpoint_id = ?1 AND valid_until IS NULL",
    )?
    .execute(params![ep.to_string(), micros(old_valid_until)])?;
    insert_current_secret(conn, &ep, new_key)
}

/// What a delivery attempt needs of endpoint `ep` at `now` (for claims); `None` when it is gone.
/// Two point reads: the endpoint row, then its secrets valid at `now`, current first.
pub(crate) fn target(conn: &Connection, ep: &str, now: i64) -> Result<Option<DeliveryTarget>> {
    let sql = format!(
        "SELECT {} FROM endpoints WHERE id = ?1",
        DeliveryTarget::COLUMNS
    );
    let found = conn
        .prepare_cached(&sql)?
        .query_row([ep], read::<DeliveryTarget>)
        .optional()?;
    let Some(mut target) = found else {
        return Ok(None);
    };
    let mut stmt = conn.prepare_cached(
        "SELECT key, valid_until FROM endpoint_secrets
         WHERE endpoint_id = ?1 AND (valid_until IS NULL OR valid_until > ?2)
         ORDER BY valid_until IS NOT NULL, seq DESC",
    )?;
    let rows = stmt.query_map(params![ep, now], read)?;
    target.secrets = rows.collect::<rusqlite::Result<_>>()?;
    Ok(Some(target))
}

#[async_trait]
impl Endpoints for SqliteStore {
    async fn create_endpoint_keyed(
        &self,
        new: NewEndpoint,
        completion: Option<Completion<Endpoint>>,
    ) -> StoreResult<Applied<Endpoint>> {
        self.write(move |c| keyed(c, completion, |c| create(c, new)))
            .await
    }

    async fn get_endpoint(&self, app: AppId, key: &EndpointKey) -> StoreResult<Option<Endpoint>> {
        let key = key.clone();
        self.read(move |conn| {
            let key: &EndpointKey = &key;
            let (sql, value) = match key {
                EndpointKey::Id(id) => (
                    format!("SELECT {COLUMNS} FROM endpoints WHERE app_id = ?1 AND id = ?2"),
                    id.to_string(),
                ),
                EndpointKey::Uid(uid) => (
                    format!("SELECT {COLUMNS} FROM endpoints WHERE app_id = ?1 AND uid = ?2"),
                    uid.clone(),
                ),
            };
            Ok(conn
                .prepare_cached(&sql)?
                .query_row([app.to_string(), value], read)
                .optional()?)
        })
        .await
    }

    async fn list_endpoints(&self, app: AppId, seek: &Seek) -> StoreResult<Vec<Endpoint>> {
        let seek = seek.clone();
        self.read(move |c| list(c, app, None, &seek)).await
    }

    async fn update_endpoint(
        &self,
        app: AppId,
        ep: EndpointId,
        f: EndpointFields,
    ) -> StoreResult<Endpoint> {
        let now = now();
        self.write(move |conn| {
            let sql = format!(
                "UPDATE endpoints SET uid = ?3, url = ?4, description = ?5, disabled = ?6,
                 disabled_reason = CASE WHEN ?6 THEN disabled_reason END,
                 event_types = ?7, channels = ?8, throttle_rate = ?9, metadata = ?10, headers = ?11,
                 updated_at = ?12, signature_style = ?13, timeout_ms = ?14, retry_schedule = ?15
                 WHERE app_id = ?1 AND id = ?2 RETURNING {COLUMNS}"
            );
            conn.prepare_cached(&sql)?
                .query_row(
                    params![
                        app.to_string(),
                        ep.to_string(),
                        f.uid,
                        f.url,
                        f.description,
                        f.disabled,
                        to_opt_json(f.event_types.as_ref())?,
                        to_opt_json(f.channels.as_ref())?,
                        f.throttle_rate,
                        to_json(&f.metadata)?,
                        to_json(&f.headers)?,
                        micros(now),
                        f.delivery.signature_style.as_str(),
                        f.delivery.timeout_ms,
                        schedule_text(&f.delivery),
                    ],
                    read,
                )
                .optional()?
                .ok_or_else(not_found)
        })
        .await
    }

    async fn delete_endpoint(&self, app: AppId, ep: EndpointId) -> StoreResult<()> {
        self.write(move |conn| {
            let n = conn
                .prepare_cached("DELETE FROM endpoints WHERE app_id = ?1 AND id = ?2")?
                .execute([app.to_string(), ep.to_string()])?;
            if n == 0 {
                return Err(not_found());
            }
            Ok(())
        })
        .await
    }

    async fn endpoint_secrets(
        &self,
        app: AppId,
        ep: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<EndpointSecret>> {
        self.read(move |conn| {
            // One statement, so "the endpoint exists" and "these are its secrets" are one snapshot: the
            // endpoint's row is always there (LEFT JOIN), with NULL secret columns if none is valid.
            let mut stmt = conn.prepare_cached(
                "SELECT s.key, s.valid_until FROM endpoints e
                 LEFT JOIN endpoint_secrets s
                   ON s.endpoint_id = e.id AND (s.valid_until IS NULL OR s.valid_until > ?3)
                 WHERE e.app_id = ?1 AND e.id = ?2
                 ORDER BY s.valid_until IS NOT NULL, s.seq DESC",
            )?;
            let rows = stmt.query_map(
                params![app.to_string(), ep.to_string(), micros(now)],
                |row| match row.get::<_, Option<String>>(0)? {
                    None => Ok(None),
                    Some(_) => read(row).map(Some),
                },
            )?;
            let rows: Vec<Option<EndpointSecret>> = rows.collect::<rusqlite::Result<_>>()?;
            if rows.is_empty() {
                return Err(not_found());
            }
            Ok(rows.into_iter().flatten().collect())
        })
        .await
    }

    async fn rotate_endpoint_secret_keyed(
        &self,
        app: AppId,
        id: EndpointId,
        new_key: String,
        old_valid_until: DateTime<Utc>,
        completion: Option<Completion<()>>,
    ) -> StoreResult<Applied<()>> {
        let rotate = move |c: &Connection| rotate_secret(c, app, id, &new_key, old_valid_until);
        self.write(move |c| keyed(c, completion, rotate)).await
    }
}
