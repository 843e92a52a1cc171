//! The reading side every model's mapping is written against: [`Columns`], the typed reads a
//! backend gives by position, [`FromColumns`], a model's select list and how it is read, and
//! [`Reader`], which walks a row's columns in order.

use std::fmt::Display;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;

/// The typed reads of one result row, by column position (0 is the first). A backend
/// implements it once; reads of a NULL into a non-optional value fail.
pub trait Columns {
    /// What a read fails with.
    type Error;

    /// A TEXT column.
    fn text(&self, at: usize) -> Result<String, Self::Error>;
    /// A nullable TEXT column.
    fn opt_text(&self, at: usize) -> Result<Option<String>, Self::Error>;
    /// A boolean column.
    fn bool(&self, at: usize) -> Result<bool, Self::Error>;
    /// A nullable integer column of any width.
    fn opt_int(&self, at: usize) -> Result<Option<i64>, Self::Error>;
    /// A time column.
    fn opt_time(&self, at: usize) -> Result<Option<DateTime<Utc>>, Self::Error>;
    /// A nullable list of strings.
    fn opt_strings(&self, at: usize) -> Result<Option<Vec<String>>, Self::Error>;
    /// A nullable JSON column.
    fn opt_json<T: DeserializeOwned>(&self, at: usize) -> Result<Option<T>, Self::Error>;
    /// A nullable binary column.
    fn opt_bytes(&self, at: usize) -> Result<Option<Vec<u8>>, Self::Error>;
    /// The error of a stored value at `at` that does not convert, and why.
    fn corrupt(&self, at: usize, why: String) -> Self::Error;
}

/// A model stored as one row: the columns it reads and how.
pub trait FromColumns: Sized {
    /// The select list, in the order [`FromColumns::read_from`] reads it.
    const COLUMNS: &'static str;

    /// Reads the model from the reader's position on, advancing past its columns.
    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error>;
}

/// How many columns a select list names (commas inside parentheses, as in a function call, do
/// not part columns).
pub const fn width(columns: &str) -> usize {
    let bytes = columns.as_bytes();
    let mut n = 1;
    let mut depth = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b',' if depth == 0 => n += 1,
            _ => {}
        }
        i += 1;
    }
    n
}

/// Reads a `T` from the row's first columns ([`FromColumns::COLUMNS`]).
pub fn read<T: FromColumns, C: Columns + ?Sized>(row: &C) -> Result<T, C::Error> {
    Reader::new(row).take()
}

/// A row read column by column, from the first on.
pub struct Reader<'r, C: ?Sized> {
    row: &'r C,
    at: usize,
}

impl<'r, C: Columns + ?Sized> Reader<'r, C> {
    /// A reader at the row's first column.
    pub fn new(row: &'r C) -> Self {
        Reader { row, at: 0 }
    }

    /// The position of the next column to read.
    pub fn at(&self) -> usize {
        self.at
    }

    /// The next column's position, moving past it.
    fn next(&mut self) -> usize {
        self.at += 1;
        self.at - 1
    }

    /// Reads a `T` from here on (its [`FromColumns::COLUMNS`]).
    pub fn take<T: FromColumns>(&mut self) -> Result<T, C::Error> {
        let start = self.at;
        let value = T::read_from(self)?;
        debug_assert_eq!(
            self.at - start,
            width(T::COLUMNS),
            "{} reads a column count other than its COLUMNS: {}",
            std::any::type_name::<T>(),
            T::COLUMNS
        );
        Ok(value)
    }

    /// The error of the column at `at`.
    pub(super) fn corrupt(&self, at: usize, why: impl Display) -> C::Error {
        self.row.corrupt(at, why.to_string())
    }

    /// A non-null value of a nullable read.
    fn required<T>(&self, at: usize, value: Option<T>) -> Result<T, C::Error> {
        value.ok_or_else(|| self.corrupt(at, "is NULL"))
    }

    /// TEXT.
    pub fn text(&mut self) -> Result<String, C::Error> {
        let at = self.next();
        self.row.text(at)
    }

