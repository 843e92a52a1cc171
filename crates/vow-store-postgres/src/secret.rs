//! Endpoint signing secrets: one current secret (`valid_until IS NULL`, at most one per endpoint
//! by a partial unique index) and the rotated-out ones, each valid until the end of its grace
//! period. Rows are never updated otherwise and only deleted with their endpoint.

use chrono::{DateTime, Utc};
use sqlx::{Connection, PgConnection, PgPool};
use vow_core::{AppId, EndpointId};
use vow_store::{EndpointSecret, StoreResult};

use crate::convert::not_found;
use crate::error::db_error;

/// The secrets valid at `now`: the current one first, then rotated-out ones whose grace period
/// ends after `now`, newest first.
pub(crate) async fn valid_at(
    pool: &PgPool,
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
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    if rows.is_empty() {
        // Every endpoint has a current secret, so no rows means no endpoint; check to be sure.
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM endpoints WHERE app_id = $1 AND id = $2)",
        )
        .bind(&app)
        .bind(&id)
        .fetch_one(pool)
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

/// Makes `new_key` current, the previous current secret valid until `old_valid_until`. The
/// endpoint row is locked (`FOR NO KEY UPDATE`: rotations of one endpoint take turns, deliveries
/// may still be written for it) so two rotations cannot both retire the same secret.
pub(crate) async fn rotate(
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
