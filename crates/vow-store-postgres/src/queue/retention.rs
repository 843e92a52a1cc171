//! Removing content: an operator expunging one message's payload (and its attempts' response
//! bodies), and retention purging whatever expired (and old activity minutes) and whole old
//! messages, in bounded batches.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{AppId, MessageId};
use vow_store::queue::Retention;
use vow_store::StoreResult;

use crate::convert::{self, not_found};
use crate::dead_letters;
use crate::error::db_error;
use crate::queue::activity;
use crate::PgStore;

#[async_trait]
impl Retention for PgStore {
    async fn expunge_message_content(&self, app: AppId, msg: MessageId) -> StoreResult<()> {
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
        .fetch_one(&self.pool)
        .await
        .map_err(db_error)?;
        if found == 0 {
            return Err(not_found("message"));
        }
        Ok(())
    }

    async fn purge_expired(
        &self,
        now: DateTime<Utc>,
        responses_before: DateTime<Utc>,
        batch: usize,
    ) -> StoreResult<u64> {
        if batch == 0 {
            return Ok(0);
        }
        let changed: i64 = sqlx::query_scalar(&format!(
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
             ), a AS ({}), n AS ({})
             SELECT (SELECT count(*) FROM p) + (SELECT count(*) FROM r) + (SELECT count(*) FROM a)
                    + (SELECT count(*) FROM n)",
            activity::PURGE,
            dead_letters::PURGE
        ))
        .bind(now)
        .bind(responses_before)
        .bind(convert::bigint_param(batch))
        .bind(activity::purge_before(now))
        .fetch_one(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(u64::try_from(changed).unwrap_or_default())
    }

    async fn purge_messages(&self, before: DateTime<Utc>, batch: usize) -> StoreResult<u64> {
        if batch == 0 {
            return Ok(0);
        }
        // The oldest first, as a range of the primary key; the foreign keys' cascades delete the
        // deliveries, attempts and channels through the indexes that start with the message.
        let deleted = sqlx::query(
            "DELETE FROM messages WHERE id IN (
                 SELECT m.id FROM messages m
                 WHERE m.id < $1 AND m.created_at < $2
                   AND NOT EXISTS (SELECT 1 FROM deliveries d
                                   WHERE d.msg_id = m.id AND d.status = 'pending')
                 ORDER BY m.id
                 LIMIT $3
                 FOR UPDATE SKIP LOCKED)",
        )
        .bind(MessageId::first_at(before).to_string())
        .bind(before)
        .bind(convert::bigint_param(batch))
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(deleted.rows_affected())
    }
}
