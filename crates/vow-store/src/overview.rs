//! The console's Overview: what vow did in the last hour and the last day, and what waits now,
//! read without a count over a whole table.
//!
//! - **Deliveries**: recording a batch of outcomes
//!   ([`DeliveryOutcomes::record_attempts`](crate::queue::DeliveryOutcomes::record_attempts))
//!   adds the batch's [`tally`] to one row per minute of record time, in the same transaction: a
//!   day is [`MINUTES_PER_DAY`] small rows to read, whatever the traffic, and recording costs
//!   one row write per batch, not per attempt. Retention deletes the minutes older than
//!   [`KEPT`]. A window's counts are its minutes' sums ([`Windows`]).
//! - **Backlog**: pending deliveries due now (those being attempted included), found endpoint
//!   by endpoint on the claim indexes, counted up to [`COUNT_CAP`], and the earliest due time.
//! - **Inbound**: the events stored in a window are a range of their ids (made on arrival, so
//!   ordered by it: `first_at` of `vow_core`'s ids); the quarantined and uncertain ones are
//!   found source by source on the state index. Rejections by reason come from the rejection
//!   log's rows of the window; the log keeps only the newest rows of each source, so a count
//!   is a lower bound when a source's log lost rows that may fall in the window
//!   ([`Rejections::complete`]).
//! - Any count that could be large stops at [`COUNT_CAP`] ([`Count::more`]).

use std::collections::BTreeMap;
use std::ops::AddAssign;

use async_trait::async_trait;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use vow_core::{EndpointId, InboundEventId};

use crate::queue::{AttemptOutcome, NextState, Recorded};
use crate::StoreResult;

/// Where a count that could be large stops: the store reads at most one row more. On
/// PostgreSQL a count over a hot table (the backlog's pending deliveries, recent inbound
/// events) visits the heap for most rows, whose pages are rarely all-visible: 100,000 of them
/// took 150 ms (`tests/it/overview_speed.rs` of each backend), 10,000 stay within the page's
/// budget.
pub const COUNT_CAP: u64 = 10_000;

/// The minutes of a day: the last day's window and its 24 hourly bars.
pub const MINUTES_PER_DAY: i64 = 24 * 60;

/// How long the per-minute delivery activity is kept.
pub const KEPT: TimeDelta = TimeDelta::days(2);

/// Delivery activity over a span: a minute, an hour, a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Activity {
    /// Attempts that succeeded (2xx).
    pub succeeded: u64,
    /// Attempts that failed.
    pub failed: u64,
    /// Deliveries that ended delivered.
    pub delivered: u64,
    /// Deliveries that ended dead-lettered (with or without an attempt).
    pub dead_lettered: u64,
    /// Endpoints a dead-letter disabled (410 Gone, or the dead-letter count).
    pub disabled: u64,
}

impl Activity {
    /// Attempts made.
    pub fn attempts(&self) -> u64 {
        self.succeeded + self.failed
    }

    /// The share of attempts that succeeded; `None` without attempts.
    pub fn success_rate(&self) -> Option<f64> {
        ratio(self.succeeded, self.attempts())
    }

    /// The share of the deliveries that ended which were dead-lettered; `None` when none ended.
    pub fn dead_letter_rate(&self) -> Option<f64> {
        ratio(self.dead_lettered, self.delivered + self.dead_lettered)
    }
}

fn ratio(part: u64, whole: u64) -> Option<f64> {
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    (whole > 0).then(|| part as f64 / whole as f64)
}

impl AddAssign for Activity {
    fn add_assign(&mut self, other: Activity) {
        self.succeeded += other.succeeded;
        self.failed += other.failed;
        self.delivered += other.delivered;
        self.dead_lettered += other.dead_lettered;
        self.disabled += other.disabled;
    }
}

/// One minute's delivery activity, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivityMinute {
    /// The minute's start.
    pub minute: DateTime<Utc>,
    /// What was recorded in it.
    pub activity: Activity,
}

/// The start of the minute `at` falls in.
pub fn minute_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::minutes(1)).unwrap_or(at)
}

