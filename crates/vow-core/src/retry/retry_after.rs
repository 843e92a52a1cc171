//! Reading a `Retry-After` response header (RFC 9110 §10.2.3) into a wait, relative to `now`.
//!
//! The header is either delta-seconds (`120`) or an HTTP-date. All three HTTP-date forms that
//! RFC 9110 §5.6.7 obliges a recipient to accept are read: IMF-fixdate
//! (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`)
//! and asctime (`Sun Nov  6 08:49:37 1994`). Anything else is `None`: a malformed hint is ignored,
//! never an error. Clamping the wait to sane bounds is the caller's business ([`super::decide()`]).

use std::time::Duration;

use chrono::{DateTime, Datelike, NaiveDateTime, Utc};

/// The wait a `Retry-After` value asks for, measured from `now`, unclamped; `None` if the value is
/// not valid delta-seconds or an HTTP-date. A date at or before `now` is a zero wait; delta-seconds
/// too large for a `u64` saturate.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = parse_http_date(value, now)?;
    Some((at - now).to_std().unwrap_or(Duration::ZERO))
}

/// Parses the three HTTP-date forms, all in GMT.
fn parse_http_date(s: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if let Ok(t) = NaiveDateTime::parse_from_str(s, "%a, %d %b %Y %H:%M:%S GMT") {
        return Some(t.and_utc());
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(s, "%a %b %e %H:%M:%S %Y") {
        return Some(t.and_utc());
    }
    // RFC 850: the weekday is checked by name only, since whether it matches the date depends on
    // the century, which is decided after parsing.
    let (weekday, rest) = s.split_once(", ")?;
    if weekday.is_empty() || !weekday.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    let t = NaiveDateTime::parse_from_str(rest, "%d-%b-%y %H:%M:%S GMT").ok()?;
    Some(with_rfc850_century(t, now).and_utc())
}

/// RFC 9110: a two-digit year that would be more than 50 years in the future is the most recent
/// past year with those last two digits.
fn with_rfc850_century(t: NaiveDateTime, now: DateTime<Utc>) -> NaiveDateTime {
    let two_digits = t.year().rem_euclid(100);
    let mut year = now.year() - now.year().rem_euclid(100) + two_digits;
    if year > now.year() + 50 {
        year -= 100;
    }
    t.with_year(year).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 10, 12, 0, 0).unwrap()
    }

    fn secs(n: u64) -> Option<Duration> {
        Some(Duration::from_secs(n))
    }

    #[test]
    fn delta_seconds_are_read_as_a_wait() {
        assert_eq!(parse_retry_after("120", now()), secs(120));
        assert_eq!(parse_retry_after(" 0 ", now()), secs(0));
        assert_eq!(parse_retry_after("007", now()), secs(7));
    }

    #[test]
    fn huge_delta_seconds_saturate_instead_of_failing() {
        assert_eq!(
            parse_retry_after("99999999999999999999999999", now()),
            secs(u64::MAX)
        );
    }

    #[test]
    fn an_imf_fixdate_is_read_relative_to_now() {
        assert_eq!(
            parse_retry_after("Mon, 10 Mar 2025 12:05:00 GMT", now()),
            secs(300)
        );
    }

    #[test]
    fn the_obsolete_rfc_850_and_asctime_dates_are_read_too() {
        assert_eq!(
            parse_retry_after("Monday, 10-Mar-25 12:01:00 GMT", now()),
            secs(60)
        );
        assert_eq!(
            parse_retry_after("Mon Mar 10 13:00:00 2025", now()),
            secs(3600)
        );
        let early_in_month = Utc.with_ymd_and_hms(2025, 3, 2, 0, 0, 0).unwrap();
        assert_eq!(
            parse_retry_after("Sun Mar  2 00:00:30 2025", early_in_month),
            secs(30)
        );
    }

    #[test]
    fn an_rfc_850_year_more_than_fifty_years_ahead_belongs_to_the_last_century() {
        // `94` is 1994, not 2094; `70` is 2070, within 50 years of 2025.
        assert_eq!(
            parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now()),
            secs(0)
        );
        let in_2070 = parse_retry_after("Wednesday, 01-Jan-70 00:00:00 GMT", now()).unwrap();
        assert!(in_2070 > Duration::from_secs(40 * 365 * 86_400));
    }

    #[test]
    fn a_date_in_the_past_is_a_zero_wait() {
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now()),
            secs(0)
        );
    }

    #[test]
    fn garbage_is_ignored() {
        for junk in [
            "",
            "   ",
            "-5",
            "1.5",
            "+30",
            "soon",
            "30s",
            "Mon, 10 Mar 2025 12:05:00 PST",
            "Mon, 10 Mar 2025 12:05:00",
            "Mon, 32 Mar 2025 12:05:00 GMT",
            "2025-03-10T12:05:00Z",
        ] {
            assert_eq!(parse_retry_after(junk, now()), None, "{junk:?}");
        }
    }
}
