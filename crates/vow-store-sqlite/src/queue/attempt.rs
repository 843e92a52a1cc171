//! The attempts log: writing an attempt row, listing and reading them per application.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use vow_core::{AppId, AttemptId, EndpointId, MessageId};
use vow_store::queue::Attempts;
use vow_store::queue::{
    Attempt, AttemptFilter, NewAttempt, RecentAttempt, StatusClass, TailFilter, TailScope,
    TailedAttempt,
};
use vow_store::rows::FromColumns;
use vow_store::StoreResult;
use vow_store::{Seek, StoreError};

use crate::convert::{micros, read, seek_sql, to_json};
use crate::error::Result;
use crate::SqliteStore;

const COLUMNS: &str = Attempt::COLUMNS;

/// The ids an attempt row hangs off, as stored (TEXT).
pub(crate) struct Owner<'a> {
    pub(crate) app: &'a str,
    pub(crate) msg: &'a str,
    pub(crate) endpoint: &'a str,
    pub(crate) delivery: &'a str,
}

/// Inserts one attempt row. A reused attempt id is a `Conflict`.
pub(crate) fn insert(conn: &Connection, owner: &Owner<'_>, a: &NewAttempt) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO attempts (id, app_id, msg_id, endpoint_id, delivery_id, started_at, url,
         response_status, response, duration_ms, success, error, trigger)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        a.id.to_string(),
        owner.app,
        owner.msg,
        owner.endpoint,
        owner.delivery,
        micros(a.started_at),
        a.url,
        a.response_status,
        a.response,
        i64::try_from(a.duration_ms).unwrap_or(i64::MAX),
        a.success,
        a.error,
        a.trigger.as_str(),
    ])?;
    Ok(())
}

