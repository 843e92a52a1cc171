//! Waking delivery workers in every process: a process that made work due `NOTIFY`s a channel
//! (through [`WorkNotifier`], after its commit), and each process `LISTEN`s on it (besides
//! polling, which catches anything missed while a listener reconnects or a notifier died).
//!
//! A process whose delivery workers run also holds a shared advisory lock on its listening
//! connection ([`DELIVERING`], keyed by the schema), so the processes delivering from one
//! deployment can be counted ([`DELIVERING_NODES`]); the lock goes with the session, so a
//! killed process stops counting at once.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::{mpsc, Notify};

/// The channel.
pub const WORK_CHANNEL: &str = "vow_work";

/// The advisory lock's first key (`vow!`) held shared by each delivering process; the second is
/// the schema's `hashtext`.
pub(crate) const DELIVERING: i32 = 0x766f_7721;

/// Marks this session's process as delivering.
const HOLD_DELIVERING: &str = "SELECT pg_advisory_lock_shared($1, hashtext(current_schema()))";

/// Unmarks it.
const RELEASE_DELIVERING: &str = "SELECT pg_advisory_unlock_shared($1, hashtext(current_schema()))";

/// The sessions that hold [`DELIVERING`] for this database and schema, at least 1 (this
/// process reads it, and delivers).
pub(crate) const DELIVERING_NODES: &str = "SELECT greatest(count(*), 1) FROM pg_locks
     WHERE locktype = 'advisory' AND granted AND objsubid = 2
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND classid = ($1::bigint & 4294967295)::oid
       AND objid = (hashtext(current_schema())::bigint & 4294967295)::oid";

/// The least time between two `NOTIFY`s of one process: how much later, at most, another
/// process hears of work than it would with a `NOTIFY` per write.
pub(crate) const NOTIFY_GAP: Duration = Duration::from_millis(10);

/// Sends `NOTIFY` for work made due, outside the transactions that made it. A `NOTIFY` inside a
/// transaction holds a database-wide lock until that commit is flushed, so every creating
/// transaction committed one after the other (message creates ran at half the single-row commit
/// rate). Signals coalesce: a `NOTIFY` is a commit of its own, so at most one is sent each
/// [`NOTIFY_GAP`], and any number of signals while one is on its way or within the gap after it
/// send one more. The payload is the schema, so vow deployments sharing a database in different
/// schemas do not wake each other.
#[derive(Debug, Clone)]
pub(crate) struct WorkNotifier {
    signal: mpsc::Sender<()>,
}

impl WorkNotifier {
    /// Starts the sending task on `pool`; it ends when the last notifier is dropped.
    pub(crate) fn spawn(pool: PgPool) -> Self {
        let (signal, mut signals) = mpsc::channel(1);
        tokio::spawn(async move {
            while signals.recv().await.is_some() {
                let sent = sqlx::query("SELECT pg_notify($1, current_schema())")
                    .bind(WORK_CHANNEL)
                    .execute(&pool)
                    .await;
                if let Err(e) = sent {
                    tracing::warn!(error = %e, "NOTIFY failed; other processes find the work by polling");
                }
                tokio::time::sleep(NOTIFY_GAP).await;
            }
        });
        Self { signal }
    }

    /// A write was committed: when it queued work, tell the other processes.
    pub(crate) fn written(&self, written: &impl vow_store::idempotency::QueuesWork) {
        if written.queues_work() {
            // Full means a signal is already waiting, which covers this one too.
            let _ = self.signal.try_send(());
        }
    }
}

/// Listens on `pool` for work made due by any process and notifies `wake` for each signal
/// (`PgStore::spawn_work_listener`); holds [`DELIVERING`] on the same connection when
/// `delivering`. Runs in the background until `wake` has no other owner; reconnects after a
/// lost connection.
pub(crate) fn spawn_listener(pool: PgPool, wake: Arc<Notify>, delivering: bool) {
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        while Arc::strong_count(&wake) > 1 {
            let mut listener = match PgListener::connect_with(&pool).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "LISTEN connection failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            // On the listener's own connection: a pool of one has no other while it listens.
            let schema: String = match sqlx::query_scalar("SELECT current_schema()")
                .fetch_one(&mut listener)
                .await
            {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the schema failed; retrying");
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            };
            if let Err(e) = listener.listen(WORK_CHANNEL).await {
                tracing::warn!(error = %e, "LISTEN failed; retrying");
                tokio::time::sleep(backoff).await;
                continue;
            }
            if delivering {
                if let Err(e) = delivering_mark(&mut listener, HOLD_DELIVERING).await {
                    tracing::warn!(error = %e, "marking this process as delivering failed; retrying");
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            }
            backoff = Duration::from_millis(100);
            // Anything queued while we were not listening is found by the next claim.
            wake.notify_one();
            let mut lost = false;
            while Arc::strong_count(&wake) > 1 {
                match tokio::time::timeout(Duration::from_secs(5), listener.try_recv()).await {
                    Ok(Ok(Some(n))) if n.payload() == schema => wake.notify_one(),
                    Ok(Ok(Some(_))) => {} // another deployment's schema
                    Ok(Ok(None)) => {
                        lost = true; // and the lock with it: reconnect
                        break;
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "LISTEN connection failed; reconnecting");
                        break;
                    }
                    Err(_) => {} // idle: re-check that someone still wants wake-ups
                }
            }
            // A listener's connection goes back to the pool: it must not count this process
            // there.
            if delivering && !lost {
                if let Err(e) = delivering_mark(&mut listener, RELEASE_DELIVERING).await {
                    tracing::debug!(error = %e, "releasing the delivering mark failed");
                }
            }
        }
    });
}

/// Runs `statement` ([`HOLD_DELIVERING`] or [`RELEASE_DELIVERING`]) on `listener`'s connection.
async fn delivering_mark(listener: &mut PgListener, statement: &str) -> sqlx::Result<()> {
    let query = sqlx::query(statement).bind(DELIVERING);
    query.execute(&mut *listener).await.map(drop)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Signals far more often than [`NOTIFY_GAP`] send at most one `NOTIFY` a gap, and at
    /// least one: the listener hears of the work, not of every write.
    #[tokio::test]
    async fn a_burst_of_signals_sends_at_most_one_notify_a_gap() {
        let (store, url) = crate::testing::fresh_store().await;
        let schema: String = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        let mut listener = PgListener::connect(&url).await.unwrap();
        listener.listen(WORK_CHANNEL).await.unwrap();
        let notifier = WorkNotifier::spawn(store.pool.clone());
        let started = Instant::now();
        for _ in 0..200 {
            let _ = notifier.signal.try_send(());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let burst = started.elapsed();
        let mut heard: u128 = 0;
        // Until the channel has been quiet for 20 gaps: every NOTIFY sent has arrived.
        while let Ok(notification) = tokio::time::timeout(NOTIFY_GAP * 20, listener.recv()).await {
            if notification.unwrap().payload() == schema {
                heard += 1;
            }
        }
        let most = burst.as_millis() / NOTIFY_GAP.as_millis() + 2;
        assert!(
            (1..=most).contains(&heard),
            "{heard} NOTIFYs for 200 signals in {burst:?}; at most {most}"
        );
    }
}
