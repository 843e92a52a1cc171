//! The record store on SQLite (feature `sqlite`), times in integer microseconds like the rest of
//! vow. The host runs [`SCHEMA`] in its migrations.
//!
//! [`begin`] runs in autocommit (its own short transactions), never inside the host's write
//! transaction: the claim must be visible to concurrent requests. [`fence`] and [`complete`] run
//! inside the host's transaction with its business writes, so a fenced owner rolls back.

use chrono::{DateTime, Utc};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, ParamsFromIter, ToSql};

use crate::columns::{self, Columns};
use crate::error::{Error, Result};
use crate::record::{
    self, decide, Begun, Decision, LeaseToken, Recorded, Scope, Settings, StoredResponse,
};
use crate::status::{self, KeyStatus, StatusRow};
use crate::Fingerprint;

/// The table and its indexes (idempotent).
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency_records (
    principal           TEXT    NOT NULL,
    application         TEXT    NOT NULL,
    method              TEXT    NOT NULL,
    route               TEXT    NOT NULL,
    key                 TEXT    NOT NULL,
    state               TEXT    NOT NULL
                        CHECK (state = 'in_progress' OR state = 'completed' OR state = 'tombstone'),
    fingerprint_version INTEGER NOT NULL,
    fingerprint         TEXT    NOT NULL,
    canonical_body      TEXT,
    lease_token         TEXT    NOT NULL,
    lease_until         INTEGER NOT NULL,
    response_status     INTEGER,
    response_headers    TEXT,
    response_body       BLOB,
    resource            TEXT,
    expires_at          INTEGER NOT NULL,
    tombstone_until     INTEGER NOT NULL,
    PRIMARY KEY (principal, application, method, route, key)
);
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at
    ON idempotency_records (expires_at);
CREATE INDEX IF NOT EXISTS idempotency_records_tombstone_until
    ON idempotency_records (tombstone_until);
CREATE INDEX IF NOT EXISTS idempotency_records_in_progress
    ON idempotency_records (lease_until) WHERE state = 'in_progress';
";

/// `?1`..`?5`: the scope.
const WHERE_SCOPE: &str =
    "principal = ?1 AND application = ?2 AND method = ?3 AND route = ?4 AND key = ?5";

/// Claims the scope for this request, or says why not (see [`Begun`]). Inserts first and reads
/// the row it lost to only then; an expired lease or an ended tombstone is taken over by a
/// conditional `UPDATE` on the old token.
pub fn begin(
    conn: &Connection,
    scope: &Scope,
    fingerprint: &Fingerprint,
    canonical_body: &str,
    now: DateTime<Utc>,
    settings: &Settings,
) -> Result<Begun> {
    let d = settings.deadlines(now);
    let fp_hex = fingerprint.hex();
    for _ in 0..record::ATTEMPTS {
        let token = LeaseToken::generate();
        let fresh: [&dyn ToSql; 7] = [
            &fingerprint.version,
            &fp_hex,
            &canonical_body,
            &token.0,
            &d.lease_until.timestamp_micros(),
            &d.expires_at.timestamp_micros(),
            &d.tombstone_until.timestamp_micros(),
        ];
        if claim(
            conn,
            scope,
            fingerprint,
            canonical_body,
            &token,
            now,
            settings,
        )? {
            return Ok(Begun::Owner(token));
        }
        let Some(row) = read(conn, scope)? else {
            continue; // released between our insert and read
        };
        match decide(&row, fingerprint, canonical_body, now) {
            Decision::Answer(begun) => return Ok(begun),
            Decision::TakeOver => {
                let sql = format!(
                    "UPDATE idempotency_records SET state = 'in_progress', \
                     fingerprint_version = ?6, fingerprint = ?7, canonical_body = ?8, \
                     lease_token = ?9, lease_until = ?10, expires_at = ?11, \
                     tombstone_until = ?12, response_status = NULL, response_headers = NULL, \
                     response_body = NULL, resource = NULL \
                     WHERE {WHERE_SCOPE} AND lease_token = ?13 AND \
                     ((state = 'in_progress' AND lease_until <= ?14) OR tombstone_until <= ?14)"
                );
                let mut all = fresh.to_vec();
                let now_us = now.timestamp_micros();
                all.extend([&row.lease_token.0 as &dyn ToSql, &now_us]);
                if conn.prepare_cached(&sql)?.execute(bind(scope, &all)?)? == 1 {
                    return Ok(Begun::TakenOver(token));
                }
            }
        }
    }
    Ok(record::contended())
}

