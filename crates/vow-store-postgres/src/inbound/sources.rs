//! Sources of inbound webhooks: one row each, with the scheme's settings, the secrets, the
//! locators and the destinations as JSONB. A taken token is `sources_token_key` (→ `Conflict`).

use crate::idempotency::{keyed, step};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder};
use vow_core::SourceId;
use vow_store::idempotency::{Applied, Completion};
use vow_store::inbound::Sources;
use vow_store::inbound::{NewSource, Source, SourceFields};
use vow_store::rows::{FromColumns, SOURCE_FIELDS};
use vow_store::{Seek, StoreResult};

use crate::convert::{self, not_found, read};
use crate::error::db_error;
use crate::seek::push_seek;
use crate::PgStore;

const COLUMNS: &str = Source::COLUMNS;

/// The replaceable columns ([`SOURCE_FIELDS`]), bound in this order by [`bind_fields`].
const FIELDS: [&str; 11] = SOURCE_FIELDS;

type SourceQuery<'q> = Query<'q, Postgres, PgArguments>;

/// Binds the values of [`FIELDS`], as stored.
fn bind_fields(query: SourceQuery<'_>, f: SourceFields) -> SourceQuery<'_> {
    query
        .bind(f.description)
        .bind(f.scheme)
        .bind(f.hmac.map(Json))
        .bind(Json(f.secrets))
        .bind(convert::int_param(f.tolerance_secs))
        .bind(f.event_id.map(Json))
        .bind(f.account.map(Json))
        .bind(f.version_pointer)
        .bind(f.entity_pointer)
        .bind(Json(f.destinations))
        .bind(f.replay_window_secs.map(convert::int_param))
}

/// `$from`, `$from + 1`, … for each of [`FIELDS`].
fn placeholders(from: usize) -> impl Iterator<Item = (&'static str, String)> {
    FIELDS
        .iter()
        .enumerate()
        .map(move |(i, column)| (*column, format!("${}", i + from)))
}

pub(crate) async fn create(conn: &mut PgConnection, new: NewSource) -> StoreResult<Source> {
    // $1 id, $2 token, $3 the time, then the fields from $4 on.
    let values: Vec<String> = placeholders(4).map(|(_, p)| p).collect();
    let sql = format!(
        "INSERT INTO sources (id, token, created_at, updated_at, {})
         VALUES ($1, $2, $3, $3, {}) RETURNING {COLUMNS}",
        FIELDS.join(", "),
        values.join(", ")
    );
    let query = sqlx::query(&sql)
        .bind(new.id.to_string())
        .bind(new.token)
        .bind(new.now);
    bind_fields(query, new.fields)
        .try_map(read::<Source>)
        .fetch_one(conn)
        .await
        .map_err(db_error)
}

/// The source whose `column` (a trusted name) is `value`.
async fn by(pool: &PgPool, column: &str, value: &str) -> StoreResult<Option<Source>> {
    sqlx::query(&format!(
        "SELECT {COLUMNS} FROM sources WHERE {column} = $1"
    ))
    .bind(value)
    .try_map(read::<Source>)
    .fetch_optional(pool)
    .await
    .map_err(db_error)
}

#[async_trait]
impl Sources for PgStore {
    async fn create_source_keyed(
        &self,
        new: NewSource,
        completion: Option<Completion<Source>>,
    ) -> StoreResult<Applied<Source>> {
        let write = step(move |tx| Box::pin(create(tx, new)));
        keyed(&self.pool, completion, write).await
    }

    async fn get_source(&self, id: SourceId) -> StoreResult<Option<Source>> {
        by(&self.pool, "id", &id.to_string()).await
    }

    async fn get_source_by_token(&self, token: &str) -> StoreResult<Option<Source>> {
        by(&self.pool, "token", token).await
    }

    async fn list_sources(&self, seek: &Seek) -> StoreResult<Vec<Source>> {
        let mut qb =
            QueryBuilder::<Postgres>::new(format!("SELECT {COLUMNS} FROM sources WHERE TRUE"));
        push_seek(&mut qb, "id", seek);
        qb.build()
            .try_map(read::<Source>)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)
    }

    async fn update_source(
        &self,
        id: SourceId,
        f: SourceFields,
        now: DateTime<Utc>,
    ) -> StoreResult<Source> {
        // $1 id, $2 the time, then the fields from $3 on.
        let set: Vec<String> = placeholders(3).map(|(c, p)| format!("{c} = {p}")).collect();
        let sql = format!(
            "UPDATE sources SET {}, updated_at = $2 WHERE id = $1 RETURNING {COLUMNS}",
            set.join(", ")
        );
        let query = sqlx::query(&sql).bind(id.to_string()).bind(now);
        bind_fields(query, f)
            .try_map(read::<Source>)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error)?
            .ok_or_else(|| not_found("source"))
    }

    async fn delete_source(&self, id: SourceId) -> StoreResult<()> {
        let done = sqlx::query("DELETE FROM sources WHERE id = $1")
            .bind(id.to_string())
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        if done.rows_affected() == 0 {
            return Err(not_found("source"));
        }
        Ok(())
    }
}
