//! Waking delivery workers in every process: a process that made work due `NOTIFY`s a channel
//! (through [`WorkNotifier`], after its commit), and each process `LISTEN`s on it (besides
//! polling, which catches anything missed while a listener reconnects or a notifier died).

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::{mpsc, Notify};

/// The channel.
pub const WORK_CHANNEL: &str = "vow_work";

/// Sends `NOTIFY` for work made due, outside the transactions that made it. A `NOTIFY` inside a
/// transaction holds a database-wide lock until that commit is flushed, so every creating
/// transaction committed one after the other (message creates ran at half the single-row commit
/// rate). Signals coalesce: while one `NOTIFY` is on its way, any number of new signals send one
/// more. The payload is the schema, so vow deployments sharing a database in different schemas
/// do not wake each other.
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
/// (`PgStore::spawn_work_listener`). Runs in the background until `wake` has no other owner;
/// reconnects after a lost connection.
pub(crate) fn spawn_listener(pool: PgPool, wake: Arc<Notify>) {
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
            let schema: String = match sqlx::query_scalar("SELECT current_schema()")
                .fetch_one(&pool)
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
            backoff = Duration::from_millis(100);
            // Anything queued while we were not listening is found by the next claim.
            wake.notify_one();
            while Arc::strong_count(&wake) > 1 {
                match tokio::time::timeout(Duration::from_secs(5), listener.try_recv()).await {
                    Ok(Ok(Some(n))) if n.payload() == schema => wake.notify_one(),
                    Ok(Ok(Some(_))) => {}  // another deployment's schema
                    Ok(Ok(None)) => break, // connection lost: reconnect
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "LISTEN connection failed; reconnecting");
                        break;
                    }
                    Err(_) => {} // idle: re-check that someone still wants wake-ups
                }
            }
        }
    });
}
