//! What a client may ask about its own key: [`KeyStatus`] (in progress, completed or expired,
//! the created resource's reference, the expiry), decided by [`KeyStatus::of`] from a row's
//! times, and read per backend by `sqlite::status` / `postgres::status` (features). Also the
//! age of the oldest claim still in progress, for a "stuck requests" gauge.

use chrono::{DateTime, Utc};

use crate::record::State;

/// Where a key stands, as `GET …/idempotency-key/{key}` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// The first request has not finished.
    InProgress,
    /// The outcome is stored and replayed.
    Completed,
    /// Only the tombstone is left: the key can be neither replayed nor reused.
    Expired,
}

impl KeyState {
    /// `in_progress`, `completed`, `expired`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
            Self::Expired => "expired",
        }
    }
}

/// A key's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyStatus {
    /// Its state.
    pub state: KeyState,
    /// The created resource's reference (e.g. a message id), once completed.
    pub resource: Option<String>,
    /// When the stored outcome stops being replayed.
    pub expires_at: DateTime<Utc>,
    /// When the tombstone ends and the key is free again.
    pub tombstone_until: DateTime<Utc>,
    /// The [`FINGERPRINT_VERSION`](crate::fingerprint::FINGERPRINT_VERSION) the stored
    /// fingerprint was computed with.
    pub fingerprint_version: u16,
}

/// A row's columns as the status needs them.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) struct StatusRow {
    pub state: String,
    pub resource: Option<String>,
    pub lease_until: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub tombstone_until: DateTime<Utc>,
    pub fingerprint_version: u16,
}

#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
impl KeyStatus {
    /// The status of a row at `now`: `None` when the key is free (no row, or its tombstone
    /// ended, or an in-progress claim abandoned past both its lease and its expiry).
    pub(crate) fn of(row: StatusRow, now: DateTime<Utc>) -> Option<Self> {
        if now >= row.tombstone_until {
            return None;
        }
        let state = match State::parse(&row.state)? {
            State::InProgress if now >= row.lease_until && now >= row.expires_at => return None,
            State::InProgress => KeyState::InProgress,
            State::Completed if now < row.expires_at => KeyState::Completed,
            State::Completed | State::Tombstone => KeyState::Expired,
        };
        Some(Self {
            state,
            resource: row.resource,
            expires_at: row.expires_at,
            tombstone_until: row.tombstone_until,
            fingerprint_version: row.fingerprint_version,
        })
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
/// When a lease that ends at `lease_until` began: claims are never renewed, so this is when the
/// request that holds it started.
pub(crate) fn lease_start(
    lease_until: DateTime<Utc>,
    settings: &crate::record::Settings,
) -> DateTime<Utc> {
    chrono::TimeDelta::from_std(settings.lease)
        .ok()
        .and_then(|lease| lease_until.checked_sub_signed(lease))
        .unwrap_or(lease_until)
}

/// The columns a status query selects, in order.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const SELECT: &str =
    "state, resource, lease_until, expires_at, tombstone_until, fingerprint_version";

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    fn row(state: &str) -> StatusRow {
        StatusRow {
            state: state.into(),
            resource: Some("msg_1".into()),
            lease_until: t(30),
            expires_at: t(100),
            tombstone_until: t(200),
            fingerprint_version: 2,
        }
    }

    fn state_at(state: &str, now: i64) -> Option<KeyState> {
        KeyStatus::of(row(state), t(now)).map(|s| s.state)
    }

    #[test]
    fn a_completed_key_is_completed_until_it_expires_then_expired_until_its_tombstone_ends() {
        assert_eq!(state_at("completed", 99), Some(KeyState::Completed));
        assert_eq!(state_at("completed", 100), Some(KeyState::Expired));
        assert_eq!(state_at("tombstone", 150), Some(KeyState::Expired));
        assert_eq!(state_at("tombstone", 200), None);
    }

    #[test]
    fn a_claim_is_in_progress_until_it_is_abandoned() {
        assert_eq!(state_at("in_progress", 0), Some(KeyState::InProgress));
        // Lease over but not yet expired: a retry would take it over; still in progress.
        assert_eq!(state_at("in_progress", 50), Some(KeyState::InProgress));
        assert_eq!(state_at("in_progress", 100), None);
    }

    #[test]
    fn the_status_keeps_the_resource_and_the_expiry() {
        let s = KeyStatus::of(row("completed"), t(1)).unwrap();
        assert_eq!(s.resource.as_deref(), Some("msg_1"));
        assert_eq!((s.expires_at, s.tombstone_until), (t(100), t(200)));
        assert_eq!(KeyState::Completed.as_str(), "completed");
    }
}
