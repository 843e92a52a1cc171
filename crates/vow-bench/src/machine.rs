//! What the machine and the measured processes are doing, read from `/proc`.
//!
//! Owns: the machine banner (cores, load average), whole-machine CPU busy time, and per-process
//! accounting (CPU seconds from `/proc/<pid>/stat`, peak RSS from `VmHWM`, and per-thread CPU
//! from `/proc/<pid>/task/*/stat`) so every result can say where the CPU went. The probes that
//! run beside vow (disk, host speed) are in `probe`.

use std::collections::HashMap;
use std::fs;
use std::sync::OnceLock;
use std::time::Duration;

/// Clock ticks per second (`getconf CLK_TCK`, 100 on Linux unless told otherwise).
fn ticks_per_second() -> f64 {
    static TCK: OnceLock<f64> = OnceLock::new();
    *TCK.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Online CPUs.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `/proc/loadavg`'s first three fields.
pub fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// One line describing the machine, printed at the start of every invocation.
pub fn banner() -> String {
    let model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    let mem_kib = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| status_field(&s, "MemTotal:"))
        .unwrap_or(0);
    format!(
        "machine: {} CPUs ({model}), {:.1} GiB RAM, load average {}",
        cpus(),
        mem_kib as f64 / 1024.0 / 1024.0,
        load_average()
    )
}

/// Whole-machine CPU time (busy, total) in ticks from `/proc/stat`.
pub fn machine_ticks() -> (u64, u64) {
    let text = fs::read_to_string("/proc/stat").unwrap_or_default();
    let nums: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: u64 = nums.iter().take(8).sum();
    // idle + iowait are not busy.
    let idle = nums.get(3).copied().unwrap_or(0) + nums.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// Whole-machine busy fraction (0..=1) over the next `window`.
pub async fn busy_over(window: Duration) -> f64 {
    let (b0, t0) = machine_ticks();
    tokio::time::sleep(window).await;
    let (b1, t1) = machine_ticks();
    b1.saturating_sub(b0) as f64 / t1.saturating_sub(t0).max(1) as f64
}

/// Waits until the machine is quiet: busy below `max_busy` (0..=1) over 3 s, checked for up to
/// `timeout`. Returns the last busy fraction seen and whether it was quiet.
pub async fn wait_quiet(max_busy: f64, timeout: Duration) -> (f64, bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let busy = busy_over(Duration::from_secs(3)).await;
        if busy <= max_busy {
            return (busy, true);
        }
        if tokio::time::Instant::now() >= deadline {
            return (busy, false);
        }
        tokio::time::sleep(Duration::from_secs(7)).await;
    }
}

/// utime + stime (ticks) and the `comm` of a `/proc/.../stat` line.
fn parse_stat(text: &str) -> Option<(String, u64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 2..].split_whitespace().collect();
    // Fields after the comm start at field 3 (state); utime is field 14, stime 15.
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

fn status_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A point-in-time reading of one process's CPU, for deltas over a measurement window.
#[derive(Debug, Clone, Default)]
pub struct ProcSample {
    /// Process CPU ticks (user + system).
    pub ticks: u64,
    /// Per thread: tid -> (name, ticks).
    pub threads: HashMap<u32, (String, u64)>,
    /// Whole-machine (busy, total) ticks.
    pub machine: (u64, u64),
}

/// Reads `pid`'s CPU now (zeros if it is gone).
pub fn sample(pid: u32) -> ProcSample {
    let ticks = fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat(&s))
        .map_or(0, |(_, t)| t);
    let mut threads = HashMap::new();
    if let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) {
        for entry in dir.flatten() {
            let Ok(tid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Some(t) = fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|s| parse_stat(&s))
            {
                threads.insert(tid, t);
            }
        }
    }
    ProcSample {
        ticks,
        threads,
        machine: machine_ticks(),
    }
}

/// [`sample`] of several processes at once (several vow nodes), as one: their ticks summed and
/// their threads side by side (thread ids are unique across processes).
pub fn sample_all(pids: &[u32]) -> ProcSample {
    let mut all = ProcSample {
        machine: machine_ticks(),
        ..ProcSample::default()
    };
    for one in pids.iter().map(|pid| sample(*pid)) {
        all.ticks += one.ticks;
        all.threads.extend(one.threads);
    }
    all
}