/// What a recorded batch adds, by minute of each outcome's record time (`now`), oldest first:
/// `recorded` pairs each outcome with what recording it did. An outcome whose lease was lost
/// wrote nothing and adds nothing.
pub fn tally<'a>(
    recorded: impl IntoIterator<Item = (&'a AttemptOutcome, &'a Recorded)>,
) -> Vec<ActivityMinute> {
    let mut minutes: BTreeMap<DateTime<Utc>, Activity> = BTreeMap::new();
    for (outcome, result) in recorded {
        let Recorded::Stored { endpoint_disabled } = result else {
            continue;
        };
        let one = minutes.entry(minute_of(outcome.now)).or_default();
        match &outcome.attempt {
            Some(a) if a.success => one.succeeded += 1,
            Some(_) => one.failed += 1,
            None => {}
        }
        match outcome.next {
            NextState::Delivered => one.delivered += 1,
            NextState::DeadLetter { .. } => one.dead_lettered += 1,
            NextState::RetryAt { .. } | NextState::Hold => {}
        }
        one.disabled += u64::from(*endpoint_disabled);
    }
    minutes
        .into_iter()
        .map(|(minute, activity)| ActivityMinute { minute, activity })
        .collect()
}

/// The range of inbound event ids made from `since` up to `now` (both included, to the
/// millisecond), as stored text: `id >= .0 AND id < .1`.
pub fn inbound_ids(since: DateTime<Utc>, now: DateTime<Utc>) -> (String, String) {
    let end = now + TimeDelta::milliseconds(1);
    (
        InboundEventId::first_at(since).to_string(),
        InboundEventId::first_at(end).to_string(),
    )
}

/// A count that stops at [`COUNT_CAP`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// The count, at most [`COUNT_CAP`].
    pub value: u64,
    /// There are more than [`COUNT_CAP`].
    pub more: bool,
}

impl Count {
    /// The count of `found` rows, read with a limit of [`Count::LIMIT`].
    pub fn of(found: u64) -> Count {
        Count {
            value: found.min(COUNT_CAP),
            more: found > COUNT_CAP,
        }
    }

    /// The `LIMIT` a capped count reads with: one row more than the cap, to know there are more.
    pub const LIMIT: i64 = COUNT_CAP as i64 + 1;
}

/// The deliveries waiting to be attempted now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Pending deliveries due at `now`, those being attempted included.
    pub due: Count,
    /// The earliest due time among them (how long the oldest has waited).
    pub oldest_due: Option<DateTime<Utc>>,
}

/// Inbound events that wait for an operator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Quarantined: a reused event id with another payload.
    pub quarantined: Count,
    /// Uncertain: a forward that may have taken effect.
    pub uncertain: Count,
}

/// Refused inbound requests by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rejections {
    /// `(reason, count)`, by reason.
    pub by_reason: Vec<(String, u64)>,
    /// Every refusal is counted; `false` when a source's log lost rows (it keeps only its
    /// newest) that may fall in the window, so the counts are lower bounds.
    pub complete: bool,
}

impl Rejections {
    /// All reasons together.
    pub fn total(&self) -> u64 {
        self.by_reason.iter().map(|(_, n)| n).sum()
    }
}

/// What a backend reads about inbound traffic for one window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboundWindow {
    /// Events stored (received or quarantined; a duplicate stores nothing).
    pub accepted: Count,
    /// Of those, the ones in each state that waits for an operator now.
    pub held: Held,
    /// Requests refused.
    pub rejections: Rejections,
}

/// One window of the overview.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Its start (a minute's start); it ends at the overview's `now`.
    pub since: DateTime<Utc>,
    /// Deliveries recorded in it.
    pub deliveries: Activity,
    /// Inbound traffic in it.
    pub inbound: InboundWindow,
}

/// One hour bar of the last day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hour {
    /// Its start.
    pub from: DateTime<Utc>,
    /// Deliveries recorded in it.
    pub activity: Activity,
}