    /// Nullable TEXT.
    pub fn opt_text(&mut self) -> Result<Option<String>, C::Error> {
        let at = self.next();
        self.row.opt_text(at)
    }

    /// A boolean.
    pub fn bool(&mut self) -> Result<bool, C::Error> {
        let at = self.next();
        self.row.bool(at)
    }

    /// A time.
    pub fn time(&mut self) -> Result<DateTime<Utc>, C::Error> {
        let at = self.next();
        let value = self.row.opt_time(at)?;
        self.required(at, value)
    }

    /// A nullable time.
    pub fn opt_time(&mut self) -> Result<Option<DateTime<Utc>>, C::Error> {
        let at = self.next();
        self.row.opt_time(at)
    }

    /// A nullable list of strings.
    pub fn opt_strings(&mut self) -> Result<Option<Vec<String>>, C::Error> {
        let at = self.next();
        self.row.opt_strings(at)
    }

    /// JSON.
    pub fn json<T: DeserializeOwned>(&mut self) -> Result<T, C::Error> {
        let at = self.next();
        let value = self.row.opt_json(at)?;
        self.required(at, value)
    }

    /// Nullable JSON.
    pub fn opt_json<T: DeserializeOwned>(&mut self) -> Result<Option<T>, C::Error> {
        let at = self.next();
        self.row.opt_json(at)
    }

    /// Nullable bytes.
    pub fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>, C::Error> {
        let at = self.next();
        self.row.opt_bytes(at)
    }

    /// A nullable integer, as `T` (`u16`, `u32`, `u64`, ...): out of `T`'s range is corrupt.
    pub fn opt_int<T: TryFrom<i64>>(&mut self) -> Result<Option<T>, C::Error> {
        let at = self.next();
        match self.row.opt_int(at)? {
            None => Ok(None),
            Some(v) => T::try_from(v)
                .map(Some)
                .map_err(|_| self.corrupt(at, format_args!("{v} is out of range"))),
        }
    }

    /// An integer, as `T` (see [`Reader::opt_int`]).
    pub fn int<T: TryFrom<i64>>(&mut self) -> Result<T, C::Error> {
        let value = self.opt_int()?;
        self.required(self.at - 1, value)
    }

    /// TEXT parsed as `T` (a typed id, a signature style, ...).
    pub fn parse<T>(&mut self) -> Result<T, C::Error>
    where
        T: FromStr,
        T::Err: Display,
    {
        let text = self.text()?;
        text.parse()
            .map_err(|e| self.corrupt(self.at - 1, format_args!("{text:?}: {e}")))
    }

    /// Nullable TEXT parsed as `T` (see [`Reader::parse`]).
    pub fn opt_parse<T>(&mut self) -> Result<Option<T>, C::Error>
    where
        T: FromStr,
        T::Err: Display,
    {
        let Some(text) = self.opt_text()? else {
            return Ok(None);
        };
        text.parse()
            .map(Some)
            .map_err(|e| self.corrupt(self.at - 1, format_args!("{text:?}: {e}")))
    }

