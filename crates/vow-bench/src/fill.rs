//! Filling a store with history, for scenarios that need a big one.
//!
//! Writes messages of one application straight into the database while vow is stopped, made
//! evenly over a span of time, each with one delivered delivery and one successful attempt,
//! as vow leaves them: ids made at their rows' times (retention finds messages by id range),
//! 1 KiB payloads and response bodies already cleared where vow's default 30 days of content
//! retention have passed. PostgreSQL takes `COPY` in chunks, then `VACUUM ANALYZE` (as
//! autovacuum would have left a store that grew over weeks); SQLite takes one transaction of
//! prepared inserts per chunk.

use std::fmt::Write as _;
use std::ops::Range;
use std::time::Instant;

use anyhow::Context;
use chrono::{DateTime, TimeDelta, Utc};
use sqlx::Connection;
use vow_core::{AttemptId, DeliveryId, MessageId};

use crate::vow_process::Database;

/// Messages written per chunk (one `COPY` per table, or one SQLite transaction).
const CHUNK: u64 = 100_000;

/// How long vow keeps payloads and response bodies by default.
const CONTENT_KEPT: TimeDelta = TimeDelta::days(30);

/// The stored payload's size, about that of the load's messages.
const PAYLOAD_BYTES: usize = 1000;

/// What to write: `messages` messages of `app` to `endpoint`, made evenly from `from` to `to`.
#[derive(Debug, Clone)]
pub struct History {
    /// The application.
    pub app: String,
    /// Its endpoint, which every message was delivered to.
    pub endpoint: String,
    /// How many messages.
    pub messages: u64,
    /// When the first was made.
    pub from: DateTime<Utc>,
    /// When the last was made.
    pub to: DateTime<Utc>,
}

/// One message with its delivery and attempt.
struct Row {
    msg: String,
    delivery: String,
    attempt: String,
    at: DateTime<Utc>,
    /// Still kept, or already cleared by content retention.
    payload: Option<String>,
    response: &'static str,
}

