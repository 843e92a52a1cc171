//! The retry schedule: how long to wait before each retry, and so how many attempts a delivery
//! gets.
//!
//! A schedule is written as comma-separated delays, one per retry (the first attempt is always
//! immediate), e.g. `30s,2m,8m`. Each delay is one or more `<number><unit>` groups with units `ms`,
//! `s`, `m`, `h` or `d` (`2h8m`, `90s`, `1d`). The word `none` is the schedule with no retries; an
//! empty string is an error rather than "no retries", because an empty environment variable is far
//! more often a mistake than a decision. Each delay must be positive and at most
//! [`MAX_DELAY`](super::MAX_DELAY); a schedule has at most [`MAX_RETRIES`] delays. `Display`
//! writes the canonical form (largest unit `h`), which `parse` reads back to the same schedule;
//! serde uses that string.

use std::{fmt, str::FromStr, time::Duration};

use super::delay::{parse_delay, DisplayDelay, ItemProblem};

/// The most retries (delays) a schedule may hold.
pub const MAX_RETRIES: usize = 100;

/// Seed 003's delays in milliseconds: 30 s × 4ⁿ, capped at 24 h.
const DEFAULT_DELAYS_MS: [u64; 7] = [
    30_000,     // 30s
    120_000,    // 2m
    480_000,    // 8m
    1_920_000,  // 32m
    7_680_000,  // 2h8m  (~2 h)
    30_720_000, // 8h32m (~8.5 h)
    86_400_000, // 24h (the cap)
];

/// Why a retry schedule string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The whole string was empty or blank.
    #[error(
        "the retry schedule is empty: write delays like `30s,2m,8m`, or `none` for no retries"
    )]
    Empty,
    /// One comma-separated item was empty (a doubled or trailing comma).
    #[error("retry schedule item {position} is empty (check for a doubled or trailing comma)")]
    EmptyItem {
        /// 1-based position of the item.
        position: usize,
    },
    /// One item is not an acceptable delay.
    #[error("retry schedule item {position} `{item}` {problem}")]
    InvalidItem {
        /// 1-based position of the item.
        position: usize,
        /// The item as written (trimmed).
        item: String,
        /// What is wrong with it.
        problem: ItemProblem,
    },
    /// More than [`MAX_RETRIES`] delays.
    #[error("the retry schedule has {count} delays; at most {max} are allowed")]
    TooManyRetries {
        /// How many delays were given.
        count: usize,
        /// The limit, [`MAX_RETRIES`].
        max: usize,
    },
}

/// The delays before each retry of a delivery. Built by [`RetrySchedule::parse`]; the default is
/// seed 003's `30s,2m,8m,32m,2h8m,8h32m,24h` (8 attempts).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RetrySchedule {
    delays: Vec<Duration>,
}

impl RetrySchedule {
    /// Parses the string form described in the [module docs](self), e.g. `1s,2s,4s` (4 attempts)
    /// or `none` (1 attempt). Surrounding whitespace, overall and per item, is ignored.
    pub fn parse(s: &str) -> Result<Self, ScheduleError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ScheduleError::Empty);
        }
        if s.eq_ignore_ascii_case("none") {
            return Ok(Self::none());
        }
        let items: Vec<&str> = s.split(',').map(str::trim).collect();
        if items.len() > MAX_RETRIES {
            return Err(ScheduleError::TooManyRetries {
                count: items.len(),
                max: MAX_RETRIES,
            });
        }
        let delays = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let position = i + 1;
                if item.is_empty() {
                    return Err(ScheduleError::EmptyItem { position });
                }
                parse_delay(item).map_err(|problem| ScheduleError::InvalidItem {
                    position,
                    item: (*item).to_owned(),
                    problem,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { delays })
    }

    /// The schedule with no retries: one attempt, then dead-letter.
    pub fn none() -> Self {
        Self { delays: Vec::new() }
    }

    /// Attempts a delivery gets in all: the immediate first one plus one per delay.
    pub fn max_attempts(&self) -> u32 {
        // At most MAX_RETRIES + 1, so this never truncates.
        self.delays.len() as u32 + 1
    }

    /// The delays, one per retry, in order.
    pub fn delays(&self) -> &[Duration] {
        &self.delays
    }

    /// The longest delay (zero for [`none`](Self::none)); `Retry-After` is clamped to it.
    pub fn cap(&self) -> Duration {
        self.delays.iter().copied().max().unwrap_or(Duration::ZERO)
    }

    /// The un-jittered delay between attempt `attempt` (1-based; 0 is read as 1) and the next,
    /// or `None` when `attempt` was the last one the schedule allows.
    pub fn delay_after(&self, attempt: u32) -> Option<Duration> {
        let index = usize::try_from(attempt.max(1) - 1).ok()?;
        self.delays.get(index).copied()
    }
}