    /// TEXT naming one of a set of values (a state, an outcome), by `parse`.
    pub fn named<T>(&mut self, parse: fn(&str) -> Option<T>) -> Result<T, C::Error> {
        let text = self.text()?;
        parse(&text).ok_or_else(|| self.corrupt(self.at - 1, format_args!("unknown {text:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Application, DeliveryOptions};
    use vow_core::{RetrySchedule, SignatureStyle};

    /// A row of text and integer cells, as a test stand-in for a backend's.
    struct Cells(Vec<Option<&'static str>>);

    impl Columns for Cells {
        type Error = String;

        fn text(&self, at: usize) -> Result<String, String> {
            self.opt_text(at)?
                .ok_or_else(|| self.corrupt(at, "NULL".into()))
        }
        fn opt_text(&self, at: usize) -> Result<Option<String>, String> {
            Ok(self.0[at].map(str::to_string))
        }
        fn bool(&self, at: usize) -> Result<bool, String> {
            Ok(self.text(at)? == "true")
        }
        fn opt_int(&self, at: usize) -> Result<Option<i64>, String> {
            self.0[at]
                .map(|v| v.parse().map_err(|_| self.corrupt(at, v.into())))
                .transpose()
        }
        fn opt_time(&self, at: usize) -> Result<Option<DateTime<Utc>>, String> {
            self.0[at]
                .map(|v| v.parse().map_err(|_| self.corrupt(at, v.into())))
                .transpose()
        }
        fn opt_strings(&self, at: usize) -> Result<Option<Vec<String>>, String> {
            self.opt_json(at)
        }
        fn opt_json<T: DeserializeOwned>(&self, at: usize) -> Result<Option<T>, String> {
            self.0[at]
                .map(|v| serde_json::from_str(v).map_err(|e| self.corrupt(at, e.to_string())))
                .transpose()
        }
        fn opt_bytes(&self, at: usize) -> Result<Option<Vec<u8>>, String> {
            Ok(self.0[at].map(|v| v.as_bytes().to_vec()))
        }
        fn corrupt(&self, at: usize, why: String) -> String {
            format!("column {at}: {why}")
        }
    }

    const NOW: &str = "2026-01-02T03:04:05.678901Z";

    fn application(id: &'static str, throttle: Option<&'static str>) -> Cells {
        Cells(vec![
            Some(id),
            None,
            Some("shop"),
            throttle,
            Some("{}"),
            Some(NOW),
            Some(NOW),
        ])
    }

    #[test]
    fn a_select_list_is_as_wide_as_its_names() {
        assert_eq!(width("id"), 1);
        assert_eq!(width("id, substr(response, 1, 300), ok"), 3);
        assert_eq!(width("id, app_id, created_at"), 3);
    }

    #[test]
    fn a_stored_row_reads_back_as_its_model() {
        let id = vow_core::AppId::new().to_string().leak();
        let app: Application = read(&application(id, Some("65535"))).unwrap();
        assert_eq!(app.id.to_string(), *id);
        assert_eq!(app.fields.name, "shop");
        assert_eq!(app.fields.throttle_rate, Some(65535));
        assert_eq!(app.created_at, NOW.parse::<DateTime<Utc>>().unwrap());
    }

    #[test]
    fn a_malformed_id_or_an_out_of_range_number_names_its_column() {
        let err = read::<Application, _>(&application("ep_nope", None)).unwrap_err();
        assert!(err.starts_with("column 0: \"ep_nope\""), "{err}");
        let id = vow_core::AppId::new().to_string().leak();
        let err = read::<Application, _>(&application(id, Some("70000"))).unwrap_err();
        assert_eq!(err, "column 3: 70000 is out of range");
        let err = read::<Application, _>(&application(id, Some("-1"))).unwrap_err();
        assert_eq!(err, "column 3: -1 is out of range");
    }

    #[test]
    fn delivery_options_read_back_and_bad_stored_values_name_their_column() {
        let options: DeliveryOptions = read(&Cells(vec![
            Some("sha256"),
            Some("2500"),
            Some("1s,2m,2h8m"),
        ]))
        .unwrap();
        assert_eq!(
            options,
            DeliveryOptions {
                signature_style: SignatureStyle::SeedSha256,
                timeout_ms: Some(2_500),
                retry_schedule: Some(RetrySchedule::parse("1s,2m,2h8m").unwrap()),
            }
        );
        let default: DeliveryOptions =
            read(&Cells(vec![Some("standard-webhooks"), None, None])).unwrap();
        assert_eq!(default, DeliveryOptions::default());
        for (cells, column) in [
            (vec![Some("hmac"), None, None], 0),
            (vec![Some("sha256"), Some("-1"), None], 1),
            (vec![Some("sha256"), None, Some("1s,,2s")], 2),
        ] {
            let err = read::<DeliveryOptions, _>(&Cells(cells)).unwrap_err();
            assert!(err.starts_with(&format!("column {column}:")), "{err}");
        }
    }
}
