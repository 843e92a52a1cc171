//! The books every run must balance, and the numbers a run reports.
//!
//! Owns: the [`Ledger`] (sent = acknowledged + rejected + failed; stored = acknowledged;
//! delivered + cutoff = acknowledged × endpoints; nothing unexpected at the receiver), the
//! [`Report`] a scenario returns (a printed block plus named metrics for the medians), and
//! latency histograms in microseconds.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// Counts of one run. A run whose ledger does not balance is VOID.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// POSTs started.
    pub sent: u64,
    /// POSTs answered 2xx.
    pub acked: u64,
    /// POSTs answered with another status.
    pub rejected: u64,
    /// POSTs with no answer.
    pub failed: u64,
    /// Messages in the database at the end.
    pub stored: u64,
    /// Endpoints per message; 0 when no delivery is expected (workers off).
    pub endpoints: u64,
    /// Unique (endpoint, webhook-id) pairs received whose id was acknowledged.
    pub delivered: u64,
    /// Deliveries deliberately left queued (e.g. the slow endpoint's backlog).
    pub cutoff: u64,
    /// Repeated deliveries of a pair already received.
    pub duplicates: u64,
    /// Deliveries of ids never acknowledged, or requests without an endpoint or id.
    pub unexpected: u64,
}

impl Ledger {
    /// Deliveries the acknowledged messages call for.
    pub fn expected(&self) -> u64 {
        self.acked * self.endpoints
    }

    /// Why the ledger does not balance (empty when it does).
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.sent != self.acked + self.rejected + self.failed {
            p.push("sent != acked + rejected + failed".into());
        }
        if self.stored != self.acked {
            p.push(format!("stored {} != acked {}", self.stored, self.acked));
        }
        if self.delivered + self.cutoff != self.expected() {
            p.push(format!(
                "delivered {} + cutoff {} != expected {}",
                self.delivered,
                self.cutoff,
                self.expected()
            ));
        }
        if self.unexpected != 0 {
            p.push(format!("{} unexpected deliveries", self.unexpected));
        }
        p
    }

    /// Does it balance?
    pub fn balanced(&self) -> bool {
        self.problems().is_empty()
    }

    /// One line for the result block.
    pub fn line(&self) -> String {
        let verdict = if self.balanced() {
            "BALANCED".to_string()
        } else {
            format!("VOID ({})", self.problems().join("; "))
        };
        format!(
            "ledger: sent {} = acked {} + rejected {} + failed {} | stored {} | delivered {} + cutoff {} of {} expected | duplicates {} | unexpected {} -> {verdict}",
            self.sent,
            self.acked,
            self.rejected,
            self.failed,
            self.stored,
            self.delivered,
            self.cutoff,
            self.expected(),
            self.duplicates,
            self.unexpected
        )
    }
}

/// A latency histogram in microseconds (1 µs .. 10 min, 3 significant digits).
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// `value` in µs as milliseconds.
pub fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// What one run of a scenario produced.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Scenario and variant, e.g. `e2e sqlite endpoints=10`.
    pub title: String,
    /// The printed block (without the title).
    pub text: String,
    /// Named numbers, aggregated over repeated runs.
    pub metrics: Vec<(String, f64)>,
    /// Whether the run balanced (commit-baseline has no ledger and is always valid).
    pub valid: bool,
}

impl Report {
    /// An empty, valid report titled `title`.
    pub fn new(title: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            valid: true,
            ..Self::default()
        }
    }

    /// Appends a line to the block.
    pub fn line(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.text, "  {}", text.as_ref());
    }

    /// Records a named metric.
    pub fn metric(&mut self, name: &str, value: f64) {
        self.metrics.push((name.to_string(), value));
    }

    /// Adds the ledger line and marks the report VOID if it does not balance.
    pub fn ledger(&mut self, ledger: &Ledger) {
        self.line(ledger.line());
        self.valid &= ledger.balanced();
    }

    /// Records p50/p90/p99/max of `h` under `name` and returns a printable summary.
    pub fn latency(&mut self, name: &str, h: &Histogram<u64>) -> String {
        if h.is_empty() {
            return format!("{name}: no samples");
        }
        let q = |p: f64| ms(h.value_at_quantile(p));
        let (p50, p90, p99, max) = (q(0.5), q(0.9), q(0.99), ms(h.max()));
        self.metric(&format!("{name}_p50_ms"), p50);
        self.metric(&format!("{name}_p90_ms"), p90);
        self.metric(&format!("{name}_p99_ms"), p99);
        self.metric(&format!("{name}_max_ms"), max);
        format!(
            "{name}: p50 {p50:.2} ms, p90 {p90:.2} ms, p99 {p99:.2} ms, max {max:.2} ms (n={})",
            h.len()
        )
    }

    /// The printed form: title, block, and VOID marker.
    pub fn render(&self) -> String {
        let mark = if self.valid { "" } else { "  [VOID]" };
        format!("== {}{mark}\n{}", self.title, self.text)
    }
}

/// Median, min and max of `values` (which must not be empty).
pub fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[0], v[n - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_that_lost_a_delivery_is_void() {
        let mut l = Ledger {
            sent: 10,
            acked: 10,
            stored: 10,
            endpoints: 2,
            delivered: 20,
            ..Ledger::default()
        };
        assert!(l.balanced(), "{:?}", l.problems());
        l.delivered = 19;
        assert!(!l.balanced());
        assert!(l.line().contains("VOID"));
        l.cutoff = 1;
        assert!(l.balanced());
    }

    #[test]
    fn a_stored_message_that_was_not_acknowledged_voids_the_run() {
        let l = Ledger {
            sent: 3,
            acked: 2,
            failed: 1,
            stored: 3,
            ..Ledger::default()
        };
        assert!(!l.balanced());
    }

    #[test]
    fn the_spread_of_an_even_count_averages_the_middle() {
        assert_eq!(spread(&[4.0, 1.0, 3.0, 2.0]), (2.5, 1.0, 4.0));
        assert_eq!(spread(&[5.0]), (5.0, 5.0, 5.0));
    }
}
