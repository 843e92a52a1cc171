//! Applications: the tenants. Deleting one cascades (in the schema) to its endpoints, their
//! secrets, its messages and their deliveries.

use crate::idempotency::{keyed, step};
use async_trait::async_trait;
use chrono::Utc;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, QueryBuilder};
use vow_core::AppId;
use vow_store::idempotency::{Applied, Completion};
use vow_store::rows::FromColumns;
use vow_store::Applications;
use vow_store::{AppKey, Application, ApplicationFields, NewApplication, Seek, StoreResult};

use crate::convert::{self, not_found, read};
use crate::error::db_error;
use crate::seek::push_seek;
use crate::PgStore;

const COLUMNS: &str = Application::COLUMNS;

pub(crate) async fn create(
    conn: &mut PgConnection,
    new: NewApplication,
) -> StoreResult<Application> {
    let f = new.fields;
    sqlx::query(&format!(
        "INSERT INTO applications (id, uid, name, throttle_rate, metadata, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $6)
         RETURNING {COLUMNS}"
    ))
    .bind(new.id.to_string())
    .bind(f.uid)
    .bind(f.name)
    .bind(convert::rate_param(f.throttle_rate))
    .bind(Json(f.metadata))
    .bind(new.now)
    .try_map(read::<Application>)
    .fetch_one(conn)
    .await
    .map_err(db_error)
}

#[async_trait]
impl Applications for PgStore {
    async fn create_application_keyed(
        &self,
        new: NewApplication,
        completion: Option<Completion<Application>>,
    ) -> StoreResult<Applied<Application>> {
        let write = step(move |tx| Box::pin(create(tx, new)));
        keyed(&self.pool, completion, write).await
    }

    async fn get_application(&self, key: &AppKey) -> StoreResult<Option<Application>> {
        let (column, value) = match key {
            AppKey::Id(id) => ("id", id.to_string()),
            AppKey::Uid(uid) => ("uid", uid.clone()),
        };
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM applications WHERE {column} = $1"
        ))
        .bind(value)
        .try_map(read::<Application>)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)
    }

    async fn list_applications(&self, seek: &Seek) -> StoreResult<Vec<Application>> {
        let mut qb =
            QueryBuilder::<Postgres>::new(format!("SELECT {COLUMNS} FROM applications WHERE TRUE"));
        push_seek(&mut qb, "id", seek);
        qb.build()
            .try_map(read::<Application>)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)
    }

    async fn update_application(
        &self,
        id: AppId,
        f: ApplicationFields,
    ) -> StoreResult<Application> {
        // The trait gives no clock here; `updated_at` never moves backwards, even when this node's
        // clock is behind the one that wrote the row.
        sqlx::query(&format!(
            "UPDATE applications
             SET uid = $2, name = $3, throttle_rate = $4, metadata = $5,
                 updated_at = GREATEST(updated_at, $6)
             WHERE id = $1
             RETURNING {COLUMNS}"
        ))
        .bind(id.to_string())
        .bind(f.uid)
        .bind(f.name)
        .bind(convert::rate_param(f.throttle_rate))
        .bind(Json(f.metadata))
        .bind(Utc::now())
        .try_map(read::<Application>)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .ok_or_else(|| not_found("application"))
    }

    async fn delete_application(&self, id: AppId) -> StoreResult<()> {
        let done = sqlx::query("DELETE FROM applications WHERE id = $1")
            .bind(id.to_string())
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        if done.rows_affected() == 0 {
            return Err(not_found("application"));
        }
        Ok(())
    }
}
