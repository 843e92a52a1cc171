//! Operational webhooks: vow tells the operator's URL when deliveries are in trouble.
//!
//! The events are ordinary messages of an internal application (uid `vow-operational`) whose one
//! endpoint (uid `operational`) is the configured URL, so they are stored, signed, retried and
//! inspectable like any other delivery (read the signing secret through the API:
//! `GET /api/v1/app/vow-operational/endpoint/operational/secret`). Events about the internal
//! application's own deliveries are not emitted, so a failing operator URL cannot loop.
//! Besides delivery trouble, the inbound side reports quarantined events
//! ([`Operational::source_event_quarantined`]), and the dead-letter rate alert its changes
//! ([`Operational::dead_letter_rate`]).

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use serde_json::json;
use tokio::sync::Notify;
use vow_core::{AppId, EndpointId, MessageId};
use vow_store::dead_letters::DeadLetterCount;
use vow_store::inbound::InboundEvent;
use vow_store::queue::{AttemptOutcome, NextState, Recorded};
use vow_store::{
    AppKey, ApplicationFields, Delivery, EndpointFields, EndpointKey, NewApplication, NewEndpoint,
    NewMessage, Store, StoreResult,
};

/// The internal application's uid.
pub const APP_UID: &str = "vow-operational";
const ENDPOINT_UID: &str = "operational";
/// `message.attempt.failing` is sent when this attempt fails, `…recovered` when a delivery that
/// got that far succeeds.
pub const FAILING_AFTER: u32 = 4;

/// Emits operational events into the internal application.
#[derive(Clone)]
pub struct Operational {
    store: Arc<dyn Store>,
    app: AppId,
    wake: Arc<Notify>,
}

impl Operational {
    /// Makes sure the internal application and its endpoint exist and point at `url`.
    pub async fn ensure(store: Arc<dyn Store>, url: &str, wake: Arc<Notify>) -> StoreResult<Self> {
        let now = Utc::now().trunc_subsecs(6);
        let key = AppKey::Uid(APP_UID.into());
        let app =
            match store.get_application(&key).await? {
                Some(app) => app,
                None => {
                    let new = NewApplication {
                        id: AppId::new(),
                        fields: ApplicationFields {
                            name: "vow operational webhooks".into(),
                            uid: Some(APP_UID.into()),
                            ..Default::default()
                        },
                        now,
                    };
                    match store.create_application(new).await {
                        Ok(app) => app,
                        // Another process made it first.
                        Err(vow_store::StoreError::Conflict(_)) => store
                            .get_application(&key)
                            .await?
                            .ok_or(vow_store::StoreError::NotFound("application"))?,
                        Err(e) => return Err(e),
                    }
                }
            };
        let endpoint_key = EndpointKey::Uid(ENDPOINT_UID.into());
        match store.get_endpoint(app.id, &endpoint_key).await? {
            Some(ep) if ep.fields.url == url => {}
            Some(ep) => {
                let fields = EndpointFields {
                    url: url.to_string(),
                    ..ep.fields
                };
                store.update_endpoint(app.id, ep.id, fields).await?;
            }
            None => {
                let new = NewEndpoint {
                    id: EndpointId::new(),
                    app_id: app.id,
                    fields: EndpointFields {
                        url: url.to_string(),
                        uid: Some(ENDPOINT_UID.into()),
                        description: "vow's operational events".into(),
                        ..Default::default()
                    },
                    secret: crate::secret::generate(),
                    now,
                };
                if let Err(e) = store.create_endpoint(new).await {
                    if !matches!(e, vow_store::StoreError::Conflict(_)) {
                        return Err(e);
                    }
                }
            }
        }
        Ok(Self {
            store,
            app: app.id,
            wake,
        })
    }

    /// Emits what one recorded outcome calls for.
    pub async fn observe(
        &self,
        outcome: &AttemptOutcome,
        delivery: &Delivery,
        recorded: &Recorded,
    ) {
        let Recorded::Stored { endpoint_disabled } = recorded else {
            return;
        };
        if delivery.app_id == self.app {
            return;
        }
        let attempt = delivery.attempts + u32::from(outcome.attempt.is_some());
        let status = outcome.attempt.as_ref().and_then(|a| a.response_status);
        let data = json!({
            "appId": delivery.app_id,
            "msgId": delivery.msg_id,
            "endpointId": delivery.endpoint_id,
            "attempt": attempt,
            "lastStatusCode": status,
        });
        match &outcome.next {
            NextState::DeadLetter { reason, .. } => {
                let mut d = data.clone();
                d["reason"] = json!(reason);
                self.emit("message.attempt.exhausted", d).await;
            }
            NextState::RetryAt { .. } if outcome.attempt.is_some() && attempt == FAILING_AFTER => {
                self.emit("message.attempt.failing", data.clone()).await;
            }
            NextState::Delivered if attempt > FAILING_AFTER => {
                self.emit("message.attempt.recovered", data.clone()).await;
            }
            _ => {}
        }
        if *endpoint_disabled {
            let d = json!({"appId": delivery.app_id, "endpointId": delivery.endpoint_id});
            self.emit("endpoint.disabled", d).await;
        }
    }

    /// `source.event.quarantined`: an inbound delivery reused a stored event id with another
    /// payload, and was kept aside (`event`) for an operator to release or discard.
    pub async fn source_event_quarantined(&self, event: &InboundEvent) {
        let data = json!({
            "sourceId": event.source_id,
            "inboundEventId": event.id,
            "eventId": event.event_id,
            "account": event.account,
            "conflictsWith": event.conflicts_with,
        });
        self.emit("source.event.quarantined", data).await;
    }

    /// `endpoint.dead_letters.alert` or `…recovered` (`super::alert`): `count` is the
    /// endpoint's dead-letters in the window of `window_seconds` now, against `threshold`.
    pub async fn dead_letter_rate(
        &self,
        event_type: &str,
        count: &DeadLetterCount,
        threshold: u32,
        window_seconds: u64,
    ) {
        let data = json!({
            "appId": count.app_id,
            "endpointId": count.endpoint_id,
            "deadLetters": count.count,
            "windowSeconds": window_seconds,
            "threshold": threshold,
        });
        self.emit(event_type, data).await;
    }

    /// The internal application's id.
    pub fn app(&self) -> AppId {
        self.app
    }

    async fn emit(&self, event_type: &str, data: serde_json::Value) {
        let now = Utc::now().trunc_subsecs(6);
        let payload = json!({"type": event_type, "timestamp": now, "data": data}).to_string();
        let new = NewMessage {
            id: MessageId::new(),
            app_id: self.app,
            event_id: None,
            event_type: event_type.to_string(),
            channels: None,
            payload,
            payload_expires_at: now + chrono::Duration::days(30),
            now,
            traceparent: None,
        };
        match self.store.create_owed_message(new).await {
            Ok(_) => self.wake.notify_one(),
            Err(e) => {
                tracing::warn!(error = %e, event_type, "could not queue an operational event")
            }
        }
    }
}
