//! Waking delivery workers in every process: transactions that make work due `NOTIFY` a
//! channel, and each process `LISTEN`s on it (besides polling, which catches anything missed
//! while a listener reconnects).

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgConnection;
use tokio::sync::Notify;
use vow_store::StoreResult;

use crate::error::db_error;
use crate::PgStore;

/// The channel.
pub const WORK_CHANNEL: &str = "vow_work";

/// Queues a notification on `conn`'s transaction (sent when it commits). The payload is the
/// schema, so vow deployments sharing a database in different schemas do not wake each other.
pub(crate) async fn notify_work(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query("SELECT pg_notify($1, current_schema())")
        .bind(WORK_CHANNEL)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

impl PgStore {
    /// Listens for work made due by any process and notifies `wake` for each signal. Runs in
    /// the background until `wake` has no other owner; reconnects after a lost connection.
    pub fn spawn_work_listener(&self, wake: Arc<Notify>) {
        let pool = self.pool.clone();
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
}
