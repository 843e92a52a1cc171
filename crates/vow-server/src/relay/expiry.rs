//! Relay targets whose `vow listen` is gone do not live forever: [`Expiry`] renews, in the
//! store, the last-seen time of every target whose listener is connected to this process, and
//! removes the targets not seen for the configured time (`relay_expiry_seconds`), whichever
//! process's they were: a CLI killed without Ctrl-C leaves its target to this sweep.
//!
//! It works across several nodes sharing PostgreSQL because it reads no process's memory but
//! its own: each node renews only its own listeners (at a quarter of the expiry, so a connected
//! listener is always fresh), and a stale target is taken by one node only
//! ([`vow_store::RelayListeners::take_stale_relays`]). Removing a relay endpoint deletes it as
//! `DELETE …/endpoint/{id}` does, with its pending deliveries and attempts (its messages stay);
//! removing a relay destination drops it from its source, so events no longer owe it.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use tokio_util::sync::CancellationToken;
use vow_store::relay::RelayTarget;
use vow_store::{InboundStore, Store};

use super::{targets, Hub};
use crate::metrics as m;

/// Stale targets taken per store call.
const BATCH: usize = 100;

/// Renews this process's listeners and removes targets whose listener is gone.
pub struct Expiry {
    store: Arc<dyn Store>,
    inbound: Arc<dyn InboundStore>,
    hub: Arc<Hub>,
    after: Duration,
}

impl Expiry {
    /// Expiry of the targets of `store` and `inbound` not seen for `after`; `hub` holds this
    /// process's listeners.
    pub fn new(
        store: Arc<dyn Store>,
        inbound: Arc<dyn InboundStore>,
        hub: Arc<Hub>,
        after: Duration,
    ) -> Self {
        Self {
            store,
            inbound,
            hub,
            after,
        }
    }

    /// How often it sweeps: a quarter of the expiry, between a second and a minute.
    pub fn every(&self) -> Duration {
        (self.after / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// Sweeps every [`Expiry::every`] until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let every = self.every();
        loop {
            self.sweep(Utc::now().trunc_subsecs(6)).await;
            tokio::select! {
                () = tokio::time::sleep(every) => {},
                () = shutdown.cancelled() => return,
            }
        }
    }

    /// Renews this process's listeners as seen at `now`, then removes every target not seen
    /// since `now` minus the expiry.
    pub async fn sweep(&self, now: DateTime<Utc>) {
        let connected = self.hub.targets();
        if !connected.is_empty() {
            if let Err(e) = self.store.relays_seen(&connected, now).await {
                tracing::warn!(error = %e, "renewing connected `vow listen` sessions failed");
            }
        }
        let after = chrono::Duration::from_std(self.after).unwrap_or(chrono::Duration::MAX);
        let before = now - after;
        loop {
            let stale = match self.store.take_stale_relays(before, BATCH).await {
                Ok(stale) => stale,
                Err(e) => {
                    tracing::warn!(error = %e, "reading expired `vow listen` sessions failed");
                    return;
                }
            };
            for target in &stale {
                self.expire(*target, before, now).await;
            }
            if stale.len() < BATCH {
                return;
            }
        }
    }

    /// Removes `target`; if that fails, puts it back as seen at `before` for the next sweep.
    async fn expire(&self, target: RelayTarget, before: DateTime<Utc>, now: DateTime<Utc>) {
        let removed =
            targets::remove(self.store.as_ref(), self.inbound.as_ref(), target, now).await;
        match removed {
            Ok(true) => {
                metrics::counter!(m::RELAYS_EXPIRED, "kind" => target.kind()).increment(1);
                tracing::info!(kind = target.kind(), owner = %target.owner(), id = %target.id(),
                    after_secs = self.after.as_secs(),
                    "removed a `vow listen` relay target whose listener was gone; a relay endpoint's pending deliveries went with it");
            }
            // Removed already (Ctrl-C, or an operator).
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, id = %target.id(), "removing an expired `vow listen` relay target failed; the next sweep retries");
                let back = before - chrono::Duration::seconds(1);
                if let Err(e) = self.store.relays_seen(&[target], back).await {
                    tracing::warn!(error = %e, id = %target.id(), "an expired `vow listen` relay target could not be put back; it stays until removed by hand");
                }
            }
        }
    }
}
