//! A source's activity as `vow tail --source` streams it: each event as it arrived (`received`,
//! or `quarantined`: a reused id with another payload), each destination's outcome as it was
//! recorded, and each refused request.
//!
//! The three are read together by one keyset cursor, an [`ActivityKey`]: when the row was
//! written (an event's or a rejection's arrival, a forward's last outcome) and, to order rows
//! of one microsecond, its ids. A forward's row is rewritten in place with each outcome, so
//! each outcome is a new key and is read again; an outcome overwritten before it was read is
//! not (the row holds only the last one).

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{InboundEventId, SourceId};

use super::processing::{Forward, Outcome};
use super::{InboundEvent, Rejection};
use crate::rows::destination_key;
use crate::StoreResult;

/// Where a row stands in a source's activity: its time, then its ids (an event's or a
/// rejection's id and `""`; a forward's event id and destination key). Ordered field by field.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActivityKey {
    /// When the row was written.
    pub at: DateTime<Utc>,
    /// The row's id (a forward's: its event's).
    pub id: String,
    /// A forward's destination key; `""` otherwise.
    pub part: String,
}

impl ActivityKey {
    /// The smallest key of a row written at `at` (to the microsecond, as stored).
    pub fn first_at(at: DateTime<Utc>) -> Self {
        Self {
            at: DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap_or(at),
            id: String::new(),
            part: String::new(),
        }
    }
}

/// The text form: `<microseconds since the epoch>.<id>.<part>` (ids hold no `.`).
impl fmt::Display for ActivityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}",
            self.at.timestamp_micros(),
            self.id,
            self.part
        )
    }
}

/// A text that is not an [`ActivityKey`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected a position in a source's activity: `<microseconds>.<id>.<part>`")]
pub struct NotAKey;

impl FromStr for ActivityKey {
    type Err = NotAKey;

    fn from_str(s: &str) -> Result<Self, NotAKey> {
        let mut parts = s.splitn(3, '.');
        let (Some(micros), Some(id), Some(part)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(NotAKey);
        };
        let at = micros
            .parse()
            .ok()
            .and_then(DateTime::from_timestamp_micros);
        Ok(Self {
            at: at.ok_or(NotAKey)?,
            id: id.to_string(),
            part: part.to_string(),
        })
    }
}

/// One thing that happened at a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// An event as it arrived; its state as it stands when read.
    Event(InboundEvent),
    /// A destination's outcome of an event, as last recorded.
    Forward(ForwardActivity),
    /// A refused request.
    Rejection(Rejection),
}

/// A destination's outcome of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardActivity {
    /// The event.
    pub event: InboundEventId,
    /// The provider's id of the event, if it had one.
    pub provider_event_id: Option<String>,
    /// The outcome at that destination.
    pub forward: Forward,
}

impl Activity {
    /// Its place in the activity.
    pub fn key(&self) -> ActivityKey {
        match self {
            Self::Event(e) => ActivityKey {
                at: e.received_at,
                id: e.id.to_string(),
                part: String::new(),
            },
            Self::Forward(f) => ActivityKey {
                at: f.forward.updated_at,
                id: f.event.to_string(),
                part: destination_key(f.forward.destination.as_ref()),
            },
            Self::Rejection(r) => ActivityKey {
                at: r.now,
                id: r.id.to_string(),
                part: String::new(),
            },
        }
    }

    /// Whether it is a failure: a refused request, a quarantined arrival, a forward not
    /// completed.
    pub fn failed(&self) -> bool {
        match self {
            Self::Event(e) => e.conflicts_with.is_some(),
            Self::Forward(f) => f.forward.outcome != Outcome::Completed,
            Self::Rejection(_) => true,
        }
    }
}

/// Which activity a tail reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivityFilter {
    /// Whose: another source's rows never come.
    pub source: SourceId,
    /// Only failures ([`Activity::failed`]).
    pub failures_only: bool,
}

/// The first `limit` of `rows` in key order: each backend reads up to `limit` rows of each
/// table after the cursor, and what this keeps is exactly the first `limit` of their union.
pub fn first(mut rows: Vec<Activity>, limit: usize) -> Vec<Activity> {
    rows.sort_by_cached_key(Activity::key);
    rows.truncate(limit);
    rows
}

/// Reading a source's activity.
#[async_trait]
pub trait InboundActivity: Send + Sync + 'static {
    /// The activity of `filter`'s source with keys after `after`, in key order, at most
    /// `limit` rows: what `vow tail --source` polls for, one index range per table.
    async fn tail_inbound(
        &self,
        filter: &ActivityFilter,
        after: &ActivityKey,
        limit: usize,
    ) -> StoreResult<Vec<Activity>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_round_trips_through_its_text_and_orders_by_time_then_ids() {
        let at = DateTime::from_timestamp_micros(1_767_000_000_123_456).unwrap();
        let forward = ActivityKey {
            at,
            id: "inevt_01KBF0000000000000000000AA".into(),
            part: "pull".into(),
        };
        assert_eq!(forward.to_string().parse(), Ok(forward.clone()));
        let first = ActivityKey::first_at(at);
        assert_eq!(first.to_string().parse(), Ok(first.clone()));
        assert!(first < forward);
        assert!(forward < ActivityKey::first_at(at + chrono::TimeDelta::microseconds(1)));
        for bad in ["", "12", "x.a.b", "1.a"] {
            assert_eq!(bad.parse::<ActivityKey>(), Err(NotAKey), "{bad}");
        }
    }
}
