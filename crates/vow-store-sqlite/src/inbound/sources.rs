//! Sources of inbound webhooks: one row each, with the scheme's settings, the secrets, the
//! locators and the destinations as JSON columns.

use crate::idempotency::keyed;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use vow_core::SourceId;
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::Sources;
use vow_store::inbound::{NewSource, Source, SourceFields};
use vow_store::rows::{FromColumns, SOURCE_FIELDS};
use vow_store::StoreResult;
use vow_store::{Seek, StoreError};

use crate::convert::{micros, read, seek_sql, to_json, to_opt_json, truncate};
use crate::error::Result;
use crate::SqliteStore;

const COLUMNS: &str = Source::COLUMNS;

fn not_found() -> crate::error::Error {
    StoreError::NotFound("source").into()
}

/// Fails with `NotFound("source")` unless the source exists.
pub(crate) fn require(conn: &Connection, source: SourceId) -> Result<()> {
    conn.prepare_cached("SELECT 1 FROM sources WHERE id = ?1")?
        .query_row([source.to_string()], |_| Ok(()))
        .optional()?
        .ok_or_else(not_found)
}

/// The replaceable columns ([`SOURCE_FIELDS`]), in the order [`field_values`] gives values.
const FIELDS: [&str; 11] = SOURCE_FIELDS;

/// The values of [`FIELDS`], as stored.
fn field_values(f: &SourceFields) -> rusqlite::Result<[Value; 11]> {
    Ok([
        f.description.clone().into(),
        f.scheme.clone().into(),
        to_opt_json(f.hmac.as_ref())?.into(),
        to_json(&f.secrets)?.into(),
        i64::from(f.tolerance_secs).into(),
        to_opt_json(f.event_id.as_ref())?.into(),
        to_opt_json(f.account.as_ref())?.into(),
        f.version_pointer.clone().into(),
        f.entity_pointer.clone().into(),
        to_json(&f.destinations)?.into(),
        f.replay_window_secs.map(i64::from).into(),
    ])
}

pub(crate) fn create(conn: &Connection, new: NewSource) -> Result<Source> {
    // ?1 id, ?2 token, ?3 the time, then the fields from ?4 on.
    let sql =
        format!(
        "INSERT INTO sources (id, token, created_at, updated_at, {}) VALUES (?1, ?2, ?3, ?3, {})",
        FIELDS.join(", "),
        (4..4 + FIELDS.len()).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ")
    );
    let keys = [
        Value::from(new.id.to_string()),
        new.token.clone().into(),
        micros(new.now).into(),
    ];
    conn.prepare_cached(&sql)?.execute(params_from_iter(
        keys.into_iter().chain(field_values(&new.fields)?),
    ))?;
    let now = truncate(new.now);
    Ok(Source {
        id: new.id,
        token: new.token,
        fields: new.fields,
        created_at: now,
        updated_at: now,
    })
}

pub(crate) fn get(conn: &Connection, source: SourceId) -> Result<Option<Source>> {
    by(conn, "id", &source.to_string())
}

/// The source whose `column` (a trusted name) is `value`.
fn by(conn: &Connection, column: &str, value: &str) -> Result<Option<Source>> {
    let sql = format!("SELECT {COLUMNS} FROM sources WHERE {column} = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([value], read)
        .optional()?)
}

#[async_trait]
impl Sources for SqliteStore {
    async fn create_source_keyed(
        &self,
        new: NewSource,
        completion: Option<Completion<Source>>,
    ) -> StoreResult<Applied<Source>> {
        self.write(move |c| keyed(c, completion, |c| create(c, new)))
            .await
    }

    async fn get_source(&self, id: SourceId) -> StoreResult<Option<Source>> {
        self.read(move |c| get(c, id)).await
    }

    async fn get_source_by_token(&self, token: &str) -> StoreResult<Option<Source>> {
        let token = token.to_owned();
        self.read(move |conn| {
            let token: &str = &token;
            by(conn, "token", token)
        })
        .await
    }

    async fn list_sources(&self, seek: &Seek) -> StoreResult<Vec<Source>> {
        let seek = seek.clone();
        self.read(move |conn| {
            let seek: &Seek = &seek;
            let sql = seek_sql(&format!("{COLUMNS} FROM sources"), &[], "id", seek, 1, 2);
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(params![seek.after, seek.fetch()], read)?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn update_source(
        &self,
        source: SourceId,
        f: SourceFields,
        now: DateTime<Utc>,
    ) -> StoreResult<Source> {
        self.write(move |conn| {
            // ?1 id, ?2 the time, then the fields from ?3 on.
            let set: Vec<String> = FIELDS
                .iter()
                .enumerate()
                .map(|(i, column)| format!("{column} = ?{}", i + 3))
                .collect();
            let sql = format!(
                "UPDATE sources SET {}, updated_at = ?2 WHERE id = ?1 RETURNING {COLUMNS}",
                set.join(", ")
            );
            let keys = [Value::from(source.to_string()), micros(now).into()];
            conn.prepare_cached(&sql)?
                .query_row(
                    params_from_iter(keys.into_iter().chain(field_values(&f)?)),
                    read,
                )
                .optional()?
                .ok_or_else(not_found)
        })
        .await
    }

    async fn delete_source(&self, source: SourceId) -> StoreResult<()> {
        self.write(move |conn| {
            let n = conn
                .prepare_cached("DELETE FROM sources WHERE id = ?1")?
                .execute([source.to_string()])?;
            if n == 0 {
                return Err(not_found());
            }
            Ok(())
        })
        .await
    }
}
