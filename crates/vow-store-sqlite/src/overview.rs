//! The console's Overview ([`vow_store::Overviews`]) on SQLite: indexed reads in one read
//! transaction (see `vow_store::overview` for what each figure is and why it is cheap).
//!
//! - delivery activity: a day of minute rows (`queue::activity`);
//! - backlog: the expired and live leases (`deliveries_leased`), then the endpoints with
//!   unleased pending rows, one seek each, as a claim finds them (`queue::claim`), counting each
//!   one's due rows on `deliveries_claimable` until the cap;
//! - inbound: a range of `inbound_events`' primary key, `inbound_events_by_state` source by
//!   source, and `inbound_rejections_by_time`.

use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection};
use vow_core::EndpointId;
use vow_store::inbound::InboundState;
use vow_store::overview::{
    inbound_ids, Backlog, Count, Current, Held, InboundWindow, Overview, Overviews, Rejections,
    Windows,
};
use vow_store::StoreResult;

use crate::convert::{id, micros};
use crate::error::Result;
use crate::queue::{activity, claim};
use crate::SqliteStore;

/// Leased pending rows due at `?1` (in flight, or whose lease ran out), by endpoint: how many,
/// the earliest.
const LEASED_DUE: &str = "SELECT endpoint_id, count(*), min(next_attempt_at) FROM deliveries
     WHERE status = 'pending' AND lease_until IS NOT NULL AND next_attempt_at <= ?1
     GROUP BY endpoint_id";

/// An endpoint's (`?1`) unleased pending rows due at `?2`, at most `?3`.
const DUE_OF_ENDPOINT: &str = "SELECT count(*) FROM (SELECT 1 FROM deliveries
     WHERE status = 'pending' AND lease_until IS NULL AND endpoint_id = ?1
       AND next_attempt_at <= ?2 LIMIT ?3)";

/// Disabled endpoints, at most `?1`.
const DISABLED: &str = "SELECT count(*) FROM (SELECT 1 FROM endpoints WHERE disabled = 1 LIMIT ?1)";

/// Inbound events with ids in `[?1, ?2)`, at most `?3`.
const STORED: &str = "SELECT count(*) FROM (SELECT 1 FROM inbound_events
     WHERE id >= ?1 AND id < ?2 LIMIT ?3)";

/// Inbound events in state `?1` with ids in `[?2, ?3)`, at most `?4`, source by source.
const IN_STATE: &str = "SELECT count(*) FROM (SELECT 1 FROM sources s CROSS JOIN inbound_events e
     WHERE e.source_id = s.id AND e.state = ?1 AND e.id >= ?2 AND e.id < ?3 LIMIT ?4)";

/// Rejections logged in `[?1, ?2]`, by reason.
const REJECTIONS: &str = "SELECT reason, count(*) FROM inbound_rejections
     WHERE received_at >= ?1 AND received_at <= ?2 GROUP BY reason ORDER BY reason";

/// Whether every rejection of `[?1, ?2]` is still in the log: no source with rows in the
/// window overwrote rows of its ring (it took more than its slots, the highest slot + 1) while
/// all its rows are from the window on.
const REJECTIONS_COMPLETE: &str = "SELECT NOT EXISTS (
     SELECT 1 FROM inbound_rejection_ring g
     WHERE g.source_id IN (SELECT source_id FROM inbound_rejections
                           WHERE received_at >= ?1 AND received_at <= ?2)
       AND g.recorded > (SELECT max(slot) + 1 FROM inbound_rejections r
                         WHERE r.source_id = g.source_id)
       AND NOT EXISTS (SELECT 1 FROM inbound_rejections r
                       WHERE r.source_id = g.source_id AND r.received_at < ?1))";

/// A capped count's answer.
fn count(found: i64) -> Count {
    Count::of(u64::try_from(found).unwrap_or(0))
}

/// The deliveries due at `now` but those of the endpoints in `except` (see the module docs).
fn backlog(conn: &Connection, now: i64, except: &HashSet<EndpointId>) -> Result<Backlog> {
    let (mut due, mut oldest) = (0, None::<i64>);
    let mut leased = conn.prepare_cached(LEASED_DUE)?;
    let mut rows = leased.query([now])?;
    while let Some(r) = rows.next()? {
        if !except.contains(&id::<EndpointId>(r, 0)?) {
            due += r.get::<_, i64>(1)?;
            let earliest: i64 = r.get(2)?;
            oldest = Some(oldest.map_or(earliest, |o| o.min(earliest)));
        }
    }
    let mut of_endpoint = conn.prepare_cached(DUE_OF_ENDPOINT)?;
    for (endpoint, head) in claim::endpoint_heads(conn)? {
        if head > now || except.contains(&endpoint) {
            continue;
        }
        oldest = Some(oldest.map_or(head, |o| o.min(head)));
        let room = Count::LIMIT - due;
        if room > 0 {
            let params = params![endpoint.to_string(), now, room];
            due += of_endpoint.query_row(params, |r| r.get::<_, i64>(0))?;
        }
    }
    Ok(Backlog {
        due: count(due),
        oldest_due: oldest.and_then(DateTime::from_timestamp_micros),
    })
}