/// Inserts an `in_progress` row for the scope.
const INSERT: &str = "INSERT INTO idempotency_records (principal, application, method, route, \
     key, state, fingerprint_version, fingerprint, canonical_body, lease_token, lease_until, \
     expires_at, tombstone_until) \
     VALUES (?1, ?2, ?3, ?4, ?5, 'in_progress', ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
     ON CONFLICT DO NOTHING";

/// Claims a scope that has no record, for `token` (an `in_progress` row with a fresh lease):
/// [`begin`]'s first step. `false` when the scope has a record.
pub fn claim(
    conn: &Connection,
    scope: &Scope,
    fingerprint: &Fingerprint,
    canonical_body: &str,
    token: &LeaseToken,
    now: DateTime<Utc>,
    settings: &Settings,
) -> Result<bool> {
    let d = settings.deadlines(now);
    let values: [&dyn ToSql; 7] = [
        &fingerprint.version,
        &fingerprint.hex(),
        &canonical_body,
        &token.0,
        &d.lease_until.timestamp_micros(),
        &d.expires_at.timestamp_micros(),
        &d.tombstone_until.timestamp_micros(),
    ];
    Ok(conn
        .prepare_cached(INSERT)?
        .execute(bind(scope, &values)?)?
        == 1)
}

/// Checks, inside the host's transaction and before its business writes, that `token` still owns
/// the record: [`Error::Fenced`] if not.
pub fn fence(conn: &Connection, scope: &Scope, token: &LeaseToken) -> Result<()> {
    let sql = format!(
        "SELECT 1 FROM idempotency_records \
         WHERE {WHERE_SCOPE} AND state = 'in_progress' AND lease_token = ?6"
    );
    let found: Option<i64> = conn
        .prepare_cached(&sql)?
        .query_row(bind(scope, &[&token.0])?, |r| r.get(0))
        .optional()?;
    found.map(drop).ok_or(Error::Fenced)
}

/// Stores `response` and marks the record completed, inside the host's transaction with its
/// business writes. [`Error::Fenced`] when `token` no longer owns the record: roll back.
pub fn complete(
    conn: &Connection,
    scope: &Scope,
    token: &LeaseToken,
    response: &StoredResponse,
    now: DateTime<Utc>,
    settings: &Settings,
) -> Result<()> {
    let d = settings.deadlines(now);
    let sql = format!(
        "UPDATE idempotency_records SET state = 'completed', response_status = ?7, \
         response_headers = ?8, response_body = ?9, resource = ?10, expires_at = ?11, \
         tombstone_until = ?12 \
         WHERE {WHERE_SCOPE} AND state = 'in_progress' AND lease_token = ?6"
    );
    let values: [&dyn ToSql; 7] = [
        &token.0,
        &response.status,
        &columns::encode_headers(&response.headers),
        &response.body,
        &response.resource,
        &d.expires_at.timestamp_micros(),
        &d.tombstone_until.timestamp_micros(),
    ];
    match conn.prepare_cached(&sql)?.execute(bind(scope, &values)?)? {
        1 => Ok(()),
        _ => Err(Error::Fenced),
    }
}

