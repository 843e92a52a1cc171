//! Removing content: an operator expunging one message's payload (and its attempts' response
//! bodies), and retention purging whatever expired, in bounded batches.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use vow_core::{AppId, MessageId};
use vow_store::StoreResult;

use crate::convert::{self, not_found};
use crate::error::db_error;

/// Clears a message's payload and its attempts' response bodies, in one statement.
/// `NotFound("message")` when `app` has no such message.
pub(crate) async fn expunge_message(pool: &PgPool, app: AppId, msg: MessageId) -> StoreResult<()> {
    let found: i64 = sqlx::query_scalar(
        "WITH m AS (
             UPDATE messages SET payload = NULL WHERE app_id = $1 AND id = $2 RETURNING id
         ), a AS (
             UPDATE attempts SET response = ''
             WHERE app_id = $1 AND msg_id = $2 AND response <> ''
         )
         SELECT count(*) FROM m",
    )
    .bind(app.to_string())
    .bind(msg.to_string())
    .fetch_one(pool)
    .await
    .map_err(db_error)?;
    if found == 0 {
        return Err(not_found("message"));
    }
    Ok(())
}

/// Clears up to `batch` payloads expired at `now` and up to `batch` response bodies of attempts
/// started before `responses_before`; returns how many rows changed. Rows another process is
/// purging (or writing) right now are skipped rather than waited for: the next run gets them.
pub(crate) async fn purge_expired(
    pool: &PgPool,
    now: DateTime<Utc>,
    responses_before: DateTime<Utc>,
    batch: usize,
) -> StoreResult<u64> {
    if batch == 0 {
        return Ok(0);
    }
    let changed: i64 = sqlx::query_scalar(
        "WITH p AS (
             UPDATE messages SET payload = NULL
             WHERE id IN (SELECT id FROM messages
                          WHERE payload IS NOT NULL AND payload_expires_at <= $1
                          LIMIT $3 FOR UPDATE SKIP LOCKED)
               AND payload IS NOT NULL
             RETURNING 1
         ), r AS (
             UPDATE attempts SET response = ''
             WHERE id IN (SELECT id FROM attempts
                          WHERE response <> '' AND started_at < $2
                          LIMIT $3 FOR UPDATE SKIP LOCKED)
               AND response <> ''
             RETURNING 1
         )
         SELECT (SELECT count(*) FROM p) + (SELECT count(*) FROM r)",
    )
    .bind(now)
    .bind(responses_before)
    .bind(convert::bigint_param(batch))
    .fetch_one(pool)
    .await
    .map_err(db_error)?;
    Ok(u64::try_from(changed).unwrap_or_default())
}
