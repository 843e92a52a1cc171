//! Reading stored values back into vow-core types, and the few conversions on the way in.
//!
//! A value that does not convert (an id without its prefix, a negative counter) means corrupt
//! data or a schema this binary does not know, and is reported as [`StoreError::Backend`].

use std::str::FromStr;

use vow_core::IdError;
use vow_store::{StoreError, StoreResult};

use crate::error::corrupt;

/// Parses a stored id of type `T` from `column`.
pub(crate) fn id<T: FromStr<Err = IdError>>(column: &str, value: &str) -> StoreResult<T> {
    T::from_str(value).map_err(|e| corrupt(format!("{column} {value:?}: {e}")))
}

/// A stored throttle rate (INTEGER, checked 0..=65535 by the schema).
pub(crate) fn rate(column: &str, value: Option<i32>) -> StoreResult<Option<u16>> {
    value
        .map(|v| u16::try_from(v).map_err(|_| corrupt(format!("{column} out of range: {v}"))))
        .transpose()
}

/// A throttle rate as stored.
pub(crate) fn rate_param(value: Option<u16>) -> Option<i32> {
    value.map(i32::from)
}

/// A stored non-negative counter.
pub(crate) fn count(column: &str, value: i32) -> StoreResult<u32> {
    u32::try_from(value).map_err(|_| corrupt(format!("{column} is negative: {value}")))
}

/// Shorthand for the error of a row that was expected and is gone.
pub(crate) fn not_found(what: &'static str) -> StoreError {
    StoreError::NotFound(what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vow_core::AppId;

    #[test]
    fn a_malformed_stored_id_is_a_backend_error() {
        let err = id::<AppId>("applications.id", "ep_nope").unwrap_err();
        assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
        let ok = AppId::new();
        assert_eq!(id::<AppId>("applications.id", &ok.to_string()).unwrap(), ok);
    }

    #[test]
    fn rates_and_counts_stay_in_range() {
        assert_eq!(rate("r", Some(65535)).unwrap(), Some(65535));
        assert!(rate("r", Some(70000)).is_err());
        assert_eq!(rate("r", None).unwrap(), None);
        assert!(count("attempts", -1).is_err());
        assert_eq!(count("attempts", 3).unwrap(), 3);
    }
}
