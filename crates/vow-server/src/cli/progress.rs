//! Following requeued deliveries to the end: polls how they stand until none is waiting or
//! being sent, showing requeued, delivered, failed, rate and ETA as it goes. On a terminal
//! (stderr) that is a progress bar (indicatif); elsewhere a plain line every few seconds, with
//! no control characters. Ctrl-C stops following, not the work, which goes on in vow.

use std::future::Future;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use super::signal::stopped;

/// How often vow is asked how the deliveries stand.
const POLL: Duration = Duration::from_millis(500);

/// How often a plain progress line is printed when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(3);

/// How requeued deliveries stand.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    /// How many were requeued.
    pub requeued: u64,
    /// Delivered since.
    pub delivered: u64,
    /// Failed again for good (dead-lettered).
    pub failed: u64,
    /// Waiting for an attempt (or a retry).
    pub pending: u64,
    /// Being sent right now.
    pub sending: u64,
}

impl Tally {
    /// Delivered or failed for good.
    pub fn settled(&self) -> u64 {
        self.delivered + self.failed
    }

    /// Waiting or being sent.
    pub fn outstanding(&self) -> u64 {
        self.pending + self.sending
    }

    /// Requeued ones that are no longer this batch's (a later replay or a resend took them).
    pub fn taken_over(&self) -> u64 {
        self.requeued
            .saturating_sub(self.settled() + self.outstanding())
    }

    /// One line: the counts, the rate of settling over `elapsed`, and the time left at it.
    pub fn line(&self, elapsed: Duration) -> String {
        let secs = elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            self.settled() as f64 / secs
        } else {
            0.0
        };
        let eta = match self.outstanding() {
            0 => "0s".to_string(),
            _ if rate <= 0.0 => "?".to_string(),
            n => format!("{}s", (n as f64 / rate).ceil() as u64),
        };
        format!(
            "requeued {}  delivered {}  failed {}  waiting {}  {rate:.1}/s  ETA {eta}",
            self.requeued,
            self.delivered,
            self.failed,
            self.outstanding()
        )
    }
}

/// How following ended.
#[derive(Debug, Clone, Copy)]
pub struct Followed {
    /// The counts last read.
    pub tally: Tally,
    /// How long it was followed.
    pub elapsed: Duration,
    /// Ctrl-C (or SIGTERM) stopped it before every delivery settled.
    pub interrupted: bool,
}

/// Where progress is shown: a bar on a terminal, else plain lines now and then.
enum Display {
    Bar(ProgressBar),
    Plain { last: Option<Instant> },
}

impl Display {
    fn new(requeued: u64) -> Self {
        if !std::io::stderr().is_terminal() {
            return Display::Plain { last: None };
        }
        let bar = ProgressBar::with_draw_target(Some(requeued), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{spinner} [{bar:24}] {wide_msg}")
            .expect("a valid template")
            .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        Display::Bar(bar)
    }

    fn show(&mut self, tally: &Tally, elapsed: Duration) {
        match self {
            Display::Bar(bar) => {
                bar.set_position(tally.settled());
                bar.set_message(tally.line(elapsed));
            }
            Display::Plain { last } => {
                if last.is_none_or(|at| at.elapsed() >= PLAIN_EVERY) {
                    eprintln!("{}", tally.line(elapsed));
                    *last = Some(Instant::now());
                }
            }
        }
    }

    fn clear(self) {
        if let Display::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// Polls `read` (how the `requeued` deliveries stand now) until none is outstanding or the
/// user stops it, showing progress on stderr.
pub async fn follow<F, Fut>(requeued: u64, mut read: F) -> anyhow::Result<Followed>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Tally>>,
{
    let started = Instant::now();
    let mut display = Display::new(requeued);
    let interrupt = stopped();
    tokio::pin!(interrupt);
    let mut tally = Tally {
        requeued,
        pending: requeued,
        ..Tally::default()
    };
    let mut interrupted = false;
    loop {
        let read_now = async {
            let now = read().await;
            // Asked again only after a pause, unless this read found the end.
            if now.as_ref().is_ok_and(|t| t.outstanding() > 0) {
                tokio::time::sleep(POLL).await;
            }
            now
        };
        tokio::select! {
            () = &mut interrupt => {
                interrupted = true;
                break;
            }
            now = read_now => {
                let now = match now {
                    Ok(now) => now,
                    Err(e) => {
                        display.clear();
                        return Err(e);
                    }
                };
                tally = Tally { requeued, ..now };
                display.show(&tally, started.elapsed());
                if tally.outstanding() == 0 {
                    break;
                }
            }
        }
    }
    display.clear();
    Ok(Followed {
        tally,
        elapsed: started.elapsed(),
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_the_counts_the_rate_and_the_time_left() {
        let tally = Tally {
            requeued: 10,
            delivered: 3,
            failed: 1,
            pending: 5,
            sending: 1,
        };
        assert_eq!(
            tally.line(Duration::from_secs(2)),
            "requeued 10  delivered 3  failed 1  waiting 6  2.0/s  ETA 3s"
        );
        let nothing_yet = Tally {
            requeued: 2,
            pending: 2,
            ..Tally::default()
        };
        assert!(nothing_yet
            .line(Duration::from_secs(1))
            .ends_with("0.0/s  ETA ?"));
        let taken = Tally {
            requeued: 4,
            delivered: 2,
            ..Tally::default()
        };
        assert_eq!(taken.taken_over(), 2);
    }
}
