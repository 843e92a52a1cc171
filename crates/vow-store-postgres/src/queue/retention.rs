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

/// Deletes up to `$3` messages made before `$2` (ids below `$1`) whose deliveries have all
/// ended: the oldest first, as a range of the primary key; the foreign keys' cascades delete
/// their deliveries and channels through the indexes that start with the message, and the
/// deliveries' attempts through `attempts_delivery_id_idx`.
///
/// Each message's deliveries are looked up by message (`deliveries_msg_id_endpoint_id_key`),
/// whatever the statistics say. Written as a plain `NOT EXISTS (… status = 'pending')`, the
/// planner trusted statistics taken before a backlog built up ("no pending delivery") and read
/// every pending delivery for every message, through the pending-only index: on a store of
/// 11,000,000 messages with a backlog, batches took 1.6 to 11.7 s instead of milliseconds. So
/// the check is a subquery run per message (`OFFSET 0` keeps it from becoming a join), and it
/// names the statuses that have ended, which that partial index cannot answer.
const OLD_MESSAGES: &str = "
    DELETE FROM messages WHERE id IN (
        SELECT m.id FROM messages m
        WHERE m.id < $1 AND m.created_at < $2
          AND NOT EXISTS (SELECT 1 FROM deliveries d
                          WHERE d.msg_id = m.id
                            AND d.status NOT IN ('held', 'delivered', 'dead_lettered')
                          OFFSET 0)
        ORDER BY m.id
        LIMIT $3
        FOR UPDATE SKIP LOCKED)";

#[async_trait]
impl Retention for PgStore {
    async fn expunge_message_content(&self, app: AppId, msg: MessageId) -> StoreResult<()> {
        let found: i64 = sqlx::query_scalar(
            "WITH m AS (
                 UPDATE messages SET payload = NULL WHERE app_id = $1 AND id = $2 RETURNING id
             ), a AS (
                 UPDATE attempts SET response = ''
                 WHERE delivery_id IN (SELECT id FROM deliveries WHERE msg_id = $2)
                   AND app_id = $1 AND msg_id = $2 AND response <> ''
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
        let deleted = sqlx::query(OLD_MESSAGES)
            .bind(MessageId::first_at(before).to_string())
            .bind(before)
            .bind(convert::bigint_param(batch))
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(deleted.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Statistics taken while no delivery was pending, then a backlog: the plan must still look
    /// each old message's deliveries up by message, not scan the pending ones.
    #[tokio::test]
    async fn the_pending_check_looks_deliveries_up_by_message_whatever_the_statistics_say() {
        let (store, _url) = crate::testing::fresh_store().await;
        let mut conn = store.conn().await.unwrap();
        let fill = |status: &str, from: u32| {
            crate::testing::deliveries_to_ep_1(from, from + 19_999, &format!("'{status}'"))
        };
        sqlx::raw_sql(&format!(
            "{}
             {}
             ANALYZE messages, deliveries;
             {}",
            crate::testing::ONE_APP_AND_ENDPOINT,
            fill("delivered", 0),
            fill("pending", 20_000)
        ))
        .execute(&mut *conn)
        .await
        .unwrap();
        let plan: Vec<String> = sqlx::query_scalar(&format!(
            "EXPLAIN {}",
            OLD_MESSAGES
                .replace("$1", "'msg_9'")
                .replace("$2", "now()")
                .replace("$3", "500")
        ))
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        let plan = plan.join("\n");
        assert!(
            plan.contains("Index Scan using deliveries_msg_id_endpoint_id_key on deliveries d")
                && plan.contains("Index Cond: (msg_id = m.id)"),
            "{plan}"
        );
        assert!(!plan.contains("pending"), "{plan}");
    }
}
