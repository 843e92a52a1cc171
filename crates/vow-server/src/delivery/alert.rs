//! The dead-letter rate alert (seed 003: "alert on it; not on every event, but on the rate").
//!
//! When one endpoint's deliveries dead-lettered within the window reach the threshold, its
//! alert is raised: the operational webhook `endpoint.dead_letters.alert` and the gauge
//! [`ALERTS_RAISED`](crate::metrics::DEAD_LETTER_ALERTS_RAISED). When the window's count falls
//! below half the threshold, the alert clears with `endpoint.dead_letters.recovered`; half, so
//! an endpoint hovering at the threshold does not alert on every check.
//!
//! It reads the store only (the dead-letter notes that recording writes, and the raised alerts
//! as rows: [`vow_store::DeadLetterAlerts`]), so every node checks and each alert is raised and
//! cleared by one of them. The internal operational application's own dead-letters are left
//! out, so a failing operator URL cannot alert about itself.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use tokio_util::sync::CancellationToken;
use vow_store::dead_letters::DeadLetterCount;
use vow_store::{Store, StoreResult};

use super::operational::Operational;
use crate::metrics as m;

/// When the alert fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertSettings {
    /// Dead-letters of one endpoint within the window that raise its alert (at least 1).
    pub threshold: u32,
    /// The window counted back from each check.
    pub window: Duration,
}

impl AlertSettings {
    /// The count below which a raised alert clears: half the threshold, rounded up.
    pub fn clear_below(&self) -> u64 {
        u64::from(self.threshold.div_ceil(2))
    }
}

/// What one check changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Alerts this check raised.
    pub raised: Vec<DeadLetterCount>,
    /// Alerts this check cleared.
    pub cleared: Vec<DeadLetterCount>,
}

/// Checks the dead-letter rates and raises and clears alerts.
pub struct DeadLetterAlert {
    store: Arc<dyn Store>,
    operational: Option<Operational>,
    settings: AlertSettings,
}

impl DeadLetterAlert {
    /// The alert over `store`'s dead-letters, reported through `operational` when configured.
    pub fn new(
        store: Arc<dyn Store>,
        operational: Option<Operational>,
        settings: AlertSettings,
    ) -> Self {
        Self {
            store,
            operational,
            settings,
        }
    }

    /// How often it checks: a tenth of the window, between a second and a minute.
    pub fn every(&self) -> Duration {
        (self.settings.window / 10).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// Checks every [`DeadLetterAlert::every`] until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let every = self.every();
        loop {
            if let Err(e) = self.check(Utc::now().trunc_subsecs(6)).await {
                tracing::warn!(error = %e, "checking the dead-letter rates failed");
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {},
                () = shutdown.cancelled() => return,
            }
        }
    }

    /// Counts each endpoint's dead-letters in the window before `now`, raises the alerts that
    /// reach the threshold and clears those below half of it.
    pub async fn check(&self, now: DateTime<Utc>) -> StoreResult<Checked> {
        let window =
            chrono::Duration::from_std(self.settings.window).unwrap_or(chrono::Duration::MAX);
        let own = self.operational.as_ref().map(Operational::app);
        let counts: Vec<DeadLetterCount> = self
            .store
            .dead_letters_since(now - window)
            .await?
            .into_iter()
            .filter(|c| Some(c.app_id) != own)
            .collect();
        metrics::gauge!(m::DEAD_LETTERS_IN_WINDOW)
            .set(counts.iter().map(|c| c.count).sum::<u64>() as f64);
        let mut checked = Checked::default();
        for count in counts
            .iter()
            .filter(|c| c.count >= u64::from(self.settings.threshold))
        {
            if self
                .store
                .raise_dead_letter_alert(count.app_id, count.endpoint_id, now)
                .await?
            {
                self.report("endpoint.dead_letters.alert", count).await;
                checked.raised.push(*count);
            }
        }
        let by_endpoint: HashMap<_, u64> =
            counts.iter().map(|c| (c.endpoint_id, c.count)).collect();
        let raised = self.store.raised_dead_letter_alerts().await?;
        let mut still = raised.len();
        for alert in raised {
            let count = by_endpoint.get(&alert.endpoint_id).copied().unwrap_or(0);
            if count >= self.settings.clear_below() {
                continue;
            }
            if self
                .store
                .clear_dead_letter_alert(alert.endpoint_id, now)
                .await?
            {
                let now_count = DeadLetterCount {
                    app_id: alert.app_id,
                    endpoint_id: alert.endpoint_id,
                    count,
                };
                self.report("endpoint.dead_letters.recovered", &now_count)
                    .await;
                checked.cleared.push(now_count);
            }
            still -= 1;
        }
        metrics::gauge!(m::DEAD_LETTER_ALERTS_RAISED).set(still as f64);
        Ok(checked)
    }

    async fn report(&self, event_type: &'static str, count: &DeadLetterCount) {
        metrics::counter!(m::DEAD_LETTER_ALERTS, "event" => event_type).increment(1);
        tracing::warn!(
            app = %count.app_id,
            endpoint = %count.endpoint_id,
            dead_letters = count.count,
            event_type,
            "dead-letter rate"
        );
        if let Some(operational) = &self.operational {
            operational
                .dead_letter_rate(
                    event_type,
                    count,
                    self.settings.threshold,
                    self.settings.window.as_secs(),
                )
                .await;
        }
    }
}