/// Records the scope as completed with `response`, at the END of the host's transaction that
/// made the business writes, so claim, write and response commit once and a first request costs
/// one insert. When the scope has a record already, it is read and [`decide`]d: an abandoned one
/// (an expired lease, an ended tombstone) is taken over and completed in this transaction
/// ([`Recorded::TookOver`]; the crashed owner committed nothing, so this write is the one
/// execution); any other is [`Recorded::Held`]: the host rolls back and asks [`begin`].
#[allow(clippy::too_many_arguments)]
pub fn record_completed(
    conn: &Connection,
    scope: &Scope,
    fingerprint: &Fingerprint,
    canonical_body: &str,
    token: &LeaseToken,
    response: &StoredResponse,
    now: DateTime<Utc>,
    settings: &Settings,
) -> Result<Recorded> {
    let d = settings.deadlines(now);
    let sql = "INSERT INTO idempotency_records (principal, application, method, route, key, \
         state, fingerprint_version, fingerprint, canonical_body, lease_token, lease_until, \
         response_status, response_headers, response_body, resource, expires_at, \
         tombstone_until) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'completed', ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, \
         ?16) ON CONFLICT DO NOTHING";
    let now_us = now.timestamp_micros();
    let (fp_hex, headers) = (
        fingerprint.hex(),
        columns::encode_headers(&response.headers),
    );
    let values: [&dyn ToSql; 11] = [
        &fingerprint.version,
        &fp_hex,
        &canonical_body,
        &token.0,
        &now_us,
        &response.status,
        &headers,
        &response.body,
        &response.resource,
        &d.expires_at.timestamp_micros(),
        &d.tombstone_until.timestamp_micros(),
    ];
    if conn.prepare_cached(sql)?.execute(bind(scope, &values)?)? == 1 {
        return Ok(Recorded::Fresh);
    }
    let Some(row) = read(conn, scope)? else {
        return Ok(Recorded::Held);
    };
    if decide(&row, fingerprint, canonical_body, now) != Decision::TakeOver {
        return Ok(Recorded::Held);
    }
    let sql = format!(
        "UPDATE idempotency_records SET state = 'completed', fingerprint_version = ?6, \
         fingerprint = ?7, canonical_body = ?8, lease_token = ?9, lease_until = ?10, \
         response_status = ?11, response_headers = ?12, response_body = ?13, resource = ?14, \
         expires_at = ?15, tombstone_until = ?16 \
         WHERE {WHERE_SCOPE} AND lease_token = ?17 AND \
         ((state = 'in_progress' AND lease_until <= ?18) OR tombstone_until <= ?18)"
    );
    let mut all = values.to_vec();
    all.extend([&row.lease_token.0 as &dyn ToSql, &now_us]);
    Ok(
        match conn.prepare_cached(&sql)?.execute(bind(scope, &all)?)? {
            1 => Recorded::TookOver,
            _ => Recorded::Held,
        },
    )
}

/// Deletes the `in_progress` record `token` owns, for an outcome that is not final (validation
/// failure, 429, infrastructure 5xx). Whether there was one to delete.
pub fn release(conn: &Connection, scope: &Scope, token: &LeaseToken) -> Result<bool> {
    let sql = format!(
        "DELETE FROM idempotency_records \
         WHERE {WHERE_SCOPE} AND state = 'in_progress' AND lease_token = ?6"
    );
    Ok(conn
        .prepare_cached(&sql)?
        .execute(bind(scope, &[&token.0])?)?
        == 1)
}

/// One cleaning pass of at most `batch` rows per step: completed records past `expires_at`
/// become tombstones (response and request body dropped; scope, fingerprint, resource kept);
/// tombstones past their end, and abandoned `in_progress` rows (lease and record both expired:
/// nothing was committed) are deleted. The number of rows changed.
pub fn purge(conn: &Connection, now: DateTime<Utc>, batch: usize) -> Result<usize> {
    let (now, batch) = (now.timestamp_micros(), batch as i64);
    let stripped = conn
        .prepare_cached(
            "UPDATE idempotency_records SET state = 'tombstone', canonical_body = NULL, \
             response_status = NULL, response_headers = NULL, response_body = NULL \
             WHERE rowid IN (SELECT rowid FROM idempotency_records \
                             WHERE state = 'completed' AND expires_at <= ?1 LIMIT ?2)",
        )?
        .execute(params![now, batch])?;
    let deleted = conn
        .prepare_cached(
            "DELETE FROM idempotency_records \
             WHERE rowid IN (SELECT rowid FROM idempotency_records \
                             WHERE tombstone_until <= ?1 \
                                OR (state = 'in_progress' AND expires_at <= ?1 \
                                    AND lease_until <= ?1) \
                             LIMIT ?2)",
        )?
        .execute(params![now, batch])?;
    Ok(stripped + deleted)
}