/// How things stand at `now`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Current {
    /// Deliveries waiting.
    pub backlog: Backlog,
    /// Endpoints disabled.
    pub endpoints_disabled: Count,
    /// Inbound events waiting for an operator, whenever they arrived.
    pub held: Held,
}

/// The Overview page's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    /// When they were read.
    pub now: DateTime<Utc>,
    /// The last hour (sixty minutes, the current one included).
    pub hour: Window,
    /// The last day (as many minutes).
    pub day: Window,
    /// The last day by hour, oldest first: 24 bars, the last of which is `hour`.
    pub hours: Vec<Hour>,
    /// How things stand now.
    pub current: Current,
}

/// Where an overview's windows start, at `now`: whole minutes, the current one included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    /// The overview's time.
    pub now: DateTime<Utc>,
    /// The last hour's first minute.
    pub hour_since: DateTime<Utc>,
    /// The last day's first minute (also the first hour bar's).
    pub day_since: DateTime<Utc>,
}

impl Windows {
    /// The windows of an overview at `now`.
    pub fn at(now: DateTime<Utc>) -> Windows {
        let current = minute_of(now);
        Windows {
            now,
            hour_since: current - TimeDelta::minutes(59),
            day_since: current - TimeDelta::minutes(MINUTES_PER_DAY - 1),
        }
    }

    /// The overview these windows make of what a backend read: `minutes`, the delivery
    /// activity from `day_since` on (later minutes than `now`'s are left out), the inbound
    /// traffic of the last `hour` and `day`, and `current`.
    pub fn assemble(
        &self,
        minutes: &[ActivityMinute],
        hour: InboundWindow,
        day: InboundWindow,
        current: Current,
    ) -> Overview {
        let mut hours: Vec<Hour> = (0..24)
            .map(|h| Hour {
                from: self.day_since + TimeDelta::hours(h),
                activity: Activity::default(),
            })
            .collect();
        let last = minute_of(self.now);
        for m in minutes
            .iter()
            .filter(|m| m.minute >= self.day_since && m.minute <= last)
        {
            let hour = (m.minute - self.day_since).num_hours();
            if let Some(bar) = usize::try_from(hour).ok().and_then(|h| hours.get_mut(h)) {
                bar.activity += m.activity;
            }
        }
        let mut whole_day = Activity::default();
        for bar in &hours {
            whole_day += bar.activity;
        }
        let last_hour = hours.last().map(|h| h.activity).unwrap_or_default();
        Overview {
            now: self.now,
            hour: Window {
                since: self.hour_since,
                deliveries: last_hour,
                inbound: hour,
            },
            day: Window {
                since: self.day_since,
                deliveries: whole_day,
                inbound: day,
            },
            hours,
            current,
        }
    }
}

