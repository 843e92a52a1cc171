//! Probes that run beside vow, each on a thread of its own, so a result can tell a slow machine
//! from a slow vow: the disk (a 1 KiB append and fsync, which other people's writes on a shared
//! disk slow down) and the host's CPU (a fixed piece of arithmetic, which takes longer whenever
//! the virtual machine's host lends it less of a core).

use std::hint::black_box;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::receiver::Clock;

/// The fixed work of one speed reading: this many dependent multiply-adds (about 1 ms on the
/// 2-core EPYC machines BENCHMARKS.md was measured on).
const SPEED_STEPS: u64 = 1_000_000;

/// Each speed reading is the fastest of this many runs of the fixed work, so a run that was
/// preempted midway does not count as a slow host.
const SPEED_TRIES: usize = 3;

/// A probe's thread: one reading every interval until stopped.
#[derive(Debug)]
pub struct Probe {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(u64, u32)>>,
}

impl Probe {
    /// Appends 1 KiB to a file in the system temp dir (the file system vow's SQLite database is
    /// on) and fsyncs it every `interval`; each reading is how long that took.
    pub fn fsync(clock: Clock, interval: Duration) -> std::io::Result<Self> {
        let mut file = tempfile::tempfile()?;
        let block = [b'p'; 1024];
        Self::start("fsync-probe", clock, interval, move || {
            let t0 = clock.now_us();
            file.write_all(&block).and_then(|()| file.sync_all()).ok()?;
            Some(clock.now_us().saturating_sub(t0))
        })
    }

    /// Runs [`SPEED_STEPS`] of arithmetic every `interval` at the highest priority the process
    /// may give a thread (nice −20 as root), so the reading waits for the host, not for vow;
    /// each reading is the fastest of [`SPEED_TRIES`] runs.
    pub fn speed(clock: Clock, interval: Duration) -> std::io::Result<Self> {
        let mut raised = false;
        Self::start("speed-probe", clock, interval, move || {
            if !raised {
                raised = true;
                raise_priority();
            }
            (0..SPEED_TRIES)
                .map(|_| {
                    let t0 = clock.now_us();
                    black_box(fixed_work());
                    clock.now_us().saturating_sub(t0)
                })
                .min()
        })
    }

    /// Runs `reading` every `interval` on a thread named `name`, until it gives `None` or
    /// [`Probe::stop`]. Times are µs on `clock`.
    fn start(
        name: &str,
        clock: Clock,
        interval: Duration,
        mut reading: impl FnMut() -> Option<u64> + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut out = Vec::new();
                while !flag.load(Ordering::Relaxed) {
                    let at = clock.now_us();
                    let Some(took) = reading() else { break };
                    out.push((at, u32::try_from(took).unwrap_or(u32::MAX)));
                    std::thread::sleep(interval);
                }
                out
            })?;
        Ok(Self { stop, thread })
    }

    /// Stops and returns (start µs, reading µs) of every reading.
    pub fn stop(self) -> Vec<(u64, u32)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// [`SPEED_STEPS`] multiply-adds, each depending on the one before, so no compiler can fold or
/// vectorize them.
fn fixed_work() -> u64 {
    let mut x = 1u64;
    for i in 0..black_box(SPEED_STEPS) {
        x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    x
}

/// Gives the calling thread nice −20 where the process may (as root); elsewhere it keeps its
/// priority, and readings under load then include waits for a core.
fn raise_priority() {
    // On Linux a thread id names the one thread.
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), -20);
}

/// What the speed probe saw over a load window: the fixed work's time per reading (lower is
/// faster), overall and per 5 s.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSpeed {
    pub p10_us: f64,
    pub median_us: f64,
    pub p90_us: f64,
    /// The median of each 5 s from 1 s after `start` on, the windows of e2e's "delivered/s per
    /// 5 s" line (its sampler reads from 1 s on).
    pub per_5s_us: Vec<f64>,
}

impl HostSpeed {
    /// The readings that started within `start_us..end_us`; `None` without any.
    pub fn of(readings: &[(u64, u32)], start_us: u64, end_us: u64) -> Option<Self> {
        let within: Vec<(u64, f64)> = readings
            .iter()
            .filter(|(at, _)| (start_us..end_us).contains(at))
            .map(|&(at, took)| (at, f64::from(took)))
            .collect();
        let all: Vec<f64> = within.iter().map(|&(_, took)| took).collect();
        let first = start_us + 1_000_000;
        let per_5s_us = (0..)
            .map(|k| first + k * 5_000_000)
            .take_while(|&from| from + 5_000_000 <= end_us)
            .filter_map(|from| {
                let bucket: Vec<f64> = within
                    .iter()
                    .filter(|(at, _)| (from..from + 5_000_000).contains(at))
                    .map(|&(_, took)| took)
                    .collect();
                quantile(&bucket, 0.5)
            })
            .collect();
        Some(Self {
            p10_us: quantile(&all, 0.1)?,
            median_us: quantile(&all, 0.5)?,
            p90_us: quantile(&all, 0.9)?,
            per_5s_us,
        })
    }

    /// How far the host's speed moved: p90 ÷ p10 of the readings (1.0 for a steady host).
    pub fn spread(&self) -> f64 {
        self.p90_us / self.p10_us.max(1.0)
    }

    /// The report's two lines.
    pub fn lines(&self) -> [String; 2] {
        let per_5s: Vec<String> = self.per_5s_us.iter().map(|us| format!("{us:.0}")).collect();
        [
            format!(
                "host speed (µs for a fixed piece of work, lower is faster): p10 {:.0}, median {:.0}, p90 {:.0} (p90 ÷ p10 {:.2})",
                self.p10_us,
                self.median_us,
                self.p90_us,
                self.spread()
            ),
            format!("host speed per 5 s (µs, median): {}", per_5s.join(" ")),
        ]
    }
}

/// The `q` quantile of `values` by nearest rank: the smallest value with at least `q` of them at
/// or below it; `None` when empty.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_speed_reads_only_the_window_and_buckets_it_by_5_s() {
        // One reading a second for 20 s from t = 10 s; the window is 12 s..28 s.
        let readings: Vec<(u64, u32)> = (10..30)
            .map(|s| (s * 1_000_000, if s < 18 { 1_000 } else { 2_000 }))
            .collect();
        let speed = HostSpeed::of(&readings, 12_000_000, 28_000_000).unwrap();
        // 16 readings in the window (12..=27 s): 6 at 1,000 µs, 10 at 2,000 µs.
        assert_eq!(speed.p10_us, 1_000.0);
        assert_eq!(speed.median_us, 2_000.0);
        assert_eq!(speed.p90_us, 2_000.0);
        assert_eq!(speed.spread(), 2.0);
        // Buckets from 13 s: 13..18 s (all 1,000), 18..23 s (2,000), 23..28 s (2,000).
        assert_eq!(speed.per_5s_us, vec![1_000.0, 2_000.0, 2_000.0]);
        assert!(speed.lines()[0].contains("p90 ÷ p10 2.00"));
        assert_eq!(
            speed.lines()[1],
            "host speed per 5 s (µs, median): 1000 2000 2000"
        );
        assert_eq!(HostSpeed::of(&readings, 40_000_000, 50_000_000), None);
    }

    #[test]
    fn quantile_is_the_nearest_rank() {
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), Some(2.0));
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 1.0), Some(3.0));
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.0), Some(1.0));
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&hundred, 0.99), Some(99.0));
        assert_eq!(quantile(&hundred, 0.1), Some(10.0));
    }
}
