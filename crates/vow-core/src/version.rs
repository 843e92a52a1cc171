//! What an inbound event's version means (ADR 8, issue 13): the value at a source's
//! `versionPointer`, by which the events of one entity are ordered.
//!
//! A version is either a **number** or an **RFC 3339 time**, and is compared by what it means,
//! never by its text:
//! - a number (`[+-]digits[.digits][(e|E)[+-]digits]`, a JSON number or a string holding one)
//!   compares exactly as a decimal, whatever its size or precision: `9 < 10`,
//!   `18446744073709551616 < 18446744073709551617`, `1 = 1.0 = 1e0 = 10e-1`;
//! - an RFC 3339 time compares as the instant it names (to the nanosecond), whatever its offset
//!   or fraction: `2026-01-01T10:00:00+02:00` is before `2026-01-01T09:00:00Z`, and
//!   `…:00.5Z` after `…:00Z`.
//!
//! Anything else [`Unorderable`]; a number and a time cannot be ordered against each other
//! either ([`Version::partial_cmp`] is `None`).

use std::cmp::Ordering;
use std::fmt;

use chrono::{DateTime, Utc};

/// A parsed version: a number or an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// An exact decimal number.
    Number(Decimal),
    /// An RFC 3339 time, as the instant it names.
    Instant(DateTime<Utc>),
}

/// A value that is neither a number nor an RFC 3339 time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{shown} is neither a number nor an RFC 3339 time")]
pub struct Unorderable {
    shown: String,
}

impl Unorderable {
    fn of(text: &str) -> Self {
        const SHOWN: usize = 64;
        let shown = match text.char_indices().nth(SHOWN) {
            Some((end, _)) => format!("{:?}…", &text[..end]),
            None => format!("{text:?}"),
        };
        Self { shown }
    }
}

impl Version {
    /// The version `text` stands for (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Result<Version, Unorderable> {
        let trimmed = text.trim();
        if let Some(number) = Decimal::parse(trimmed) {
            return Ok(Version::Number(number));
        }
        DateTime::parse_from_rfc3339(trimmed)
            .map(|t| Version::Instant(t.with_timezone(&Utc)))
            .map_err(|_| Unorderable::of(text))
    }

    /// What kind of version it is (`number`, `RFC 3339 time`), for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Version::Number(_) => "number",
            Version::Instant(_) => "RFC 3339 time",
        }
    }
}

impl PartialOrd for Version {
    /// Numbers by value, instants in time order; a number and an instant are not comparable.
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        match (self, other) {
            (Version::Number(a), Version::Number(b)) => Some(a.cmp(b)),
            (Version::Instant(a), Version::Instant(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }
}

/// An exact decimal: `±0.d₁d₂…dₙ × 10^exponent` with `d₁ ≠ 0` and `dₙ ≠ 0` (no digits: zero),
/// so equal values have equal representations and comparison needs no arithmetic.
#[derive(Clone, PartialEq, Eq)]
pub struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exponent: i64,
}

impl Decimal {
    /// Exponents beyond this many digits are refused (no version needs them).
    const MAX_EXPONENT_DIGITS: usize = 15;

    /// `[+-]digits[.digits][(e|E)[+-]digits]`, else `None`.
    fn parse(text: &str) -> Option<Decimal> {
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(at) => (&rest[..at], parse_exponent(&rest[at + 1..])?),
            None => (rest, 0),
        };
        let (integer, fraction) = match mantissa.split_once('.') {
            Some((integer, fraction)) if !fraction.is_empty() => (integer, fraction),
            Some(_) => return None,
            None => (mantissa, ""),
        };
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if integer.is_empty() || !all_digits(integer) || !all_digits(fraction) {
            return None;
        }
        let significant: Vec<u8> = integer
            .bytes()
            .chain(fraction.bytes())
            .skip_while(|&b| b == b'0')
            .collect();
        let trailing = significant.iter().rev().take_while(|&&b| b == b'0').count();
        let digits = significant[..significant.len() - trailing].to_vec();
        if digits.is_empty() {
            return Some(Decimal {
                negative: false,
                digits,
                exponent: 0,
            });
        }
        // value = significant × 10^(exponent − |fraction|) = 0.digits × 10^(that + |significant|)
        let exponent = exponent
            .checked_sub(i64::try_from(fraction.len()).ok()?)?
            .checked_add(i64::try_from(significant.len()).ok()?)?;
        Some(Decimal {
            negative,
            digits,
            exponent,
        })
    }