/// The Overview's read. Part of [`crate::Store`].
#[async_trait]
pub trait Overviews: Send + Sync + 'static {
    /// The overview at `now` (see the module docs for what each figure reads).
    async fn overview(&self, now: DateTime<Utc>) -> StoreResult<Overview>;

    /// Only the overview's backlog at `now` (for the metrics gauges at each scrape), without
    /// the deliveries of the endpoints in `except` (the backlog bound leaves out the endpoints
    /// that hold up their own deliveries: `vow-server`'s `admission`).
    async fn backlog(&self, now: DateTime<Utc>, except: &[EndpointId]) -> StoreResult<Backlog>;

    /// How many processes deliver from this store now, at least 1: the due backlog is shared
    /// among them (`vow-server`'s `admission` divides its wait by their drain). A store only one
    /// process opens has one.
    async fn delivering_nodes(&self) -> StoreResult<u64> {
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use vow_core::{AttemptId, DeliveryId};

    use super::*;
    use crate::queue::{AttemptTrigger, LeaseToken, NewAttempt};

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_767_225_600 + secs, 0).unwrap()
    }

    fn outcome(success: Option<bool>, next: NextState, secs: i64) -> AttemptOutcome {
        AttemptOutcome {
            delivery_id: DeliveryId::new(),
            lease: LeaseToken("t".into()),
            attempt: success.map(|success| NewAttempt {
                id: AttemptId::new(),
                started_at: at(secs),
                url: "https://example.com".into(),
                response_status: Some(if success { 200 } else { 500 }),
                response: String::new(),
                duration_ms: 1,
                success,
                error: None,
                trigger: AttemptTrigger::Scheduled,
            }),
            next,
            now: at(secs),
        }
    }

    const STORED: Recorded = Recorded::Stored {
        endpoint_disabled: false,
    };

    #[test]
    fn a_batch_is_tallied_by_minute_and_lost_leases_add_nothing() {
        let dead = NextState::DeadLetter {
            reason: "gone".into(),
            disable_endpoint: true,
        };
        let retry = NextState::RetryAt {
            at: at(90),
            client_errors: 0,
        };
        let outcomes = [
            outcome(Some(true), NextState::Delivered, 5),
            outcome(Some(false), retry, 59),
            outcome(Some(false), dead.clone(), 61),
            outcome(None, dead, 62),
            outcome(Some(true), NextState::Delivered, 63),
        ];
        let results = [
            STORED,
            STORED,
            Recorded::Stored {
                endpoint_disabled: true,
            },
            STORED,
            Recorded::LeaseLost,
        ];
        let minutes = tally(outcomes.iter().zip(&results));
        let first = Activity {
            succeeded: 1,
            failed: 1,
            delivered: 1,
            ..Activity::default()
        };
        let second = Activity {
            failed: 1,
            dead_lettered: 2,
            disabled: 1,
            ..Activity::default()
        };
        assert_eq!(
            minutes,
            [
                ActivityMinute {
                    minute: at(0),
                    activity: first
                },
                ActivityMinute {
                    minute: at(60),
                    activity: second
                },
            ]
        );
        assert_eq!(second.dead_letter_rate(), Some(1.0));
        assert_eq!(first.success_rate(), Some(0.5));
        assert_eq!(Activity::default().success_rate(), None);
    }

    #[test]
    fn the_hour_is_the_last_of_24_bars_and_the_day_their_sum() {
        let now = at(3 * 86_400 + 30);
        let w = Windows::at(now);
        assert_eq!(w.hour_since, minute_of(now) - TimeDelta::minutes(59));
        assert_eq!(w.day_since, minute_of(now) - TimeDelta::minutes(1439));
        let one = |succeeded| Activity {
            succeeded,
            ..Activity::default()
        };
        let minutes = [
            // Before the day: left out.
            (w.day_since - TimeDelta::minutes(1), 1000),
            (w.day_since, 1),
            (w.day_since + TimeDelta::minutes(61), 10),
            (w.hour_since - TimeDelta::minutes(1), 100),
            (w.hour_since, 1000),
            (minute_of(now), 10_000),
            // After `now`: left out.
            (minute_of(now) + TimeDelta::minutes(1), 100_000),
        ]
        .map(|(minute, n)| ActivityMinute {
            minute,
            activity: one(n),
        });
        let o = w.assemble(
            &minutes,
            InboundWindow::default(),
            InboundWindow::default(),
            Current::default(),
        );
        assert_eq!(o.hours.len(), 24);
        assert_eq!(o.hours[0].from, w.day_since);
        assert_eq!(o.hours[23].from, w.hour_since);
        let bars: Vec<u64> = o.hours.iter().map(|h| h.activity.succeeded).collect();
        assert_eq!(&bars[..2], [1, 10]);
        assert_eq!(bars[22], 100);
        assert_eq!(bars[23], 11_000);
        assert_eq!(o.hour.deliveries.succeeded, 11_000);
        assert_eq!(o.day.deliveries.succeeded, 11_111);
        assert_eq!((o.hour.since, o.day.since), (w.hour_since, w.day_since));
    }

    #[test]
    fn a_count_past_the_cap_says_there_are_more() {
        assert_eq!(
            Count::of(7),
            Count {
                value: 7,
                more: false
            }
        );
        let over = Count::of(u64::try_from(Count::LIMIT).unwrap());
        assert_eq!((over.value, over.more), (COUNT_CAP, true));
    }
}