impl Default for RetrySchedule {
    fn default() -> Self {
        Self {
            delays: DEFAULT_DELAYS_MS
                .iter()
                .map(|&ms| Duration::from_millis(ms))
                .collect(),
        }
    }
}

impl fmt::Display for RetrySchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.delays.is_empty() {
            return f.write_str("none");
        }
        for (i, d) in self.delays.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", DisplayDelay(*d))?;
        }
        Ok(())
    }
}

impl fmt::Debug for RetrySchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RetrySchedule({self})")
    }
}

impl FromStr for RetrySchedule {
    type Err = ScheduleError;
    fn from_str(s: &str) -> Result<Self, ScheduleError> {
        Self::parse(s)
    }
}

impl serde::Serialize for RetrySchedule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for RetrySchedule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::delay::MAX_DELAY;
    use proptest::prelude::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn the_default_is_seed_003s_schedule_of_eight_attempts() {
        let s = RetrySchedule::default();
        assert_eq!(s.to_string(), "30s,2m,8m,32m,2h8m,8h32m,24h");
        assert_eq!(s.max_attempts(), 8);
        assert_eq!(s.cap(), secs(24 * 3600));
        assert_eq!(s.delay_after(1), Some(secs(30)));
        assert_eq!(s.delay_after(7), Some(secs(24 * 3600)));
        assert_eq!(s.delay_after(8), None);
    }

    #[test]
    fn one_two_four_seconds_means_at_most_four_attempts() {
        let s = RetrySchedule::parse("1s,2s,4s").unwrap();
        assert_eq!(s.max_attempts(), 4);
        assert_eq!(s.delays(), &[secs(1), secs(2), secs(4)]);
        assert_eq!(s.cap(), secs(4));
    }

    #[test]
    fn every_unit_and_compound_delays_are_understood() {
        let s = RetrySchedule::parse(" 250ms , 90s,2m,1h30m, 1d ,2h8m").unwrap();
        assert_eq!(
            s.delays(),
            &[
                Duration::from_millis(250),
                secs(90),
                secs(120),
                secs(5400),
                secs(86_400),
                secs(7680)
            ]
        );
        assert_eq!(s.to_string(), "250ms,1m30s,2m,1h30m,24h,2h8m");
    }

    #[test]
    fn none_means_a_single_attempt_and_displays_as_none() {
        for text in ["none", " NONE "] {
            let s = RetrySchedule::parse(text).unwrap();
            assert_eq!(s, RetrySchedule::none());
            assert_eq!(s.max_attempts(), 1);
            assert_eq!(s.cap(), Duration::ZERO);
            assert_eq!(s.delay_after(1), None);
            assert_eq!(s.to_string(), "none");
        }
    }

    #[test]
    fn an_empty_schedule_is_an_error_that_suggests_none() {
        for text in ["", "   "] {
            let err = RetrySchedule::parse(text).unwrap_err();
            assert_eq!(err, ScheduleError::Empty);
            assert!(err.to_string().contains("`none`"), "{err}");
        }
    }

    #[test]
    fn empty_items_are_named_by_position() {
        for (text, position) in [("1s,,2s", 2), ("1s,2s,", 3), (",1s", 1)] {
            let err = RetrySchedule::parse(text).unwrap_err();
            assert_eq!(err, ScheduleError::EmptyItem { position }, "{text}");
            assert!(err.to_string().contains(&format!("item {position}")));
        }
    }

    #[test]
    fn bad_items_give_errors_naming_the_item_and_the_problem() {
        let cases = [
            ("1s,5x", 2, "5x", ItemProblem::UnknownUnit("x".into())),
            ("30", 1, "30", ItemProblem::MissingUnit),
            ("1s,2s,1.5s", 3, "1.5s", ItemProblem::NotADuration),
            ("s", 1, "s", ItemProblem::NotADuration),
            ("2h 8m", 1, "2h 8m", ItemProblem::NotADuration),
            ("-1s", 1, "-1s", ItemProblem::NotADuration),
            ("1S", 1, "1S", ItemProblem::UnknownUnit("S".into())),
            ("1s,0s", 2, "0s", ItemProblem::Zero),
            ("31d", 1, "31d", ItemProblem::TooLong),
            (
                "99999999999999999999999s",
                1,
                "99999999999999999999999s",
                ItemProblem::TooLong,
            ),
            (
                "18446744073709551615d",
                1,
                "18446744073709551615d",
                ItemProblem::TooLong,
            ),
        ];
        for (text, position, item, problem) in cases {
            let err = RetrySchedule::parse(text).unwrap_err();
            let message = err.to_string();
            assert_eq!(
                err,
                ScheduleError::InvalidItem {
                    position,
                    item: item.into(),
                    problem
                },
                "{text}"
            );
            assert!(
                message.contains(&format!("item {position} `{item}`")),
                "{message}"
            );
        }
        assert_eq!(
            RetrySchedule::parse("1s,5x").unwrap_err().to_string(),
            "retry schedule item 2 `5x` has an unknown unit `x` (units: ms, s, m, h, d)"
        );
    }

    #[test]
    fn more_than_a_hundred_retries_are_refused() {
        let ok = vec!["1s"; MAX_RETRIES].join(",");
        assert_eq!(RetrySchedule::parse(&ok).unwrap().max_attempts(), 101);
        let too_many = vec!["1s"; MAX_RETRIES + 1].join(",");
        assert_eq!(
            RetrySchedule::parse(&too_many).unwrap_err(),
            ScheduleError::TooManyRetries {
                count: 101,
                max: 100
            }
        );
    }

    #[test]
    fn serde_uses_the_string_form() {
        let s = RetrySchedule::parse("1s,2s,4s").unwrap();
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, r#""1s,2s,4s""#);
        assert_eq!(serde_json::from_str::<RetrySchedule>(&json).unwrap(), s);
        let err = serde_json::from_str::<RetrySchedule>(r#""1s,nope""#).unwrap_err();
        assert!(err.to_string().contains("item 2 `nope`"), "{err}");
    }

    #[test]
    fn from_str_and_debug_agree_with_parse_and_display() {
        let s: RetrySchedule = "1m,1h".parse().unwrap();
        assert_eq!(format!("{s:?}"), "RetrySchedule(1m,1h)");
    }

    #[test]
    fn attempt_zero_is_read_as_the_first_attempt() {
        let s = RetrySchedule::default();
        assert_eq!(s.delay_after(0), s.delay_after(1));
    }

    proptest! {
        #[test]
        fn any_schedule_survives_a_display_parse_round_trip(
            delays_ms in prop::collection::vec(1u64..=MAX_DELAY.as_millis() as u64, 0..20)
        ) {
            let s = RetrySchedule { delays: delays_ms.into_iter().map(Duration::from_millis).collect() };
            let text = s.to_string();
            let back = RetrySchedule::parse(&text).unwrap();
            prop_assert_eq!(&back, &s);
            prop_assert_eq!(back.to_string(), text);
        }
    }
}
