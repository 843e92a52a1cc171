//! Applications: the tenants. Deleting one cascades (foreign keys) to everything under it.

use crate::idempotency::keyed;
use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use vow_core::AppId;
use vow_store::idempotency::{Applied, Completion};
use vow_store::rows::FromColumns;
use vow_store::Applications;
use vow_store::StoreResult;
use vow_store::{AppKey, Application, ApplicationFields, NewApplication, Seek, StoreError};

use crate::convert::{micros, read, seek_sql, to_json, truncate};
use crate::error::Result;
use crate::now;
use crate::SqliteStore;

const COLUMNS: &str = Application::COLUMNS;

/// Whether the application exists (used by writes that need their parent).
pub(crate) fn exists(conn: &Connection, app: &AppId) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM applications WHERE id = ?1")?
        .query_row([app.to_string()], |_| Ok(()))
        .optional()
        .map(|found| found.is_some())
}

/// Fails with `NotFound("application")` unless the application exists.
pub(crate) fn require(conn: &Connection, app: &AppId) -> Result<()> {
    if exists(conn, app)? {
        Ok(())
    } else {
        Err(StoreError::NotFound("application").into())
    }
}

pub(crate) fn create(conn: &Connection, new: NewApplication) -> Result<Application> {
    let f = &new.fields;
    conn.prepare_cached(
        "INSERT INTO applications (id, uid, name, throttle_rate, metadata, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
    )?
    .execute(params![
        new.id.to_string(),
        f.uid,
        f.name,
        f.throttle_rate,
        to_json(&f.metadata)?,
        micros(new.now),
    ])?;
    let now = truncate(new.now);
    Ok(Application {
        id: new.id,
        fields: new.fields,
        created_at: now,
        updated_at: now,
    })
}

#[async_trait]
impl Applications for SqliteStore {
    async fn create_application_keyed(
        &self,
        new: NewApplication,
        completion: Option<Completion<Application>>,
    ) -> StoreResult<Applied<Application>> {
        self.write(move |c| keyed(c, completion, |c| create(c, new)))
            .await
    }

    async fn get_application(&self, key: &AppKey) -> StoreResult<Option<Application>> {
        let key = key.clone();
        self.read(move |conn| {
            let key: &AppKey = &key;
            let (sql, value) = match key {
                AppKey::Id(id) => (
                    format!("SELECT {COLUMNS} FROM applications WHERE id = ?1"),
                    id.to_string(),
                ),
                AppKey::Uid(uid) => (
                    format!("SELECT {COLUMNS} FROM applications WHERE uid = ?1"),
                    uid.clone(),
                ),
            };
            Ok(conn
                .prepare_cached(&sql)?
                .query_row([value], read)
                .optional()?)
        })
        .await
    }

    async fn list_applications(&self, seek: &Seek) -> StoreResult<Vec<Application>> {
        let seek = seek.clone();
        self.read(move |conn| {
            let seek: &Seek = &seek;
            let sql = seek_sql(
                &format!("{COLUMNS} FROM applications"),
                &[],
                "id",
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

    async fn update_application(
        &self,
        app: AppId,
        fields: ApplicationFields,
    ) -> StoreResult<Application> {
        let now = now();
        self.write(move |conn| {
            let sql = format!(
                "UPDATE applications SET uid = ?2, name = ?3, throttle_rate = ?4, metadata = ?5,
                 updated_at = ?6 WHERE id = ?1 RETURNING {COLUMNS}"
            );
            conn.prepare_cached(&sql)?
                .query_row(
                    params![
                        app.to_string(),
                        fields.uid,
                        fields.name,
                        fields.throttle_rate,
                        to_json(&fields.metadata)?,
                        micros(now),
                    ],
                    read,
                )
                .optional()?
                .ok_or_else(|| StoreError::NotFound("application").into())
        })
        .await
    }

    async fn delete_application(&self, app: AppId) -> StoreResult<()> {
        self.write(move |conn| {
            let n = conn
                .prepare_cached("DELETE FROM applications WHERE id = ?1")?
                .execute([app.to_string()])?;
            if n == 0 {
                return Err(StoreError::NotFound("application").into());
            }
            Ok(())
        })
        .await
    }
}
