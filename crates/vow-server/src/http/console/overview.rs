//! The Overview page: the last hour's and the last day's deliveries (attempts succeeded and
//! failed, dead letters, auto-disabled endpoints) and inbound traffic (stored, quarantined,
//! uncertain, refused by reason), what waits now (the backlog, disabled endpoints, inbound
//! events for an operator), and attempts per hour over the day as a chart ([`super::chart`]).
//! One store read ([`vow_store::Overviews`]), indexed: see `vow_store::overview`.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use vow_store::overview::{Count, Hour, Overview, COUNT_CAP};

use super::chart::{Column, StackedBars};
use super::session::Operator;
use super::view::{grouped, percent, render, PageResult};
use crate::state::AppState;

/// The hours that get a label under the chart: every sixth, the last one included.
const LABEL_EVERY: usize = 6;

#[derive(Template)]
#[template(path = "console/overview.html")]
struct OverviewPage {
    csrf: String,
    o: Overview,
    chart: StackedBars,
    /// `(reason, last hour, last day)`, by reason, the counts as shown.
    rejections: Vec<(String, String, String)>,
}

impl OverviewPage {
    /// A capped count as shown: `≥ 10,000` past the cap.
    fn count(&self, c: impl Borrow<Count>) -> String {
        let c = c.borrow();
        if c.more {
            format!("≥ {}", grouped(c.value))
        } else {
            grouped(c.value)
        }
    }

    /// A number as shown.
    fn n(&self, n: impl Borrow<u64>) -> String {
        grouped(*n.borrow())
    }

    /// A share as shown, `–` without one.
    fn rate(&self, share: Option<f64>) -> String {
        share.map_or_else(|| "–".into(), percent)
    }

    /// The count cap, as shown.
    fn cap(&self) -> String {
        grouped(COUNT_CAP)
    }

    /// How long the oldest due delivery has waited, `–` without one.
    fn waited(&self) -> String {
        self.o
            .current
            .backlog
            .oldest_due
            .map_or_else(|| "–".into(), |due| age(self.o.now - due))
    }
}

/// A duration as a person reads it: `45 s`, `12 min 5 s`, `3 h 20 min`, `2 d 4 h`.
fn age(d: chrono::TimeDelta) -> String {
    let s = d.num_seconds().max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

/// The time of day a bar starts at, UTC.
fn clock(at: DateTime<Utc>) -> String {
    at.format("%H:%M").to_string()
}

/// Attempts per hour over the last day: succeeded under failed.
fn attempts_chart(hours: &[Hour]) -> StackedBars {
    let last = hours.len().saturating_sub(1);
    let columns = hours
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let a = h.activity;
            Column {
                title: format!(
                    "{}–{} UTC: {} succeeded, {} failed",
                    clock(h.from),
                    clock(h.from + chrono::TimeDelta::hours(1)),
                    grouped(a.succeeded),
                    grouped(a.failed)
                ),
                label: (last - i)
                    .is_multiple_of(LABEL_EVERY)
                    .then(|| clock(h.from)),
                stack: vec![("ok", a.succeeded), ("failed", a.failed)],
            }
        })
        .collect();
    StackedBars::draw(columns)
}

/// The reasons refused in either window, each with its count in the hour and in the day.
fn rejection_rows(o: &Overview) -> Vec<(String, String, String)> {
    let mut rows: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (reason, n) in &o.hour.inbound.rejections.by_reason {
        rows.entry(reason).or_default().0 = *n;
    }
    for (reason, n) in &o.day.inbound.rejections.by_reason {
        rows.entry(reason).or_default().1 = *n;
    }
    rows.into_iter()
        .map(|(reason, (hour, day))| (reason.to_string(), grouped(hour), grouped(day)))
        .collect()
}

/// The Overview page.
pub async fn overview(State(state): State<AppState>, operator: Operator) -> PageResult {
    let o = state.store.overview(state.now()).await?;
    let page = OverviewPage {
        csrf: operator.session.csrf,
        chart: attempts_chart(&o.hours),
        rejections: rejection_rows(&o),
        o,
    };
    Ok(render(StatusCode::OK, &page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_in_the_two_largest_units() {
        let ages: Vec<String> = [0, 59, 61, 3_725, 190_000]
            .map(|s| age(chrono::TimeDelta::seconds(s)))
            .to_vec();
        assert_eq!(ages, ["0 s", "59 s", "1 min 1 s", "1 h 2 min", "2 d 4 h"]);
    }
}