/// The scope's row, decoded.
fn read(conn: &Connection, scope: &Scope) -> Result<Option<record::Record>> {
    let sql = format!(
        "SELECT {} FROM idempotency_records WHERE {WHERE_SCOPE}",
        columns::SELECT
    );
    let row = conn
        .prepare_cached(&sql)?
        .query_row(bind(scope, &[])?, |r| {
            Ok((
                Columns {
                    state: r.get(0)?,
                    fingerprint_version: r.get(1)?,
                    fingerprint: r.get(2)?,
                    canonical_body: r.get(3)?,
                    lease_token: r.get(4)?,
                    lease_until: DateTime::UNIX_EPOCH,
                    response_status: r.get(6)?,
                    response_headers: r.get(7)?,
                    response_body: r.get(8)?,
                    resource: r.get(9)?,
                    expires_at: DateTime::UNIX_EPOCH,
                    tombstone_until: DateTime::UNIX_EPOCH,
                },
                [r.get::<_, i64>(5)?, r.get(10)?, r.get(11)?],
            ))
        })
        .optional()?;
    let Some((mut cols, [lease_until, expires_at, tombstone_until])) = row else {
        return Ok(None);
    };
    let time = |us| DateTime::from_timestamp_micros(us).ok_or(Error::Corrupt("time"));
    cols.lease_until = time(lease_until)?;
    cols.expires_at = time(expires_at)?;
    cols.tombstone_until = time(tombstone_until)?;
    cols.decode().map(Some)
}

/// The scope as `?1`..`?5` (no application is `''`), then `rest` from `?6`.
fn bind<'a>(
    scope: &'a Scope,
    rest: &[&'a dyn ToSql],
) -> rusqlite::Result<ParamsFromIter<Vec<ToSqlOutput<'a>>>> {
    let text = |s: &'a str| ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes()));
    let mut all = vec![
        text(&scope.principal),
        text(scope.application_column()),
        text(&scope.method),
        text(&scope.route),
        text(scope.key.as_str()),
    ];
    for &value in rest {
        all.push(value.to_sql()?);
    }
    Ok(params_from_iter(all))
}

/// The scope's [`KeyStatus`] at `now`; `None` when the key is free.
pub fn status(conn: &Connection, scope: &Scope, now: DateTime<Utc>) -> Result<Option<KeyStatus>> {
    let sql = format!(
        "SELECT {} FROM idempotency_records WHERE {WHERE_SCOPE}",
        status::SELECT
    );
    let row = conn
        .prepare_cached(&sql)?
        .query_row(bind(scope, &[])?, |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                [r.get::<_, i64>(2)?, r.get(3)?, r.get(4)?],
                r.get::<_, u16>(5)?,
            ))
        })
        .optional()?;
    let Some((state, resource, [lease_until, expires_at, tombstone_until], fingerprint_version)) =
        row
    else {
        return Ok(None);
    };
    let time = |us| DateTime::from_timestamp_micros(us).ok_or(Error::Corrupt("time"));
    let row = StatusRow {
        state,
        resource,
        lease_until: time(lease_until)?,
        expires_at: time(expires_at)?,
        tombstone_until: time(tombstone_until)?,
        fingerprint_version,
    };
    Ok(KeyStatus::of(row, now))
}

/// When the oldest claim still `in_progress` began (its lease's start), if there is one.
pub fn oldest_in_progress(conn: &Connection, settings: &Settings) -> Result<Option<DateTime<Utc>>> {
    let until: Option<i64> = conn
        .prepare_cached(
            "SELECT min(lease_until) FROM idempotency_records WHERE state = 'in_progress'",
        )?
        .query_row([], |r| r.get(0))?;
    until
        .map(|us| DateTime::from_timestamp_micros(us).ok_or(Error::Corrupt("time")))
        .transpose()
        .map(|u| u.map(|u| status::lease_start(u, settings)))
}
