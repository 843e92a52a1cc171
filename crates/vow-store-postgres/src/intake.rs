//! Graceful overload on PostgreSQL: new messages and inbound events (intake) write holding one
//! of a bounded number of permits, fewer than the pool's connections, so the writes of work
//! already accepted (delivery claims and outcomes, forwarding, retention) always find a
//! connection. An intake write that cannot get a permit within the limit
//! ([`PgStore::shed_intake_after`](crate::PgStore::shed_intake_after)) is refused with
//! [`StoreError::Overloaded`] and writes nothing, instead of waiting ever longer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use vow_store::{StoreError, StoreResult};

/// The intake's permits and its wait limit.
#[derive(Debug)]
pub(crate) struct Intake {
    permits: Semaphore,
    /// The longest an intake write waits for a permit, in microseconds; 0: no limit.
    limit_us: AtomicU64,
}

impl Intake {
    /// Permits for three quarters of `connections` (at least one): the rest stay for work.
    pub(crate) fn new(connections: u32) -> Self {
        let permits = usize::try_from(connections * 3 / 4).unwrap_or(1).max(1);
        Self {
            permits: Semaphore::new(permits),
            limit_us: AtomicU64::new(0),
        }
    }

    /// Refuses intake writes that wait longer than `limit` for a permit (`None`: they wait).
    pub(crate) fn shed_after(&self, limit: Option<Duration>) {
        let us = limit.map_or(0, |l| {
            u64::try_from(l.as_micros()).unwrap_or(u64::MAX).max(1)
        });
        self.limit_us.store(us, Ordering::Relaxed);
    }

    /// How long intake may wait before it is refused; `None`: it waits.
    pub(crate) fn limit(&self) -> Option<Duration> {
        match self.limit_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(Duration::from_micros(us)),
        }
    }

    /// A permit to write one intake operation, held until it is dropped; `Overloaded` when
    /// none came free within the limit.
    pub(crate) async fn admit(&self) -> StoreResult<SemaphorePermit<'_>> {
        let acquire = self.permits.acquire();
        let permit = match self.limit() {
            None => acquire.await,
            Some(limit) => tokio::time::timeout(limit, acquire)
                .await
                .map_err(|_| StoreError::overloaded())?,
        };
        // The semaphore is never closed.
        Ok(permit.expect("the intake semaphore is never closed"))
    }

    /// A permit for an intake write already accepted (a job its batch left, to be written
    /// alone): it waits for one however long that takes, and is never refused.
    pub(crate) async fn admit_accepted(&self) -> SemaphorePermit<'_> {
        let permit = self.permits.acquire().await;
        permit.expect("the intake semaphore is never closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_write_that_waits_past_the_limit_is_refused_and_one_with_a_permit_is_not() {
        let intake = Intake::new(4);
        intake.shed_after(Some(Duration::from_millis(20)));
        let held: Vec<_> = [(); 3].iter().map(|()| intake.admit()).collect();
        let mut permits = Vec::new();
        for admit in held {
            permits.push(admit.await.unwrap());
        }
        let refused = intake.admit().await.unwrap_err();
        assert!(
            matches!(refused, StoreError::Overloaded { retry_after } if retry_after == StoreError::RETRY_AFTER),
            "{refused:?}"
        );
        permits.pop();
        let _last = intake.admit().await.unwrap();

        // Without a limit a write waits for its permit.
        intake.shed_after(None);
        let waiting = intake.admit();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), waiting)
                .await
                .is_err(),
            "no permit free: it waits"
        );
    }

    #[tokio::test]
    async fn an_accepted_write_waits_past_the_limit_for_its_permit() {
        let intake = Intake::new(4);
        intake.shed_after(Some(Duration::from_millis(20)));
        let mut permits = Vec::new();
        for _ in 0..3 {
            permits.push(intake.admit().await.unwrap());
        }
        let (got, permitted) = tokio::sync::oneshot::channel();
        let waiting = async {
            let _permit = intake.admit_accepted().await;
            let _ = got.send(());
        };
        let freeing = async {
            tokio::time::sleep(Duration::from_millis(60)).await;
            assert!(
                intake.admit().await.is_err(),
                "a new write is still refused"
            );
            permits.pop();
        };
        tokio::join!(waiting, freeing);
        assert!(
            permitted.await.is_ok(),
            "it got the permit freed after the limit"
        );
    }
}