impl History {
    /// Message `i`'s rows, as of `now`.
    fn row(&self, i: u64, now: DateTime<Utc>) -> Row {
        let span = (self.to - self.from).num_microseconds().unwrap_or(0);
        let step = span / i64::try_from(self.messages.max(1)).unwrap_or(i64::MAX);
        let at = self.from + TimeDelta::microseconds(step * i64::try_from(i).unwrap_or(0));
        let kept = at + CONTENT_KEPT > now;
        Row {
            msg: MessageId::new_at(at).to_string(),
            delivery: DeliveryId::new_at(at).to_string(),
            attempt: AttemptId::new_at(at + TimeDelta::milliseconds(40)).to_string(),
            at,
            payload: kept.then(|| payload(i)),
            response: if kept { r#"{"received":true}"# } else { "" },
        }
    }
}

/// A JSON payload of [`PAYLOAD_BYTES`] tagged with `seq`.
fn payload(seq: u64) -> String {
    let head = format!(r#"{{"seq":{seq},"pad":""#);
    let pad = PAYLOAD_BYTES.saturating_sub(head.len() + 2);
    format!("{head}{}\"}}", "x".repeat(pad))
}

/// Writes `history` into `db` (vow stopped), printing progress.
pub async fn fill(db: &Database, history: &History) -> anyhow::Result<()> {
    let started = Instant::now();
    let now = Utc::now();
    if db.is_postgres() {
        let mut conn = sqlx::PgConnection::connect(&db.url()).await?;
        for range in chunks(history.messages) {
            let end = range.end;
            copy_chunk(&mut conn, history, range, now).await?;
            progress(end, history.messages, started);
        }
        eprintln!("vacuuming and analyzing");
        sqlx::raw_sql("VACUUM (ANALYZE) messages, deliveries, attempts")
            .execute(&mut conn)
            .await?;
    } else {
        let (path, history) = (db.sqlite_path(), history.clone());
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            let mut conn = rusqlite::Connection::open(path)?;
            conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;")?;
            for range in chunks(history.messages) {
                let end = range.end;
                insert_chunk(&mut conn, &history, range, now)?;
                progress(end, history.messages, started);
            }
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
            Ok(())
        })
        .await??;
    }
    eprintln!(
        "filled {} messages in {:.0} s",
        history.messages,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `0..n` in ranges of [`CHUNK`].
fn chunks(n: u64) -> impl Iterator<Item = Range<u64>> {
    (0..n.div_ceil(CHUNK)).map(move |c| c * CHUNK..((c + 1) * CHUNK).min(n))
}

/// Prints how far the fill is, every ten chunks and at the end.
fn progress(done: u64, of: u64, started: Instant) {
    if done.is_multiple_of(10 * CHUNK) || done == of {
        eprintln!(
            "filled {done} of {of} messages ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
    }
}

/// PostgreSQL: one `COPY` per table for messages `range`.
async fn copy_chunk(
    conn: &mut sqlx::PgConnection,
    h: &History,
    range: Range<u64>,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    let (mut messages, mut deliveries, mut attempts) =
        (String::new(), String::new(), String::new());
    for i in range {
        let r = h.row(i, now);
        let at = r.at.to_rfc3339();
        let expires = (r.at + CONTENT_KEPT).to_rfc3339();
        let payload = r.payload.as_deref().unwrap_or("\\N");
        let (app, ep) = (&h.app, &h.endpoint);
        writeln!(
            messages,
            "{}\t{app}\tbench.event\t{payload}\t{expires}\t{at}",
            r.msg
        )?;
        writeln!(
            deliveries,
            "{}\t{app}\t{}\t{ep}\tdelivered\t1\t{at}\t{at}\t200\t{at}",
            r.delivery, r.msg
        )?;
        writeln!(
            attempts,
            "{}\t{app}\t{}\t{ep}\t{}\t{at}\thttp://127.0.0.1/\t200\t{}\t40\ttrue\tscheduled",
            r.attempt, r.msg, r.delivery, r.response
        )?;
    }
    for (table, columns, data) in [
        (
            "messages",
            "id, app_id, event_type, payload, payload_expires_at, created_at",
            messages,
        ),
        (
            "deliveries",
            "id, app_id, msg_id, endpoint_id, status, attempts, next_attempt_at, created_at, \
             last_status, updated_at",
            deliveries,
        ),
        (
            "attempts",
            "id, app_id, msg_id, endpoint_id, delivery_id, started_at, url, response_status, \
             response, duration_ms, success, trigger",
            attempts,
        ),
    ] {
        let mut copy = conn
            .copy_in_raw(&format!("COPY {table} ({columns}) FROM STDIN"))
            .await
            .with_context(|| format!("starting COPY {table}"))?;
        copy.send(data.into_bytes()).await?;
        copy.finish()
            .await
            .with_context(|| format!("COPY {table}"))?;
    }
    Ok(())
}

/// SQLite: one transaction of inserts for messages `range`.
fn insert_chunk(
    conn: &mut rusqlite::Connection,
    h: &History,
    range: Range<u64>,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut message = tx.prepare_cached(
            "INSERT INTO messages (id, app_id, event_type, payload, payload_expires_at,
                                   created_at)
             VALUES (?1, ?2, 'bench.event', ?3, ?4, ?5)",
        )?;
        let mut delivery = tx.prepare_cached(
            "INSERT INTO deliveries (id, app_id, msg_id, endpoint_id, status, attempts,
                                     next_attempt_at, created_at, last_status, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'delivered', 1, ?5, ?5, 200, ?5)",
        )?;
        let mut attempt = tx.prepare_cached(
            "INSERT INTO attempts (id, app_id, msg_id, endpoint_id, delivery_id, started_at,
                                   url, response_status, response, duration_ms, success,
                                   trigger)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'http://127.0.0.1/', 200, ?7, 40, 1, 'scheduled')",
        )?;
        for i in range {
            let r = h.row(i, now);
            let at = r.at.timestamp_micros();
            let expires = (r.at + CONTENT_KEPT).timestamp_micros();
            message.execute(rusqlite::params![r.msg, h.app, r.payload, expires, at])?;
            delivery.execute(rusqlite::params![r.delivery, h.app, r.msg, h.endpoint, at])?;
            attempt.execute(rusqlite::params![
                r.attempt, h.app, r.msg, h.endpoint, r.delivery, at, r.response
            ])?;
        }
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_message_once() {
        assert_eq!(chunks(0).count(), 0);
        let ranges: Vec<_> = chunks(2 * CHUNK + 1).collect();
        assert_eq!(
            ranges,
            [0..CHUNK, CHUNK..2 * CHUNK, 2 * CHUNK..2 * CHUNK + 1]
        );
    }

    #[test]
    fn rows_are_spread_evenly_and_their_content_is_cleared_after_30_days() {
        let now = Utc::now();
        let h = History {
            app: "app_x".into(),
            endpoint: "ep_x".into(),
            messages: 100,
            from: now - TimeDelta::days(100),
            to: now,
        };
        let (first, half, last) = (h.row(0, now), h.row(50, now), h.row(99, now));
        assert_eq!(first.at, h.from);
        assert_eq!(half.at, now - TimeDelta::days(50));
        let made = MessageId::parse(&first.msg).unwrap().made_at();
        assert!(made <= h.from && h.from - made < TimeDelta::milliseconds(1));
        assert!(first.msg < half.msg && half.msg < last.msg);
        assert_eq!((first.payload, first.response), (None, ""));
        assert_eq!(last.payload.as_ref().map(String::len), Some(PAYLOAD_BYTES));
        assert!(serde_json::from_str::<serde_json::Value>(&last.payload.unwrap()).is_ok());
        assert_eq!(last.response, r#"{"received":true}"#);
    }
}
