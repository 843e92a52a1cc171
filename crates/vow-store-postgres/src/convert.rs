//! Stored values in and out: PostgreSQL's rows as [`vow_store::rows::Columns`] ([`PgColumns`],
//! [`read`]: the row mapping itself is `vow_store::rows`, shared with SQLite), and the few
//! conversions on the way in.
//!
//! A value that does not convert (an id without its prefix, a negative counter) means corrupt
//! data or a schema this binary does not know: a `ColumnDecode` error naming the column, which
//! `db_error` reports as [`StoreError::Backend`].

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::types::Json;
use sqlx::{Arguments, Column, Postgres, Row, TypeInfo};
use vow_store::rows::{Columns, FromColumns};
use vow_store::{DeliveryOptions, StoreError, StoreResult};

/// Adds one parameter value.
pub(crate) fn add<'q, T>(args: &mut PgArguments, value: T) -> sqlx::Result<()>
where
    T: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
{
    args.add(value).map_err(sqlx::Error::Encode)
}

/// A `PgRow` as [`Columns`]: `timestamptz`, `text[]`, `jsonb`, integers of any width.
pub(crate) struct PgColumns<'r>(pub(crate) &'r PgRow);

impl Columns for PgColumns<'_> {
    type Error = sqlx::Error;

    fn text(&self, at: usize) -> sqlx::Result<String> {
        self.0.try_get(at)
    }

    fn opt_text(&self, at: usize) -> sqlx::Result<Option<String>> {
        self.0.try_get(at)
    }

    fn bool(&self, at: usize) -> sqlx::Result<bool> {
        self.0.try_get(at)
    }

    fn opt_int(&self, at: usize) -> sqlx::Result<Option<i64>> {
        Ok(match self.0.try_column(at)?.type_info().name() {
            "INT2" => self.0.try_get::<Option<i16>, _>(at)?.map(i64::from),
            "INT4" => self.0.try_get::<Option<i32>, _>(at)?.map(i64::from),
            _ => self.0.try_get(at)?,
        })
    }

    fn opt_time(&self, at: usize) -> sqlx::Result<Option<DateTime<Utc>>> {
        self.0.try_get(at)
    }

    fn opt_strings(&self, at: usize) -> sqlx::Result<Option<Vec<String>>> {
        self.0.try_get(at)
    }

    fn opt_json<T: DeserializeOwned>(&self, at: usize) -> sqlx::Result<Option<T>> {
        Ok(self.0.try_get::<Option<Json<T>>, _>(at)?.map(|j| j.0))
    }

    fn opt_bytes(&self, at: usize) -> sqlx::Result<Option<Vec<u8>>> {
        self.0.try_get(at)
    }

    fn corrupt(&self, at: usize, why: String) -> sqlx::Error {
        let column = self.0.try_column(at).map_or("?", |c| c.name());
        sqlx::Error::ColumnDecode {
            index: format!("{column:?}"),
            source: why.into(),
        }
    }
}

/// Reads a `T` from the row's first columns (its [`FromColumns::COLUMNS`]), for `try_map`.
pub(crate) fn read<T: FromColumns>(row: PgRow) -> sqlx::Result<T> {
    vow_store::rows::read(&PgColumns(&row))
}

/// The `T` at `r`'s position, or `None` when its first column is `NULL` (a `LEFT JOIN` that
/// matched nothing).
pub(crate) fn read_optional<T: FromColumns>(
    columns: &PgColumns<'_>,
    r: &mut vow_store::rows::Reader<'_, PgColumns<'_>>,
) -> sqlx::Result<Option<T>> {
    match columns.opt_text(r.at())? {
        Some(_) => Some(r.take()).transpose(),
        None => Ok(None),
    }
}

/// A throttle rate as stored.
pub(crate) fn rate_param(value: Option<u16>) -> Option<i32> {
    value.map(i32::from)
}

/// An HTTP status code as stored.
pub(crate) fn status_param(value: Option<u16>) -> Option<i32> {
    value.map(i32::from)
}

/// A count or limit on the way in, as the `INTEGER` / `BIGINT` a query binds. Values beyond the
/// column's range saturate: they only ever come from `u32`/`u64`/`usize` counters and limits
/// whose real values are far smaller.
pub(crate) fn int_param(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// A `u64` or `usize` as a `BIGINT`, saturating (see [`int_param`]).
pub(crate) fn bigint_param(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

/// An endpoint's delivery options as stored: `(signature_style, timeout_ms, retry_schedule)`.
/// A timeout beyond `INTEGER` (over 24 days; the API allows far less) is refused as a `Backend`
/// error rather than silently changed.
pub(crate) fn delivery_options_params(
    options: &DeliveryOptions,
) -> StoreResult<(&'static str, Option<i32>, Option<String>)> {
    let timeout_ms = options
        .timeout_ms
        .map(|v| {
            i32::try_from(v).map_err(|_| {
                StoreError::Backend(format!("timeout_ms {v} does not fit the schema").into())
            })
        })
        .transpose()?;
    Ok((
        options.signature_style.as_str(),
        timeout_ms,
        options.retry_schedule.as_ref().map(ToString::to_string),
    ))
}

/// Shorthand for the error of a row that was expected and is gone.
pub(crate) fn not_found(what: &'static str) -> StoreError {
    StoreError::NotFound(what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vow_core::{RetrySchedule, SignatureStyle};

    #[test]
    fn counts_and_limits_saturate_on_the_way_in() {
        assert_eq!(int_param(u32::MAX), i32::MAX);
        assert_eq!(bigint_param(u64::MAX), i64::MAX);
        assert_eq!(bigint_param(7_usize), 7);
        assert_eq!(rate_param(Some(65535)), Some(65535));
    }

    #[test]
    fn delivery_options_are_stored_as_text_and_a_timeout_beyond_the_schema_is_refused() {
        let options = DeliveryOptions {
            signature_style: SignatureStyle::SeedSha256,
            timeout_ms: Some(2_500),
            retry_schedule: Some(RetrySchedule::parse("1s,2m,2h8m").unwrap()),
        };
        let (style, timeout, schedule) = delivery_options_params(&options).unwrap();
        assert_eq!(style, options.signature_style.as_str());
        assert_eq!(timeout, Some(2_500));
        assert_eq!(
            schedule,
            options.retry_schedule.as_ref().map(ToString::to_string)
        );
        let too_long = DeliveryOptions {
            timeout_ms: Some(u32::MAX),
            ..DeliveryOptions::default()
        };
        assert!(matches!(
            delivery_options_params(&too_long),
            Err(StoreError::Backend(_))
        ));
    }
}
