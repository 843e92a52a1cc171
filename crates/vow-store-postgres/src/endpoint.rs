//! Endpoints of an application. Every query is scoped by `app_id`, so an endpoint id that
//! exists under another application is simply not found. An endpoint is created together with
//! its first secret (see `secret` for the rest of the secrets' life).

use crate::idempotency::{keyed, step};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{Connection, PgConnection, Postgres, QueryBuilder};
use vow_core::{AppId, EndpointId, MessageId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::rows::FromColumns;
use vow_store::EndpointSecret;
use vow_store::Endpoints;
use vow_store::{Endpoint, EndpointFields, EndpointKey, NewEndpoint, Seek, StoreResult};

use crate::convert::{self, not_found, read};
use crate::error::db_error;
use crate::seek::push_seek;
use crate::PgStore;

const COLUMNS: &str = Endpoint::COLUMNS;

/// Inserts the endpoint and its first secret in one transaction (a savepoint inside the caller's). The application's absence
/// shows up as the foreign key `endpoints_app_id_fkey` (→ `NotFound("application")`), a taken
/// uid as `endpoints_app_id_uid_key` (→ `Conflict`).
pub(crate) async fn create(conn: &mut PgConnection, new: NewEndpoint) -> StoreResult<Endpoint> {
    let f = new.fields;
    let (style, timeout_ms, schedule) = convert::delivery_options_params(&f.delivery)?;
    let app_id = new.app_id.to_string();
    let id = new.id.to_string();
    let mut tx = conn.begin().await.map_err(db_error)?;
    let row = sqlx::query(&format!(
        "INSERT INTO endpoints
             (id, app_id, uid, url, description, disabled, event_types, channels, throttle_rate,
              metadata, headers, signature_style, timeout_ms, retry_schedule, created_at,
              updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $13, $14, $15, $12, $12)
         RETURNING {COLUMNS}"
    ))
    .bind(&id)
    .bind(&app_id)
    .bind(f.uid)
    .bind(f.url)
    .bind(f.description)
    .bind(f.disabled)
    .bind(f.event_types)
    .bind(f.channels)
    .bind(convert::rate_param(f.throttle_rate))
    .bind(Json(f.metadata))
    .bind(Json(f.headers))
    .bind(new.now)
    .bind(style)
    .bind(timeout_ms)
    .bind(schedule)
    .try_map(read::<Endpoint>)
    .fetch_one(&mut *tx)
    .await
    .map_err(db_error)?;
    sqlx::query(
        "INSERT INTO endpoint_secrets (app_id, endpoint_id, key, created_at)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(&app_id)
    .bind(&id)
    .bind(new.secret)
    .bind(new.now)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(row)
}

/// An application's endpoints; with `msg`, only those that message has a delivery to.
pub(crate) async fn list<'c>(
    ex: impl sqlx::PgExecutor<'c>,
    app: AppId,
    msg: Option<MessageId>,
    seek: &Seek,
) -> StoreResult<Vec<Endpoint>> {
    let mut qb =
        QueryBuilder::<Postgres>::new(format!("SELECT {COLUMNS} FROM endpoints WHERE app_id = "));
    qb.push_bind(app.to_string());
    if let Some(msg) = msg {
        qb.push(" AND id IN (SELECT endpoint_id FROM deliveries WHERE app_id = endpoints.app_id")
            .push(" AND msg_id = ")
            .push_bind(msg.to_string())
            .push(")");
    }
    push_seek(&mut qb, "id", seek);
    qb.build()
        .try_map(read::<Endpoint>)
        .fetch_all(ex)
        .await
        .map_err(db_error)
}

// ---- signing secrets ----------------------------------------------------------------------------
//
// Endpoint signing secrets: one current secret (`valid_until IS NULL`, at most one per endpoint
// by a partial unique index) and the rotated-out ones, each valid until the end of its grace
// period. Rows are never updated otherwise and only deleted with their endpoint.

/// Makes `new_key` current, the previous current secret valid until `old_valid_until`. The
/// endpoint row is locked (`FOR NO KEY UPDATE`: rotations of one endpoint take turns, deliveries
/// may still be written for it) so two rotations cannot both retire the same secret.
pub(crate) async fn rotate_secret(
    conn: &mut PgConnection,
    app: AppId,
    id: EndpointId,
    new_key: String,
    old_valid_until: DateTime<Utc>,
) -> StoreResult<()> {
    let app = app.to_string();
    let id = id.to_string();
    let mut tx = conn.begin().await.map_err(db_error)?;
    sqlx::query("SELECT 1 FROM endpoints WHERE app_id = $1 AND id = $2 FOR NO KEY UPDATE")
        .bind(&app)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?
        .ok_or_else(|| not_found("endpoint"))?;
    sqlx::query(
        "UPDATE endpoint_secrets SET valid_until = $3
         WHERE app_id = $1 AND endpoint_id = $2 AND valid_until IS NULL",
    )
    .bind(&app)
    .bind(&id)
    .bind(old_valid_until)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    sqlx::query(
        "INSERT INTO endpoint_secrets (app_id, endpoint_id, key, created_at)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(&app)
    .bind(&id)
    .bind(new_key)
    .bind(Utc::now())
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)
}

#[async_trait]
impl Endpoints for PgStore {
    async fn create_endpoint_keyed(
        &self,
        new: NewEndpoint,
        completion: Option<Completion<Endpoint>>,
    ) -> StoreResult<Applied<Endpoint>> {
        let write = step(move |tx| Box::pin(create(tx, new)));
        keyed(&self.pool, completion, write).await
    }

    async fn get_endpoint(&self, app: AppId, key: &EndpointKey) -> StoreResult<Option<Endpoint>> {
        let (column, value) = match key {
            EndpointKey::Id(id) => ("id", id.to_string()),
            EndpointKey::Uid(uid) => ("uid", uid.clone()),
        };
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM endpoints WHERE app_id = $1 AND {column} = $2"
        ))
        .bind(app.to_string())
        .bind(value)
        .try_map(read::<Endpoint>)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)
    }

    async fn list_endpoints(&self, app: AppId, seek: &Seek) -> StoreResult<Vec<Endpoint>> {
        list(&self.pool, app, None, seek).await
    }

    async fn update_endpoint(
        &self,
        app: AppId,
        id: EndpointId,
        f: EndpointFields,
    ) -> StoreResult<Endpoint> {
        let (style, timeout_ms, schedule) = convert::delivery_options_params(&f.delivery)?;
        // No clock in the trait here; `updated_at` never moves backwards (see application.rs).
        sqlx::query(&format!(
            "UPDATE endpoints
             SET uid = $3, url = $4, description = $5, disabled = $6, event_types = $7,
                 disabled_reason = CASE WHEN $6 THEN disabled_reason END, channels = $8, throttle_rate = $9, metadata = $10, headers = $11,
                 signature_style = $13, timeout_ms = $14, retry_schedule = $15,
                 updated_at = GREATEST(updated_at, $12)
             WHERE app_id = $1 AND id = $2
             RETURNING {COLUMNS}"
        ))
        .bind(app.to_string())
        .bind(id.to_string())
        .bind(f.uid)
        .bind(f.url)
        .bind(f.description)
        .bind(f.disabled)
        .bind(f.event_types)
        .bind(f.channels)
        .bind(convert::rate_param(f.throttle_rate))
        .bind(Json(f.metadata))
        .bind(Json(f.headers))
        .bind(Utc::now())
        .bind(style)
        .bind(timeout_ms)
        .bind(schedule)
        .try_map(read::<Endpoint>)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .ok_or_else(|| not_found("endpoint"))
    }

    async fn delete_endpoint(&self, app: AppId, id: EndpointId) -> StoreResult<()> {
        let done = sqlx::query("DELETE FROM endpoints WHERE app_id = $1 AND id = $2")
            .bind(app.to_string())
            .bind(id.to_string())
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        if done.rows_affected() == 0 {
            return Err(not_found("endpoint"));
        }
        Ok(())
    }

    async fn endpoint_secrets(
        &self,
        app: AppId,
        id: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<EndpointSecret>> {
        let app = app.to_string();
        let id = id.to_string();
        let rows: Vec<(String, Option<DateTime<Utc>>)> = sqlx::query_as(
            "SELECT key, valid_until FROM endpoint_secrets
             WHERE app_id = $1 AND endpoint_id = $2 AND (valid_until IS NULL OR valid_until > $3)
             ORDER BY valid_until IS NULL DESC, seq DESC",
        )
        .bind(&app)
        .bind(&id)
        .bind(now)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        if rows.is_empty() {
            // Every endpoint has a current secret, so no rows means no endpoint; check to be sure.
            let exists: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM endpoints WHERE app_id = $1 AND id = $2)",
            )
            .bind(&app)
            .bind(&id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error)?;
            if !exists {
                return Err(not_found("endpoint"));
            }
        }
        Ok(rows
            .into_iter()
            .map(|(key, valid_until)| EndpointSecret { key, valid_until })
            .collect())
    }

    async fn rotate_endpoint_secret_keyed(
        &self,
        app: AppId,
        id: EndpointId,
        new_key: String,
        old_valid_until: DateTime<Utc>,
        completion: Option<Completion<()>>,
    ) -> StoreResult<Applied<()>> {
        let write = step(move |tx| Box::pin(rotate_secret(tx, app, id, new_key, old_valid_until)));
        keyed(&self.pool, completion, write).await
    }
}
