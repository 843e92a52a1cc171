//! The pause between retries of a failing store call in a worker loop: 50 ms, doubling up to
//! 5 s, back to 50 ms after a success.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

const FIRST: Duration = Duration::from_millis(50);
const MAX: Duration = Duration::from_secs(5);

/// Exponential backoff for one loop.
#[derive(Debug, Clone)]
pub struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Self(FIRST)
    }
}

impl Backoff {
    /// The next pause.
    pub fn delay(&self) -> Duration {
        self.0
    }

    /// Back to the first pause, after a success.
    pub fn reset(&mut self) {
        self.0 = FIRST;
    }

    /// Sleeps the next pause and doubles it.
    pub async fn sleep(&mut self) {
        tokio::time::sleep(self.0).await;
        self.grow();
    }

    fn grow(&mut self) {
        self.0 = (self.0 * 2).min(MAX);
    }

    /// As [`Backoff::sleep`], unless `shutdown` comes first: then `false`.
    pub async fn sleep_unless(&mut self, shutdown: &CancellationToken) -> bool {
        tokio::select! {
            _ = self.sleep() => true,
            _ = shutdown.cancelled() => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::default();
        let mut seen = Vec::new();
        for _ in 0..9 {
            seen.push(b.delay().as_millis());
            b.grow();
        }
        assert_eq!(seen, [50, 100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        b.reset();
        assert_eq!(b.delay(), FIRST);
        let stop = CancellationToken::new();
        stop.cancel();
        assert!(!b.sleep_unless(&stop).await);
    }
}