/// CPU of every process named `name` (e.g. the PostgreSQL server's backends), keyed by pid in
/// [`ProcSample::threads`], so a delta counts processes that started during the window.
pub fn sample_named(name: &str) -> ProcSample {
    let mut threads = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Some((comm, t)) = fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|s| parse_stat(&s))
            {
                if comm == name {
                    threads.insert(pid, (comm, t));
                }
            }
        }
    }
    ProcSample {
        ticks: threads.values().map(|(_, t)| t).sum(),
        threads,
        machine: machine_ticks(),
    }
}

/// CPU-seconds the processes `pids` used between two [`sample_named`] readings (a process not
/// in the first started in between and counts from zero).
pub fn seconds_of(before: &ProcSample, after: &ProcSample, pids: &[u32]) -> f64 {
    let ticks: u64 = pids
        .iter()
        .filter_map(|pid| {
            let (_, t1) = after.threads.get(pid)?;
            let t0 = before.threads.get(pid).map_or(0, |(_, t)| *t);
            Some(t1.saturating_sub(t0))
        })
        .sum();
    ticks as f64 / ticks_per_second()
}

/// Peak resident set (`VmHWM`) of `pid` in MiB.
pub fn peak_rss_mib(pid: u32) -> f64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| status_field(&s, "VmHWM:"))
        .map_or(0.0, |kib| kib as f64 / 1024.0)
}

/// CPU used between two samples of one process.
#[derive(Debug, Clone)]
pub struct CpuUse {
    /// CPU seconds of the process.
    pub seconds: f64,
    /// Wall seconds of the window.
    pub wall: f64,
    /// Whole-machine busy fraction over the window (0..=1, all CPUs).
    pub machine_busy: f64,
    /// Thread groups by name (tokio workers summed), as (name, CPU seconds), busiest first.
    pub threads: Vec<(String, f64)>,
}

impl CpuUse {
    /// The difference `after - before` over `wall` seconds.
    pub fn between(before: &ProcSample, after: &ProcSample, wall: f64) -> Self {
        let tck = ticks_per_second();
        let mut groups: HashMap<String, f64> = HashMap::new();
        for (tid, (name, t)) in &after.threads {
            let start = before.threads.get(tid).map_or(0, |(_, t0)| *t0);
            *groups.entry(name.clone()).or_default() += t.saturating_sub(start) as f64 / tck;
        }
        let mut threads: Vec<(String, f64)> = groups.into_iter().filter(|g| g.1 > 0.0).collect();
        threads.sort_by(|a, b| b.1.total_cmp(&a.1));
        let busy = after.machine.0.saturating_sub(before.machine.0) as f64;
        let total = after.machine.1.saturating_sub(before.machine.1).max(1) as f64;
        // Per-thread (or per-process) deltas catch threads that started in the window; the
        // process total also keeps threads that ended in it. Take the larger.
        let seconds = after
            .threads
            .iter()
            .map(|(id, (_, t))| t.saturating_sub(before.threads.get(id).map_or(0, |(_, t0)| *t0)))
            .sum::<u64>()
            .max(after.ticks.saturating_sub(before.ticks)) as f64
            / tck;
        Self {
            seconds,
            wall,
            machine_busy: busy / total,
            threads,
        }
    }

    /// "name 1.23 s (61%)" for the busiest thread groups, % of one core over the window.
    pub fn top_threads(&self, n: usize) -> String {
        self.threads
            .iter()
            .take(n)
            .map(|(name, s)| format!("{name} {s:.1}s ({:.0}%)", 100.0 * s / self.wall.max(1e-9)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_spaces_in_the_name_parses() {
        let line = "42 (tokio runtime) S 1 2 3 4 5 6 7 8 9 10 700 300 0 0 20 0 1 0";
        assert_eq!(parse_stat(line), Some(("tokio runtime".into(), 1000)));
    }

    #[test]
    fn this_process_has_cpu_and_memory_readings() {
        let me = std::process::id();
        let s = sample(me);
        assert!(!s.threads.is_empty());
        assert!(peak_rss_mib(me) > 0.0);
    }
}