/// The events with ids in `[from, to)` in each state that waits for an operator.
fn held(conn: &Connection, from: &str, to: &str) -> Result<Held> {
    let mut stmt = conn.prepare_cached(IN_STATE)?;
    let mut in_state = |state: InboundState| -> Result<Count> {
        let params = params![state.as_str(), from, to, Count::LIMIT];
        Ok(count(stmt.query_row(params, |r| r.get(0))?))
    };
    Ok(Held {
        quarantined: in_state(InboundState::Quarantined)?,
        uncertain: in_state(InboundState::Uncertain)?,
    })
}

/// Inbound traffic from `since` to `now`.
fn inbound(conn: &Connection, since: DateTime<Utc>, now: DateTime<Utc>) -> Result<InboundWindow> {
    let (from, to) = inbound_ids(since, now);
    let stored: i64 = conn
        .prepare_cached(STORED)?
        .query_row(params![from, to, Count::LIMIT], |r| r.get(0))?;
    let window = params![micros(since), micros(now)];
    let by_reason = conn
        .prepare_cached(REJECTIONS)?
        .query_map(window, |r| {
            Ok((
                r.get::<_, String>(0)?,
                u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let complete = conn
        .prepare_cached(REJECTIONS_COMPLETE)?
        .query_row(window, |r| r.get(0))?;
    Ok(InboundWindow {
        accepted: count(stored),
        held: held(conn, &from, &to)?,
        rejections: Rejections {
            by_reason,
            complete,
        },
    })
}

/// Everything the overview at `now` reads.
fn read(conn: &Connection, now: DateTime<Utc>) -> Result<Overview> {
    let windows = Windows::at(now);
    let tx = conn.unchecked_transaction()?;
    let minutes = activity::between(&tx, windows.day_since, now)?;
    let hour = inbound(&tx, windows.hour_since, now)?;
    let day = inbound(&tx, windows.day_since, now)?;
    let (from, to) = inbound_ids(DateTime::UNIX_EPOCH, now);
    let disabled: i64 = tx
        .prepare_cached(DISABLED)?
        .query_row([Count::LIMIT], |r| r.get(0))?;
    let current = Current {
        backlog: backlog(&tx, micros(now), &HashSet::new())?,
        endpoints_disabled: count(disabled),
        held: held(&tx, &from, &to)?,
    };
    tx.commit()?;
    Ok(windows.assemble(&minutes, hour, day, current))
}

#[async_trait]
impl Overviews for SqliteStore {
    async fn overview(&self, now: DateTime<Utc>) -> StoreResult<Overview> {
        self.read(move |conn| read(conn, now)).await
    }

    async fn backlog(&self, now: DateTime<Utc>, except: &[EndpointId]) -> StoreResult<Backlog> {
        // A set: each endpoint with pending rows is looked up in it.
        let except: HashSet<EndpointId> = except.iter().copied().collect();
        self.read(move |conn| backlog(conn, micros(now), &except))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{full_scan, migrated, plan};

    /// The tables that grow with traffic, which no statement may read end to end.
    const BIG: [&str; 5] = [
        "deliveries",
        "attempts",
        "messages",
        "inbound_events",
        "endpoints",
    ];

    #[test]
    fn the_overview_seeks_indexes_and_never_scans_a_growing_table() {
        let conn = migrated();
        for (sql, indexes) in [
            (LEASED_DUE, &["deliveries_leased"][..]),
            (DUE_OF_ENDPOINT, &["COVERING INDEX deliveries_claimable"]),
            (DISABLED, &["endpoints_disabled"]),
            (STORED, &["sqlite_autoindex_inbound_events_1"]),
            (IN_STATE, &["inbound_events_by_state"]),
            (REJECTIONS, &["inbound_rejections_by_time"]),
            (
                REJECTIONS_COMPLETE,
                &["inbound_rejections_by_time", "inbound_rejections_slot"],
            ),
            (&activity::between_sql(), &["delivery_activity"]),
        ] {
            let plan = plan(&conn, sql);
            for index in indexes {
                assert!(plan.contains(index), "{sql}: {plan}");
            }
            for table in BIG {
                assert!(!full_scan(&plan, table), "{sql}: {plan}");
            }
        }
    }
}
