//! Event types: global (not per application), keyed and listed by name. Archiving is a flag;
//! only `expunge` deletes the row.

use crate::idempotency::{keyed, step};
use async_trait::async_trait;
use sqlx::{PgConnection, Postgres, QueryBuilder};
use vow_store::idempotency::{Applied, Completion};
use vow_store::rows::FromColumns;
use vow_store::EventTypes;
use vow_store::{EventType, Seek, StoreResult};

use crate::convert::{not_found, read};
use crate::error::db_error;
use crate::seek::push_seek;
use crate::PgStore;

const COLUMNS: &str = EventType::COLUMNS;

pub(crate) async fn create(conn: &mut PgConnection, new: EventType) -> StoreResult<EventType> {
    sqlx::query(&format!(
        "INSERT INTO event_types
             (name, description, archived, deprecated, feature_flag, schemas, created_at,
              updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         RETURNING {COLUMNS}"
    ))
    .bind(new.name)
    .bind(new.description)
    .bind(new.archived)
    .bind(new.deprecated)
    .bind(new.feature_flag)
    .bind(new.schemas)
    .bind(new.created_at)
    .bind(new.updated_at)
    .try_map(read::<EventType>)
    .fetch_one(conn)
    .await
    .map_err(db_error)
}

pub(crate) async fn update(conn: &mut PgConnection, updated: EventType) -> StoreResult<EventType> {
    sqlx::query(&format!(
        "UPDATE event_types
         SET description = $2, archived = $3, deprecated = $4, feature_flag = $5, schemas = $6,
             updated_at = $7
         WHERE name = $1
         RETURNING {COLUMNS}"
    ))
    .bind(updated.name)
    .bind(updated.description)
    .bind(updated.archived)
    .bind(updated.deprecated)
    .bind(updated.feature_flag)
    .bind(updated.schemas)
    .bind(updated.updated_at)
    .try_map(read::<EventType>)
    .fetch_optional(conn)
    .await
    .map_err(db_error)?
    .ok_or_else(|| not_found("event type"))
}

#[async_trait]
impl EventTypes for PgStore {
    async fn create_event_type_keyed(
        &self,
        new: EventType,
        completion: Option<Completion<EventType>>,
    ) -> StoreResult<Applied<EventType>> {
        let write = step(move |tx| Box::pin(create(tx, new)));
        keyed(&self.pool, completion, write).await
    }

    async fn get_event_type(&self, name: &str) -> StoreResult<Option<EventType>> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM event_types WHERE name = $1"
        ))
        .bind(name)
        .try_map(read::<EventType>)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)
    }

    async fn list_event_types(
        &self,
        seek: &Seek,
        include_archived: bool,
    ) -> StoreResult<Vec<EventType>> {
        let mut qb =
            QueryBuilder::<Postgres>::new(format!("SELECT {COLUMNS} FROM event_types WHERE "));
        qb.push(if include_archived {
            "TRUE"
        } else {
            "NOT archived"
        });
        push_seek(&mut qb, "name", seek);
        qb.build()
            .try_map(read::<EventType>)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)
    }

    async fn update_event_type_keyed(
        &self,
        updated: EventType,
        completion: Option<Completion<EventType>>,
    ) -> StoreResult<Applied<EventType>> {
        let write = step(move |tx| Box::pin(update(tx, updated)));
        keyed(&self.pool, completion, write).await
    }

    async fn expunge_event_type(&self, name: &str) -> StoreResult<()> {
        let done = sqlx::query("DELETE FROM event_types WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        if done.rows_affected() == 0 {
            return Err(not_found("event type"));
        }
        Ok(())
    }
}
