//! How values are laid out in columns, and back: the encoding rules every entity module shares.
//!
//! - Times are INTEGER microseconds since the Unix epoch ([`micros`]); the stored value is
//!   truncated to the microsecond, so what a create returns is [`truncate`]d too.
//! - Ids are TEXT in their prefixed form.
//! - Lists and maps are JSON text ([`to_json`]).
//! - Rows read back as models through [`SqliteColumns`], this store's
//!   [`vow_store::rows::Columns`] (the mapping itself is `vow_store::rows`, shared): [`read`].
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
use vow_core::IdError;
use vow_store::rows::{Columns, FromColumns};
use vow_store::Seek;

/// A time as stored: microseconds since the epoch.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// A time as the store returns it: truncated to the microsecond.
pub(crate) fn truncate(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}

/// A `rusqlite` row as [`Columns`]: times from INTEGER microseconds, lists and JSON from TEXT.
pub(crate) struct SqliteColumns<'r, 's>(pub(crate) &'r Row<'s>);

impl Columns for SqliteColumns<'_, '_> {
    type Error = rusqlite::Error;

    fn text(&self, at: usize) -> rusqlite::Result<String> {
        self.0.get(at)
    }

    fn opt_text(&self, at: usize) -> rusqlite::Result<Option<String>> {
        self.0.get(at)
    }

    fn bool(&self, at: usize) -> rusqlite::Result<bool> {
        self.0.get(at)
    }

    fn opt_int(&self, at: usize) -> rusqlite::Result<Option<i64>> {
        self.0.get(at)
    }

    fn opt_time(&self, at: usize) -> rusqlite::Result<Option<DateTime<Utc>>> {
        let Some(v) = self.0.get::<_, Option<i64>>(at)? else {
            return Ok(None);
        };
        DateTime::from_timestamp_micros(v)
            .map(Some)
            .ok_or_else(|| self.corrupt(at, format!("{v} µs is out of range for a time")))
    }

    fn opt_strings(&self, at: usize) -> rusqlite::Result<Option<Vec<String>>> {
        self.opt_json(at)
    }

    fn opt_json<T: DeserializeOwned>(&self, at: usize) -> rusqlite::Result<Option<T>> {
        let Some(text) = self.0.get::<_, Option<String>>(at)? else {
            return Ok(None);
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| self.corrupt(at, e.to_string()))
    }

    fn opt_bytes(&self, at: usize) -> rusqlite::Result<Option<Vec<u8>>> {
        self.0.get(at)
    }

    fn corrupt(&self, at: usize, why: String) -> rusqlite::Error {
        let column = self.0.as_ref().column_name(at).unwrap_or("?");
        rusqlite::Error::FromSqlConversionFailure(at, Type::Text, format!("{column}: {why}").into())
    }
}

/// Reads a `T` from the row's first columns (its [`FromColumns::COLUMNS`]).
pub(crate) fn read<T: FromColumns>(row: &Row<'_>) -> rusqlite::Result<T> {
    vow_store::rows::read(&SqliteColumns(row))
}

/// Reads the TEXT id in column `at` as its type.
pub(crate) fn id<T: FromStr<Err = IdError>>(row: &Row<'_>, at: usize) -> rusqlite::Result<T> {
    let text: String = row.get(at)?;
    text.parse()
        .map_err(|e| SqliteColumns(row).corrupt(at, format!("{text:?}: {e}")))
}

/// Encodes a value as JSON text.
pub(crate) fn to_json<T: Serialize + ?Sized>(v: &T) -> rusqlite::Result<String> {
    serde_json::to_string(v).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// Encodes an optional value as nullable JSON text.
pub(crate) fn to_opt_json<T: Serialize>(v: Option<&T>) -> rusqlite::Result<Option<String>> {
    v.map(to_json).transpose()
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
    let (cmp, dir) = seek.order.sql();
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
    use vow_store::Order;

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
