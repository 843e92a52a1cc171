//! How values are laid out in columns, and back: the encoding rules every entity module shares.
//!
//! - Times are INTEGER microseconds since the Unix epoch ([`micros`], [`time`]); the stored
//!   value is truncated to the microsecond, so what a create returns is [`truncate`]d too.
//! - Ids are TEXT in their prefixed form and parsed back with their type ([`id`]).
//! - Lists and maps are JSON text ([`to_json`], [`json`], [`opt_json`]).
//! - Listings are keyset seeks ([`seek_sql`]).
//!
//! Decoding failures surface as `rusqlite` conversion errors, which the crate reports as
//! [`vow_store::StoreError::Backend`] (the data is corrupt, not the request wrong).

use std::str::FromStr;

use chrono::{DateTime, Utc};
use rusqlite::types::Type;
use rusqlite::Row;
use serde::de::DeserializeOwned;
use serde::Serialize;
use vow_store::{Order, Seek};

/// A time as stored: microseconds since the epoch.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// A time as the store returns it: truncated to the microsecond.
pub(crate) fn truncate(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}

/// Reads a time column.
pub(crate) fn time(row: &Row<'_>, idx: usize) -> rusqlite::Result<DateTime<Utc>> {
    let v: i64 = row.get(idx)?;
    DateTime::from_timestamp_micros(v).ok_or_else(|| {
        conversion(
            idx,
            Type::Integer,
            format!("{v} µs is out of range for a time"),
        )
    })
}

/// Reads a nullable time column.
pub(crate) fn opt_time(row: &Row<'_>, idx: usize) -> rusqlite::Result<Option<DateTime<Utc>>> {
    match row.get::<_, Option<i64>>(idx)? {
        None => Ok(None),
        Some(_) => time(row, idx).map(Some),
    }
}

/// Reads a TEXT id column into its typed id.
pub(crate) fn id<T>(row: &Row<'_>, idx: usize) -> rusqlite::Result<T>
where
    T: FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let s: String = row.get(idx)?;
    s.parse()
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, Box::new(e)))
}

/// Reads a JSON text column.
pub(crate) fn json<T: DeserializeOwned>(row: &Row<'_>, idx: usize) -> rusqlite::Result<T> {
    let s: String = row.get(idx)?;
    serde_json::from_str(&s)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, Box::new(e)))
}

/// Reads a nullable JSON text column.
pub(crate) fn opt_json<T: DeserializeOwned>(
    row: &Row<'_>,
    idx: usize,
) -> rusqlite::Result<Option<T>> {
    match row.get_ref(idx)? {
        rusqlite::types::ValueRef::Null => Ok(None),
        _ => json(row, idx).map(Some),
    }
}

/// Encodes a value as JSON text.
pub(crate) fn to_json<T: Serialize + ?Sized>(v: &T) -> rusqlite::Result<String> {
    serde_json::to_string(v).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// Encodes an optional value as nullable JSON text.
pub(crate) fn to_opt_json<T: Serialize>(v: Option<&T>) -> rusqlite::Result<Option<String>> {
    v.map(to_json).transpose()
}

/// Reads an optional throttle rate (`u16` stored as INTEGER).
pub(crate) fn throttle(row: &Row<'_>, idx: usize) -> rusqlite::Result<Option<u16>> {
    match row.get::<_, Option<i64>>(idx)? {
        None => Ok(None),
        Some(v) => u16::try_from(v).map(Some).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(idx, Type::Integer, Box::new(e))
        }),
    }
}

/// Reads an optional HTTP status code (`u16` stored as INTEGER).
pub(crate) fn status_code(row: &Row<'_>, idx: usize) -> rusqlite::Result<Option<u16>> {
    throttle(row, idx)
}

fn conversion(idx: usize, ty: Type, msg: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(idx, ty, msg.into())
}

/// The SQL of a keyset listing: `SELECT {select} WHERE {filters} [AND key >/< ?{after_param}]
/// ORDER BY key ASC/DESC LIMIT ?{limit_param}`.
///
/// `filters` may be empty. The caller always binds the `after` parameter (NULL when
/// `seek.after` is `None`: the condition is then left out of the text, so SQLite walks the index
/// from its start instead of testing `? IS NULL` on every row).
pub(crate) fn seek_sql(
    select: &str,
    filters: &[&str],
    key: &str,
    seek: &Seek,
    after_param: usize,
    limit_param: usize,
) -> String {
    let (cmp, dir) = match seek.order {
        Order::Ascending => (">", "ASC"),
        Order::Descending => ("<", "DESC"),
    };
    let mut conds: Vec<String> = filters.iter().map(|f| f.to_string()).collect();
    if seek.after.is_some() {
        conds.push(format!("{key} {cmp} ?{after_param}"));
    }
    let mut sql = format!("SELECT {select}");
    if !conds.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conds.join(" AND "));
    }
    sql.push_str(&format!(" ORDER BY {key} {dir} LIMIT ?{limit_param}"));
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_drops_nanoseconds_only() {
        let t = DateTime::from_timestamp(1_700_000_000, 123_456_789).unwrap();
        let tr = truncate(t);
        assert_eq!(tr.timestamp_subsec_nanos(), 123_456_000);
        assert_eq!(micros(tr), micros(t));
    }

    #[test]
    fn a_seek_without_a_start_has_no_key_condition() {
        let seek = Seek {
            after: None,
            order: Order::Descending,
            limit: 10,
        };
        let sql = seek_sql("a FROM t", &["app_id = ?1"], "id", &seek, 2, 3);
        assert_eq!(
            sql,
            "SELECT a FROM t WHERE app_id = ?1 ORDER BY id DESC LIMIT ?3"
        );
        let seek = Seek {
            after: Some("x".into()),
            ..seek
        };
        let sql = seek_sql("a FROM t", &[], "id", &seek, 1, 2);
        assert_eq!(
            sql,
            "SELECT a FROM t WHERE id < ?1 ORDER BY id DESC LIMIT ?2"
        );
    }
}
