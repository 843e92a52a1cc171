//! Removing content: an operator expunging one message's payload (and its attempts' response
//! bodies), and retention purging whatever expired (and old activity minutes) and whole old
//! messages, in bounded batches.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::params;
use vow_core::{AppId, MessageId};
use vow_store::queue::Retention;
use vow_store::{StoreError, StoreResult};

use crate::convert::micros;
use crate::dead_letters;
use crate::queue::activity;
use crate::SqliteStore;

/// The messages [`Retention::purge_messages`] deletes. Messages are keyed by application first,
/// so the old ones are one range of the key per application (`CROSS JOIN` keeps applications
/// the outer loop), read in id order; the foreign keys' cascades delete the deliveries, attempts
/// and channels through the indexes that start with the message.
const OLD_MESSAGES: &str = "DELETE FROM messages WHERE rowid IN (
     SELECT m.rowid FROM applications a CROSS JOIN messages m ON m.app_id = a.id
     WHERE m.id < ?1 AND m.created_at < ?2
       AND NOT EXISTS (SELECT 1 FROM deliveries d
                       WHERE d.app_id = m.app_id AND d.msg_id = m.id AND d.status = 'pending')
     LIMIT ?3)";

#[async_trait]
impl Retention for SqliteStore {
    async fn expunge_message_content(&self, app: AppId, msg: MessageId) -> StoreResult<()> {
        self.write(move |conn| {
            let ids = [app.to_string(), msg.to_string()];
            let n = conn
                .prepare_cached("UPDATE messages SET payload = NULL WHERE app_id = ?1 AND id = ?2")?
                .execute(params![ids[0], ids[1]])?;
            if n == 0 {
                return Err(StoreError::NotFound("message").into());
            }
            conn.prepare_cached(
                "UPDATE attempts SET response = '' WHERE app_id = ?1 AND msg_id = ?2 AND response <> ''",
            )?
            .execute(params![ids[0], ids[1]])?;
            Ok(())
        })
        .await
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
        self.write(move |conn| {
            let batch = i64::try_from(batch).unwrap_or(i64::MAX);
            let payloads = conn
                .prepare_cached(
                    "UPDATE messages SET payload = NULL WHERE rowid IN (
                         SELECT rowid FROM messages
                          WHERE payload IS NOT NULL AND payload_expires_at <= ?1 LIMIT ?2)",
                )?
                .execute(params![micros(now), batch])?;
            let responses = conn
                .prepare_cached(
                    "UPDATE attempts SET response = '' WHERE rowid IN (
                         SELECT rowid FROM attempts WHERE response <> '' AND started_at < ?1 LIMIT ?2)",
                )?
                .execute(params![micros(responses_before), batch])?;
            let minutes = activity::purge(conn, now, batch)?;
            let notes = dead_letters::purge(conn, now, batch)?;
            Ok((payloads + responses + minutes + notes) as u64)
        })
        .await
    }

    async fn purge_messages(&self, before: DateTime<Utc>, batch: usize) -> StoreResult<u64> {
        if batch == 0 {
            return Ok(0);
        }
        self.write(move |conn| {
            let batch = i64::try_from(batch).unwrap_or(i64::MAX);
            let first_kept = MessageId::first_at(before).to_string();
            let deleted = conn.prepare_cached(OLD_MESSAGES)?.execute(params![
                first_kept,
                micros(before),
                batch
            ])?;
            Ok(deleted as u64)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{full_scan, migrated, plan};

    #[test]
    fn old_messages_are_found_by_key_range_and_their_rows_by_message() {
        let conn = migrated();
        let plan = plan(&conn, OLD_MESSAGES);
        assert!(
            plan.contains("SEARCH m USING INDEX sqlite_autoindex_messages_1 (app_id=? AND id<?)"),
            "{plan}"
        );
        assert!(
            plan.contains("SEARCH d USING INDEX deliveries_by_message (app_id=? AND msg_id=?)"),
            "{plan}"
        );
        for cascade in [
            "deliveries USING COVERING INDEX deliveries_by_message (app_id=? AND msg_id=?)",
            "attempts USING COVERING INDEX attempts_by_message (app_id=? AND msg_id=?)",
            "message_channels USING COVERING INDEX message_channels_by_message",
        ] {
            assert!(plan.contains(cascade), "{cascade}: {plan}");
        }
        for table in [
            "m",
            "messages",
            "deliveries",
            "attempts",
            "message_channels",
        ] {
            assert!(!full_scan(&plan, table), "{table}: {plan}");
        }
    }
}
