//! Reading stored values back into vow-core types, and the few conversions on the way in.
//!
//! A value that does not convert (an id without its prefix, a negative counter) means corrupt
//! data or a schema this binary does not know, and is reported as [`StoreError::Backend`].

use std::str::FromStr;

use vow_core::{IdError, RetrySchedule, SignatureStyle};
use vow_store::{DeliveryOptions, StoreError, StoreResult};

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

/// A stored HTTP status code (INTEGER, checked 0..=65535 by the schema).
pub(crate) fn status(column: &str, value: Option<i32>) -> StoreResult<Option<u16>> {
    rate(column, value)
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

/// An endpoint's stored delivery options.
pub(crate) fn delivery_options(
    signature_style: &str,
    timeout_ms: Option<i32>,
    retry_schedule: Option<&str>,
) -> StoreResult<DeliveryOptions> {
    Ok(DeliveryOptions {
        signature_style: SignatureStyle::from_str(signature_style)
            .map_err(|e| corrupt(format!("endpoints.signature_style: {e}")))?,
        timeout_ms: timeout_ms
            .map(|v| {
                u32::try_from(v)
                    .map_err(|_| corrupt(format!("endpoints.timeout_ms is negative: {v}")))
            })
            .transpose()?,
        retry_schedule: retry_schedule
            .map(|text| {
                RetrySchedule::from_str(text)
                    .map_err(|e| corrupt(format!("endpoints.retry_schedule {text:?}: {e}")))
            })
            .transpose()?,
    })
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
        assert_eq!(int_param(u32::MAX), i32::MAX);
        assert_eq!(bigint_param(u64::MAX), i64::MAX);
        assert_eq!(bigint_param(7_usize), 7);
    }

    #[test]
    fn delivery_options_round_trip_and_bad_stored_values_are_backend_errors() {
        let options = DeliveryOptions {
            signature_style: SignatureStyle::SeedSha256,
            timeout_ms: Some(2_500),
            retry_schedule: Some(RetrySchedule::parse("1s,2m,2h8m").unwrap()),
        };
        let (style, timeout, schedule) = delivery_options_params(&options).unwrap();
        let back = delivery_options(style, timeout, schedule.as_deref()).unwrap();
        assert_eq!(back, options);
        assert_eq!(
            delivery_options("standard-webhooks", None, None).unwrap(),
            DeliveryOptions::default()
        );
        for err in [
            delivery_options("hmac", None, None).unwrap_err(),
            delivery_options("sha256", Some(-1), None).unwrap_err(),
            delivery_options("sha256", None, Some("1s,,2s")).unwrap_err(),
        ] {
            assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
        }
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
