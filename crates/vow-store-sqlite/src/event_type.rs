//! Event types: global (not per application), keyed and listed by name.

use crate::idempotency::keyed;
use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use vow_store::idempotency::{Applied, Completion};
use vow_store::rows::FromColumns;
use vow_store::EventTypes;
use vow_store::StoreResult;
use vow_store::{EventType, Seek, StoreError};

use crate::convert::{micros, read, seek_sql, to_opt_json, truncate};
use crate::error::Result;
use crate::SqliteStore;

const COLUMNS: &str = EventType::COLUMNS;

pub(crate) fn create(conn: &Connection, new: EventType) -> Result<EventType> {
    conn.prepare_cached(
        "INSERT INTO event_types
         (name, description, archived, deprecated, feature_flag, schemas, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        new.name,
        new.description,
        new.archived,
        new.deprecated,
        new.feature_flag,
        to_opt_json(new.schemas.as_ref())?,
        micros(new.created_at),
        micros(new.updated_at),
    ])?;
    Ok(EventType {
        created_at: truncate(new.created_at),
        updated_at: truncate(new.updated_at),
        ..new
    })
}

pub(crate) fn update(conn: &Connection, updated: EventType) -> Result<EventType> {
    let sql = format!(
        "UPDATE event_types SET description = ?2, archived = ?3, deprecated = ?4,
         feature_flag = ?5, schemas = ?6, updated_at = ?7 WHERE name = ?1 RETURNING {COLUMNS}"
    );
    conn.prepare_cached(&sql)?
        .query_row(
            params![
                updated.name,
                updated.description,
                updated.archived,
                updated.deprecated,
                updated.feature_flag,
                to_opt_json(updated.schemas.as_ref())?,
                micros(updated.updated_at),
            ],
            read,
        )
        .optional()?
        .ok_or_else(|| StoreError::NotFound("event type").into())
}

#[async_trait]
impl EventTypes for SqliteStore {
    async fn create_event_type_keyed(
        &self,
        new: EventType,
        completion: Option<Completion<EventType>>,
    ) -> StoreResult<Applied<EventType>> {
        self.write(move |c| keyed(c, completion, |c| create(c, new)))
            .await
    }

    async fn get_event_type(&self, name: &str) -> StoreResult<Option<EventType>> {
        let name = name.to_owned();
        self.read(move |conn| {
            let name: &str = &name;
            let sql = format!("SELECT {COLUMNS} FROM event_types WHERE name = ?1");
            Ok(conn
                .prepare_cached(&sql)?
                .query_row([name], read)
                .optional()?)
        })
        .await
    }

    async fn list_event_types(
        &self,
        seek: &Seek,
        include_archived: bool,
    ) -> StoreResult<Vec<EventType>> {
        let seek = seek.clone();
        self.read(move |conn| {
            let seek: &Seek = &seek;
            let filters: &[&str] = if include_archived {
                &[]
            } else {
                &["archived = 0"]
            };
            let sql = seek_sql(
                &format!("{COLUMNS} FROM event_types"),
                filters,
                "name",
                seek,
                1,
                2,
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(params![seek.after, seek.fetch()], read)?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn update_event_type_keyed(
        &self,
        updated: EventType,
        completion: Option<Completion<EventType>>,
    ) -> StoreResult<Applied<EventType>> {
        self.write(move |c| keyed(c, completion, |c| update(c, updated)))
            .await
    }

    async fn expunge_event_type(&self, name: &str) -> StoreResult<()> {
        let name = name.to_owned();
        self.write(move |conn| {
            let name: &str = &name;
            let n = conn
                .prepare_cached("DELETE FROM event_types WHERE name = ?1")?
                .execute([name])?;
            if n == 0 {
                return Err(StoreError::NotFound("event type").into());
            }
            Ok(())
        })
        .await
    }
}