#[async_trait]
impl Attempts for SqliteStore {
    async fn list_attempts(
        &self,
        app: AppId,
        filter: &AttemptFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<Attempt>> {
        let filter = filter.clone();
        let seek = seek.clone();
        self.read(move |conn| {
            let filter: &AttemptFilter = &filter;
            let seek: &Seek = &seek;
            // As for messages: only the conditions in use appear, every parameter is always bound.
            let mut filters = vec!["app_id = ?1"];
            if filter.msg_id.is_some() {
                filters.push("msg_id = ?2");
            }
            if filter.endpoint_id.is_some() {
                filters.push("endpoint_id = ?3");
            }
            if filter.success.is_some() {
                filters.push("success = ?4");
            }
            if filter.status_code.is_some() {
                filters.push("response_status = ?5");
            }
            if filter.before.is_some() {
                filters.push("started_at < ?6");
            }
            if filter.after.is_some() {
                filters.push("started_at > ?7");
            }
            match filter.status_class.map(StatusClass::range) {
                None => {}
                Some(None) => filters.push("response_status IS NULL"),
                Some(Some(_)) => filters.push("response_status BETWEEN ?10 AND ?11"),
            }
            if !filter.event_types.is_empty() {
                filters.push(
                    "msg_id IN (SELECT id FROM messages WHERE app_id = ?1
                     AND event_type IN (SELECT value FROM json_each(?8)))",
                );
            }
            if filter.channel.is_some() {
                filters.push(
                    "msg_id IN (SELECT msg_id FROM message_channels
                     WHERE app_id = ?1 AND channel = ?9)",
                );
            }
            let class = filter.status_class.and_then(StatusClass::range);
            let event_types = (!filter.event_types.is_empty())
                .then(|| to_json(&filter.event_types))
                .transpose()?;
            let sql = seek_sql(
                &format!("{COLUMNS} FROM attempts"),
                &filters,
                "id",
                seek,
                12,
                13,
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(
                params![
                    app.to_string(),
                    filter.msg_id.map(|m| m.to_string()),
                    filter.endpoint_id.map(|e| e.to_string()),
                    filter.success,
                    filter.status_code,
                    filter.before.map(micros),
                    filter.after.map(micros),
                    event_types,
                    filter.channel,
                    class.map(|(low, _)| low),
                    class.map(|(_, high)| high),
                    seek.after,
                    seek.fetch(),
                ],
                read,
            )?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn recent_attempts(
        &self,
        app: AppId,
        endpoints: &[EndpointId],
        each: usize,
    ) -> StoreResult<Vec<RecentAttempt>> {
        let endpoints = endpoints.to_vec();
        let each = i64::try_from(each).unwrap_or(i64::MAX);
        self.read(move |conn| {
            // One indexed range (attempts_by_endpoint) per endpoint, in one read transaction.
            let sql = format!(
                "SELECT {} FROM attempts WHERE app_id = ?1 AND endpoint_id = ?2
                 ORDER BY id DESC LIMIT ?3",
                RecentAttempt::COLUMNS
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let app = app.to_string();
            let mut outcomes = Vec::new();
            for endpoint in endpoints {
                let rows = stmt.query_map(params![app, endpoint.to_string(), each], read)?;
                for row in rows {
                    outcomes.push(row?);
                }
            }
            Ok(outcomes)
        })
        .await
    }

    async fn tail_attempts(
        &self,
        filter: &TailFilter,
        after: AttemptId,
        limit: usize,
    ) -> StoreResult<Vec<TailedAttempt>> {
        let filter = filter.clone();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&tail_sql(&filter))?;
            let rows = stmt.query_map(
                params![
                    after.to_string(),
                    filter.scope.app().map(|a| a.to_string()),
                    filter.scope.endpoint().map(|e| e.to_string()),
                    filter.success,
                    limit,
                ],
                read,
            )?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn get_attempt(
        &self,
        app: AppId,
        msg: MessageId,
        attempt: AttemptId,
    ) -> StoreResult<Option<Attempt>> {
        self.read(move |conn| {
            let sql = format!(
                "SELECT {COLUMNS} FROM attempts WHERE id = ?1 AND app_id = ?2 AND msg_id = ?3"
            );
            Ok(conn
                .prepare_cached(&sql)?
                .query_row(
                    [attempt.to_string(), app.to_string(), msg.to_string()],
                    read,
                )
                .optional()?)
        })
        .await
    }

    async fn expunge_attempt_content(
        &self,
        app: AppId,
        msg: MessageId,
        attempt: AttemptId,
    ) -> StoreResult<()> {
        self.write(move |conn| {
            let n = conn
                .prepare_cached(
                    "UPDATE attempts SET response = '' WHERE id = ?1 AND app_id = ?2 AND msg_id = ?3",
                )?
                .execute([attempt.to_string(), app.to_string(), msg.to_string()])?;
            if n == 0 {
                return Err(StoreError::NotFound("attempt").into());
            }
            Ok(())
        })
        .await
    }
}

/// The tail read of `filter`'s shape: `?1` the cursor, `?2` the application, `?3` the endpoint,
/// `?4` success, `?5` the limit (every parameter is always bound; only the conditions in use
/// appear). Each shape is one index range from the cursor on: the endpoint's
/// (`attempts_by_endpoint`), else the id's. There is no `(app_id, id)` index, so the unary `+`
/// keeps the planner off the by-message index (all of an application's attempts, sorted) and on
/// the id range (the attempts made since the cursor, of every application). The attempts are
/// the outer loop (`CROSS JOIN`); the message and delivery are one lookup each.
fn tail_sql(filter: &TailFilter) -> String {
    let mut conditions = vec!["a.id > ?1"];
    match filter.scope {
        TailScope::Endpoint(..) => conditions.push("a.app_id = ?2 AND a.endpoint_id = ?3"),
        TailScope::App(_) => conditions.push("+a.app_id = ?2"),
        TailScope::All => {}
    }
    if filter.success.is_some() {
        conditions.push("a.success = ?4");
    }
    format!(
        "SELECT {} FROM attempts a
           CROSS JOIN messages m ON m.app_id = a.app_id AND m.id = a.msg_id
           CROSS JOIN deliveries d ON d.id = a.delivery_id
          WHERE {}
          ORDER BY a.id LIMIT ?5",
        TailedAttempt::COLUMNS,
        conditions.join(" AND ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{full_scan, migrated, plan};

    #[test]
    fn a_tail_reads_one_index_range_from_its_cursor_whatever_its_filter() {
        let conn = migrated();
        let (app, endpoint) = (AppId::new(), EndpointId::new());
        for (filter, index) in [
            (TailFilter::default(), "sqlite_autoindex_attempts_1 (id>?)"),
            (
                TailFilter {
                    scope: TailScope::App(app),
                    ..TailFilter::default()
                },
                "sqlite_autoindex_attempts_1 (id>?)",
            ),
            (
                TailFilter {
                    scope: TailScope::Endpoint(app, endpoint),
                    success: Some(false),
                },
                "attempts_by_endpoint (app_id=? AND endpoint_id=? AND id>?)",
            ),
        ] {
            let sql = tail_sql(&filter);
            let plan = plan(&conn, &sql);
            assert!(plan.contains(index), "{filter:?}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{filter:?}: {plan}");
            assert!(
                plan.contains("SEARCH p USING INDEX attempts_by_message"),
                "an attempt's number is counted within its message: {plan}"
            );
            for table in ["attempts", "messages", "deliveries"] {
                assert!(!full_scan(&plan, table), "{filter:?}: {plan}");
            }
        }
    }
}
