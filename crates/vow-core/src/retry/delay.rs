//! One delay of a retry schedule: its text form (`30s`, `2m`, `2h8m`, `250ms`, `1d`) and equal
//! jitter.
//!
//! A delay is one or more `<number><unit>` groups, summed, with units `ms`, `s`, `m`, `h` and `d`,
//! positive and at most [`MAX_DELAY`]. It is written back with hours as the largest unit and zero
//! parts left out, so the written form parses to the same delay.

use std::{fmt, time::Duration};

use rand::Rng;

/// The longest single delay a schedule may hold: 30 days.
pub const MAX_DELAY: Duration = Duration::from_secs(30 * 24 * 60 * 60);

const UNITS_HINT: &str = "units: ms, s, m, h, d";

/// What is wrong with one item of a retry schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ItemProblem {
    /// Not of the form `<number><unit>…`.
    #[error("is not a duration (write e.g. `30s`, `2m` or `2h8m`; {UNITS_HINT})")]
    NotADuration,
    /// A number with no unit, e.g. `30`.
    #[error("has no unit (write e.g. `30s`; {UNITS_HINT})")]
    MissingUnit,
    /// A unit that is not one of `ms`, `s`, `m`, `h`, `d`.
    #[error("has an unknown unit `{0}` ({UNITS_HINT})")]
    UnknownUnit(String),
    /// The delay is zero.
    #[error("is zero (every retry needs a positive delay)")]
    Zero,
    /// The delay exceeds [`MAX_DELAY`].
    #[error("is longer than the maximum delay of 30 days")]
    TooLong,
}

/// Equal jitter: `d/2 + uniform(0, d/2)`, at millisecond resolution, so the result is always in
/// `[d/2, d]`. Keeps half the backoff and spreads the other half to break up retry herds.
pub fn equal_jitter<R: Rng + ?Sized>(d: Duration, rng: &mut R) -> Duration {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let half = ms / 2;
    Duration::from_millis(ms - half + rng.gen_range(0..=half))
}

/// Parses one delay: one or more `<digits><unit>` groups, summed.
pub fn parse_delay(item: &str) -> Result<Duration, ItemProblem> {
    let mut rest = item;
    let mut total_ms: u64 = 0;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits_end == 0 {
            return Err(ItemProblem::NotADuration);
        }
        let (digits, after) = rest.split_at(digits_end);
        let unit_end = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let unit_ms: u64 = match unit {
            "" if after.is_empty() => return Err(ItemProblem::MissingUnit),
            "" => return Err(ItemProblem::NotADuration),
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            other => return Err(ItemProblem::UnknownUnit(other.to_owned())),
        };
        // Every digit string too large for u64 is also far beyond MAX_DELAY.
        let n: u64 = digits.parse().map_err(|_| ItemProblem::TooLong)?;
        total_ms = n
            .checked_mul(unit_ms)
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or(ItemProblem::TooLong)?;
        rest = after;
    }
    let delay = Duration::from_millis(total_ms);
    if delay.is_zero() {
        Err(ItemProblem::Zero)
    } else if delay > MAX_DELAY {
        Err(ItemProblem::TooLong)
    } else {
        Ok(delay)
    }
}

/// Displays a delay as `2h8m`, `30s`, `1m500ms`: hours, minutes, seconds, milliseconds, zeros left
/// out (sub-millisecond parts are dropped; parsed delays have none).
pub(super) struct DisplayDelay(pub(super) Duration);

impl fmt::Display for DisplayDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        let parts = [
            (ms / 3_600_000, "h"),
            (ms / 60_000 % 60, "m"),
            (ms / 1_000 % 60, "s"),
            (ms % 1_000, "ms"),
        ];
        for (n, unit) in parts {
            if n > 0 {
                write!(f, "{n}{unit}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{rngs::StdRng, SeedableRng};

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_delay_is_a_sum_of_number_and_unit_groups() {
        for (text, want) in [
            ("250ms", Duration::from_millis(250)),
            ("30s", secs(30)),
            ("2m", secs(120)),
            ("2h8m", secs(7680)),
            ("1d", secs(86_400)),
            ("1m30s500ms", Duration::from_millis(90_500)),
            ("90s", secs(90)),
        ] {
            assert_eq!(parse_delay(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn a_delay_is_written_with_hours_as_the_largest_unit() {
        for (d, want) in [
            (secs(86_400), "24h"),
            (secs(90), "1m30s"),
            (secs(7680), "2h8m"),
            (Duration::from_millis(1_001), "1s1ms"),
        ] {
            assert_eq!(DisplayDelay(d).to_string(), want);
        }
    }

    #[test]
    fn thirty_days_is_the_longest_delay_accepted() {
        assert_eq!(parse_delay("30d").unwrap(), MAX_DELAY);
        assert_eq!(parse_delay("720h").unwrap(), MAX_DELAY);
        assert!(parse_delay("720h1ms") == Err(ItemProblem::TooLong));
    }

    #[test]
    fn equal_jitter_stays_within_half_and_all_of_the_delay() {
        let mut rng = StdRng::seed_from_u64(3);
        for d in [30, 120, 480, 1920, 7680, 30720, 86400]
            .map(secs)
            .into_iter()
            .chain([Duration::from_millis(1), Duration::from_millis(3)])
        {
            let mut seen_low_half = false;
            let mut seen_high_half = false;
            for _ in 0..500 {
                let j = equal_jitter(d, &mut rng);
                assert!(j >= d / 2 && j <= d, "{j:?} outside [{:?}, {d:?}]", d / 2);
                seen_low_half |= j < d * 3 / 4;
                seen_high_half |= j > d * 3 / 4;
            }
            if d >= secs(1) {
                assert!(
                    seen_low_half && seen_high_half,
                    "jitter of {d:?} is not spread"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn any_delay_survives_a_display_parse_round_trip(ms in 1u64..=MAX_DELAY.as_millis() as u64) {
            let d = Duration::from_millis(ms);
            prop_assert_eq!(parse_delay(&DisplayDelay(d).to_string()), Ok(d));
        }
    }
}