    /// Compares magnitudes.
    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        match (self.digits.is_empty(), other.digits.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            // Digit strings without trailing zeros compare as fractions 0.d₁d₂….
            (false, false) => self
                .exponent
                .cmp(&other.exponent)
                .then_with(|| self.digits.cmp(&other.digits)),
        }
    }
}

fn parse_exponent(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty()
        || digits.len() > Decimal::MAX_EXPONENT_DIGITS
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    text.parse().ok()
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for Decimal {
    /// `-0.12e3` style: sign, `0.` and the digits, the exponent.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.negative { "-" } else { "" };
        let digits = String::from_utf8_lossy(&self.digits);
        write!(f, "{sign}0.{digits}e{}", self.exponent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    fn order(a: &str, b: &str) -> Option<Ordering> {
        v(a).partial_cmp(&v(b))
    }

    #[test]
    fn numbers_compare_by_value() {
        assert_eq!(order("10", "9"), Some(Ordering::Greater));
        assert_eq!(order("-10", "-9"), Some(Ordering::Less));
        assert_eq!(order("0.5", "-0.5"), Some(Ordering::Greater));
        assert_eq!(
            order("18446744073709551617", "18446744073709551616"),
            Some(Ordering::Greater)
        );
        assert_eq!(
            order("123456789.123456789", "123456789.123456788"),
            Some(Ordering::Greater)
        );
        for same in ["1.0", "1e0", "10e-1", "+1", "0001.000", " 1 ", "0.1E1"] {
            assert_eq!(order(same, "1"), Some(Ordering::Equal), "{same}");
        }
        assert_eq!(order("-0", "0.000"), Some(Ordering::Equal));
        assert_eq!(order("1e400", "9e399"), Some(Ordering::Greater));
        assert_eq!(order("0.01", "0.1"), Some(Ordering::Less));
    }

    #[test]
    fn rfc3339_times_compare_as_instants() {
        assert_eq!(
            order("2026-01-01T10:00:00+02:00", "2026-01-01T09:00:00Z"),
            Some(Ordering::Less)
        );
        assert_eq!(
            order("2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00Z"),
            Some(Ordering::Greater)
        );
        assert_eq!(
            order("2026-01-01T02:00:00+02:00", "2026-01-01T00:00:00.000Z"),
            Some(Ordering::Equal)
        );
    }

    #[test]
    fn other_values_and_mixed_kinds_cannot_be_ordered() {
        for text in [
            "v3",
            "",
            "1.",
            ".5",
            "1e",
            "0x10",
            "NaN",
            "true",
            "2026-01-01",
            "1e9999999999999999",
        ] {
            assert!(Version::parse(text).is_err(), "{text}");
        }
        assert_eq!(order("5", "2026-01-01T00:00:00Z"), None);
        let err = Version::parse(&"x".repeat(100)).unwrap_err().to_string();
        let shown = "x".repeat(64);
        assert!(err.contains(&format!("\"{shown}\"…")), "shortened: {err}");
        assert!(err.ends_with("RFC 3339 time"), "{err}");
    }

    proptest! {
        #[test]
        fn integers_order_as_integers(a in any::<i128>(), b in any::<i128>()) {
            prop_assert_eq!(order(&a.to_string(), &b.to_string()), Some(a.cmp(&b)));
        }

        #[test]
        fn a_number_equals_its_shifted_notations(m in any::<i64>(), shift in 0u32..30) {
            let plain = m.to_string();
            let shifted = format!("{plain}{}e-{shift}", "0".repeat(shift as usize));
            prop_assert_eq!(order(&plain, &shifted), Some(Ordering::Equal));
        }

        #[test]
        fn times_order_as_instants(a in 0i64..4_000_000_000, b in 0i64..4_000_000_000,
                                   na in 0u32..1_000_000_000, off in -86_000i32..86_000) {
            let ta = DateTime::from_timestamp(a, na).unwrap();
            let tb = DateTime::from_timestamp(b, 0).unwrap();
            let offset = chrono::FixedOffset::east_opt(off / 60 * 60).unwrap();
            let shown = ta.with_timezone(&offset).to_rfc3339();
            prop_assert_eq!(order(&shown, &tb.to_rfc3339()), Some(ta.cmp(&tb)));
        }
    }
}
