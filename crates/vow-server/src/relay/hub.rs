//! [`Hub`]: the `vow listen` connections of this process, one per relay target (a relay
//! endpoint, or a relay destination of a source), and the attempts waiting for their answers.
//!
//! A listener's stream registers a [`Connection`] (a newer one for the same target replaces
//! it, ending the older stream). An attempt to a relay target ([`Hub::attempt`]) waits a little
//! for a listener, queues the signed request on its connection, and waits for the answer the
//! listener posts ([`Hub::answer`]), matched by a number of the hub's own; many attempts are in
//! flight over one connection at once. The answer becomes the [`EgressResponse`] (or
//! [`EgressError`]) an HTTP attempt would have produced, so the delivery code classifies both
//! alike. When a connection goes, the attempts it still owed an answer fail as a broken
//! connection would.
//!
//! An attempt that finds no listener for a relay endpoint leaves it [missed](Hub::passed_over)
//! here for a while: the dispatcher claims nothing of a missed relay endpoint until the miss is
//! old or the listener connects here, so among several nodes the one holding the listener takes
//! its deliveries, not whichever node claims first.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;
use vow_core::EndpointId;
use vow_egress::{EgressError, EgressResponse};
use vow_store::queue::ClaimedDelivery;
use vow_store::relay::RelayTarget;

use super::wire::{self, Answer, RelayResult, Relayed, MAX_EXCERPT_BYTES};
use crate::worker::lock;

/// How long an attempt to a relay target waits for a listener before it is put back.
pub const LISTENER_WAIT: Duration = Duration::from_secs(5);

/// Requests queued on one connection before an attempt waits for room.
const QUEUE: usize = 1024;

/// How long after its listener went away a target's attempts still wait for it in memory
/// (it is reconnecting); after that (or for a target never connected here) they hold no slot.
const RECENT: Duration = Duration::from_secs(60);

/// How long this process passes over a relay endpoint after an attempt found no listener for it
/// here (unless one connects here meanwhile): long against the few seconds a delivery that
/// found no listener waits before it is due again ([`super::RETRY_ABSENT`]), so another node
/// holding the listener takes it; short enough that a listener gone everywhere is still looked
/// for every half minute.
pub const PASS_OVER: Duration = Duration::from_secs(30);

/// How much longer than the attempt's timeout vow waits for the listener's report (the
/// listener times its local request out itself, and says so).
const REPORT_GRACE: Duration = Duration::from_secs(1);

/// The connected listeners of this process and the attempts waiting for their answers.
pub struct Hub {
    inner: Mutex<Inner>,
    /// Numbers connections and attempts.
    next: AtomicU64,
    /// Signalled when a listener connects.
    arrived: Notify,
    /// How long an attempt waits for a listener ([`LISTENER_WAIT`]).
    wait: Duration,
}

impl Default for Hub {
    fn default() -> Self {
        Self::waiting(LISTENER_WAIT)
    }
}

#[derive(Default)]
struct Inner {
    listeners: HashMap<RelayTarget, Listener>,
    pending: HashMap<u64, Pending>,
    /// When the listeners that went away in the last [`RECENT`] went.
    gone: HashMap<RelayTarget, Instant>,
    /// When an attempt last found no listener for each relay endpoint (kept for
    /// [`PASS_OVER`]; a destination's forwards are not the dispatcher's, so none are kept).
    missed: HashMap<EndpointId, Instant>,
}

struct Listener {
    conn: u64,
    tx: mpsc::Sender<Relayed>,
}

/// An attempt handed to a listener, waiting for its answer.
struct Pending {
    target: RelayTarget,
    conn: u64,
    answer: oneshot::Sender<RelayResult>,
}

/// A listener's registration: the requests for it, in order. Dropping it disconnects.
pub struct Connection {
    hub: Arc<Hub>,
    target: RelayTarget,
    conn: u64,
    rx: mpsc::Receiver<Relayed>,
}

impl tokio_stream::Stream for Connection {
    type Item = Relayed;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Relayed>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.hub.disconnect(self.target, self.conn);
    }
}

/// Forgets an attempt's pending entry however its wait ends (answered, timed out, cancelled).
struct Forget<'a> {
    hub: &'a Hub,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.hub.inner).pending.remove(&self.id);
    }
}

impl Hub {
    /// A hub whose attempts wait `wait` for a listener.
    pub fn waiting(wait: Duration) -> Self {
        Self {
            inner: Mutex::default(),
            next: AtomicU64::new(1),
            arrived: Notify::new(),
            wait,
        }
    }

    fn number(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a listener for `target`, replacing any earlier one (whose stream ends).
    pub fn connect(self: &Arc<Self>, target: RelayTarget) -> Connection {
        let conn = self.number();
        let (tx, rx) = mpsc::channel(QUEUE);
        {
            let mut inner = lock(&self.inner);
            inner.gone.remove(&target);
            if let RelayTarget::Endpoint { id, .. } = target {
                inner.missed.remove(&id);
            }
            let replaced = inner.listeners.insert(target, Listener { conn, tx });
            // The listener came back on a new connection: the old one owes nothing more.
            if let Some(old) = replaced {
                inner.pending.retain(|_, p| p.conn != old.conn);
            }
        }
        self.arrived.notify_waiters();
        Connection {
            hub: self.clone(),
            target,
            conn,
            rx,
        }
    }

    /// Whether a listener for `target` is connected to this process.
    pub fn connected(&self, target: &RelayTarget) -> bool {
        lock(&self.inner).listeners.contains_key(target)
    }

    /// The targets whose listener is connected to this process.
    pub fn targets(&self) -> Vec<RelayTarget> {
        lock(&self.inner).listeners.keys().copied().collect()
    }

    /// The relay endpoints an attempt found no listener for here in the last [`PASS_OVER`]
    /// and whose listener has not connected here since: the dispatcher gives them no room.
    pub fn passed_over(&self) -> Vec<EndpointId> {
        let mut inner = lock(&self.inner);
        inner.missed.retain(|_, at| at.elapsed() < PASS_OVER);
        inner.missed.keys().copied().collect()
    }

    fn disconnect(&self, target: RelayTarget, conn: u64) {
        let mut inner = lock(&self.inner);
        if inner.listeners.get(&target).is_some_and(|l| l.conn == conn) {
            inner.listeners.remove(&target);
            inner.gone.retain(|_, at| at.elapsed() < RECENT);
            inner.gone.insert(target, Instant::now());
        }
        // Dropping their senders tells the attempts the listener went away.
        inner.pending.retain(|_, p| p.conn != conn);
    }

    /// Whether a listener for `target` is connected here or went away lately (so it is
    /// expected back soon).
    pub fn expected(&self, target: &RelayTarget) -> bool {
        let inner = lock(&self.inner);
        inner.listeners.contains_key(target)
            || inner
                .gone
                .get(target)
                .is_some_and(|at| at.elapsed() < RECENT)
    }

    /// Delivers a listener's `result` to the attempt of `target` waiting for it; `false` when
    /// no such attempt waits (it timed out, or the number is another target's).
    pub fn answer(&self, target: RelayTarget, result: RelayResult) -> bool {
        let pending = {
            let mut inner = lock(&self.inner);
            match inner.pending.get(&result.id) {
                Some(p) if p.target == target => inner.pending.remove(&result.id),
                _ => None,
            }
        };
        pending.is_some_and(|p| p.answer.send(result).is_ok())
    }

    /// The listener of `target`, waiting at most `wait` for one to connect.
    async fn listener(&self, target: RelayTarget, wait: Duration) -> Option<Listener> {
        let deadline = Instant::now() + wait;
        loop {
            let arrived = self.arrived.notified();
            let found = lock(&self.inner).listeners.get(&target).map(|l| Listener {
                conn: l.conn,
                tx: l.tx.clone(),
            });
            if found.is_some() {
                return found;
            }
            tokio::time::timeout_at(deadline, arrived).await.ok()?;
        }
    }

    /// Attempts `handed` (signed as `headers`, its payload `body`) through its target's
    /// listener, waiting at most `timeout` (plus a little) for the local answer. `None` when no
    /// listener is connected: nothing was sent. It waits for one (the hub's wait,
    /// [`LISTENER_WAIT`]) only when one is [`expected`](Self::expected).
    pub async fn attempt(
        &self,
        handed: Handed<'_>,
        headers: &HeaderMap,
        body: &[u8],
        timeout: Duration,
    ) -> Option<Result<EgressResponse, EgressError>> {
        let target = handed.target;
        let wait = if self.expected(&target) {
            self.wait
        } else {
            Duration::ZERO
        };
        let Some(listener) = self.listener(target, wait).await else {
            if let RelayTarget::Endpoint { id, .. } = target {
                lock(&self.inner).missed.insert(id, Instant::now());
            }
            return None;
        };
        let id = self.number();
        let (answer, answered) = oneshot::channel();
        let pending = Pending {
            target,
            conn: listener.conn,
            answer,
        };
        lock(&self.inner).pending.insert(id, pending);
        let _forget = Forget { hub: self, id };
        let (body, body_base64) = wire::encode_body(body);
        let relayed = Relayed {
            id,
            msg_id: handed.msg_id,
            event_type: handed.event_type.to_owned(),
            attempt: handed.attempt,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            headers: headers
                .iter()
                .map(|(n, v)| {
                    let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
                    (n.as_str().to_owned(), value)
                })
                .collect(),
            body,
            body_base64,
        };
        let started = Instant::now();
        let sent = tokio::time::timeout(timeout, listener.tx.send(relayed)).await;
        drop(listener);
        match sent {
            Ok(Ok(())) => {}
            // The listener went away before the request reached it: nothing was sent.
            Ok(Err(_)) => return None,
            Err(_) => return Some(Err(EgressError::Timeout { sent: false })),
        }
        let left = (timeout + REPORT_GRACE).saturating_sub(started.elapsed());
        Some(match tokio::time::timeout(left, answered).await {
            Ok(Ok(result)) => response(result),
            Ok(Err(_)) => {
                let reason = "the listener disconnected before it reported the local answer";
                Err(EgressError::Transport {
                    sent: true,
                    reason: reason.into(),
                    source: reason.into(),
                })
            }
            Err(_) => Err(EgressError::Timeout { sent: true }),
        })
    }
}

/// What an attempt hands a listener besides the signed request: whose it is and what it is.
pub struct Handed<'a> {
    /// The relay target attempted.
    pub target: RelayTarget,
    /// The `webhook-id` (a message's id, or an inbound event's).
    pub msg_id: String,
    /// The event type shown on the listener's line.
    pub event_type: &'a str,
    /// Which attempt this is (1 for the first).
    pub attempt: u32,
}

impl<'a> Handed<'a> {
    /// An application's delivery to its relay endpoint.
    pub fn delivery(claimed: &'a ClaimedDelivery) -> Self {
        Self {
            target: RelayTarget::Endpoint {
                app: claimed.delivery.app_id,
                id: claimed.delivery.endpoint_id,
            },
            msg_id: claimed.delivery.msg_id.to_string(),
            event_type: &claimed.event_type,
            attempt: claimed.delivery.attempts + 1,
        }
    }
}

/// A listener's result as the response (or failure) an HTTP attempt would have had.
fn response(result: RelayResult) -> Result<EgressResponse, EgressError> {
    let latency = Duration::from_millis(result.ms);
    match result.answer {
        Answer::Response {
            status,
            headers,
            body,
        } => {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                if let (Ok(n), Ok(v)) = (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(&value),
                ) {
                    map.append(n, v);
                }
            }
            let mut body = body.into_bytes();
            let body_truncated = body.len() > MAX_EXCERPT_BYTES;
            body.truncate(MAX_EXCERPT_BYTES);
            Ok(EgressResponse {
                status,
                headers: map,
                body_prefix: Bytes::from(body),
                body_truncated,
                latency,
            })
        }
        Answer::Failed {
            timed_out: true, ..
        } => Err(EgressError::Timeout { sent: true }),
        Answer::Failed { reason, .. } => Err(EgressError::Connect {
            reason: format!("the listener could not reach its local URL: {reason}"),
            source: reason.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::Utc;
    use tokio_stream::StreamExt;
    use vow_core::{AppId, DeliveryId, DestinationId, MessageId, SourceId};
    use vow_store::queue::{DeliveryTarget, LeaseToken};
    use vow_store::{Delivery, DeliveryOptions, DeliveryStatus};

    use super::*;

    fn target() -> RelayTarget {
        RelayTarget::Endpoint {
            app: AppId::new(),
            id: EndpointId::new(),
        }
    }

    fn destination() -> RelayTarget {
        RelayTarget::Destination {
            source: SourceId::new(),
            id: DestinationId::new(),
        }
    }

    fn endpoint_id(target: RelayTarget) -> EndpointId {
        let RelayTarget::Endpoint { id, .. } = target else {
            unreachable!("an endpoint")
        };
        id
    }

    fn claimed(target: RelayTarget) -> ClaimedDelivery {
        let RelayTarget::Endpoint { app, id: endpoint } = target else {
            unreachable!("an endpoint")
        };
        let now = Utc::now();
        ClaimedDelivery {
            delivery: Delivery {
                id: DeliveryId::new(),
                app_id: app,
                msg_id: MessageId::new(),
                endpoint_id: endpoint,
                status: DeliveryStatus::Pending,
                attempts: 1,
                client_errors: 0,
                last_status: Some(500),
                dead_letter_reason: None,
                next_attempt_at: now,
                created_at: now,
                manual: false,
            },
            lease: LeaseToken("lease".into()),
            lease_until: now,
            event_type: "order.created".into(),
            payload: Some("{\"a\": 1}".into()),
            traceparent: None,
            endpoint: DeliveryTarget {
                url: "relay://listen".into(),
                headers: BTreeMap::new(),
                disabled: false,
                throttle_rate: None,
                secrets: Vec::new(),
                options: DeliveryOptions::default(),
                updated_at: now,
            },
        }
    }

    fn headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("webhook-id", HeaderValue::from_static("msg_1"));
        h
    }

    const LONG: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn an_answer_becomes_the_attempts_response() {
        let hub = Arc::new(Hub::default());
        let ep = target();
        let mut conn = hub.connect(ep);
        let c = claimed(ep);
        let attempt = {
            let (hub, c) = (hub.clone(), c.clone());
            tokio::spawn(async move {
                hub.attempt(Handed::delivery(&c), &headers(), b"{\"a\": 1}", LONG)
                    .await
            })
        };
        let relayed = conn.next().await.unwrap();
        assert_eq!(relayed.body, "{\"a\": 1}");
        assert_eq!(relayed.attempt, 2);
        assert_eq!(relayed.msg_id, c.delivery.msg_id.to_string());
        assert_eq!(relayed.headers, vec![("webhook-id".into(), "msg_1".into())]);
        let answer = |id| RelayResult {
            id,
            ms: 3,
            answer: Answer::Response {
                status: 500,
                headers: vec![("retry-after".into(), "2".into())],
                body: "boom".into(),
            },
        };
        // Another endpoint cannot answer it.
        assert!(!hub.answer(target(), answer(relayed.id)));
        assert!(hub.answer(ep, answer(relayed.id)));
        let response = attempt.await.unwrap().unwrap().unwrap();
        assert_eq!(response.status, 500);
        assert_eq!(response.retry_after(), Some("2"));
        assert_eq!(&response.body_prefix[..], b"boom");
        assert_eq!(response.latency, Duration::from_millis(3));
        // Answered once only.
        assert!(!hub.answer(ep, answer(relayed.id)));
    }

    #[tokio::test]
    async fn with_no_listener_nothing_is_sent_and_a_late_listener_still_gets_it() {
        let hub = Arc::new(Hub::waiting(LONG));
        let ep = target();
        // Never connected here: no wait at all, however long the hub's.
        let (c, h) = (claimed(ep), headers());
        let at_once = tokio::time::timeout(
            Duration::from_secs(1),
            hub.attempt(Handed::delivery(&c), &h, b"{}", LONG),
        );
        assert!(at_once.await.unwrap().is_none());
        assert!(!hub.expected(&ep));
        // Connected, then gone: expected back, so an attempt waits for it.
        drop(hub.connect(ep));
        assert!(hub.expected(&ep));
        let attempt = {
            let hub = hub.clone();
            tokio::spawn(async move {
                hub.attempt(Handed::delivery(&claimed(ep)), &headers(), b"{}", LONG)
                    .await
            })
        };
        tokio::task::yield_now().await;
        let mut conn = hub.connect(ep);
        let relayed = conn.next().await.unwrap();
        let failed = RelayResult {
            id: relayed.id,
            ms: 1,
            answer: Answer::Failed {
                timed_out: false,
                reason: "Connection refused".into(),
            },
        };
        assert!(hub.answer(ep, failed));
        let err = attempt.await.unwrap().unwrap().unwrap_err();
        assert!(matches!(err, EgressError::Connect { .. }), "{err}");
        assert!(err.to_string().contains("Connection refused"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_relay_endpoint_missed_here_is_passed_over_until_its_listener_connects_or_a_while_passes(
    ) {
        let hub = Arc::new(Hub::default());
        let (missed, connected, destination) = (target(), target(), destination());
        let _conn = hub.connect(connected);
        let h = headers();
        for target in [connected, destination, missed] {
            let handed = Handed {
                target,
                msg_id: "msg_1".into(),
                event_type: "order.created",
                attempt: 1,
            };
            // The connected one's stays in flight (nobody answers): it found its listener.
            let attempt = hub.attempt(handed, &h, b"{}", LONG);
            let _ = tokio::time::timeout(Duration::from_millis(10), attempt).await;
        }
        // Only the endpoint with no listener here; a destination is not the dispatcher's.
        assert_eq!(hub.passed_over(), vec![endpoint_id(missed)]);
        tokio::time::advance(PASS_OVER - Duration::from_millis(1)).await;
        assert_eq!(hub.passed_over(), vec![endpoint_id(missed)]);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(
            hub.passed_over().is_empty(),
            "looked for again after a while"
        );
        // Missed again, then its listener connects here: taken at once.
        assert!(hub
            .attempt(Handed::delivery(&claimed(missed)), &headers(), b"{}", LONG)
            .await
            .is_none());
        assert_eq!(hub.passed_over(), vec![endpoint_id(missed)]);
        let _back = hub.connect(missed);
        assert!(hub.passed_over().is_empty());
    }

    #[tokio::test]
    async fn a_listener_that_goes_away_fails_what_it_owed_like_a_broken_connection() {
        let hub = Arc::new(Hub::default());
        let ep = target();
        let mut conn = hub.connect(ep);
        let attempt = {
            let hub = hub.clone();
            tokio::spawn(async move {
                hub.attempt(Handed::delivery(&claimed(ep)), &headers(), b"{}", LONG)
                    .await
            })
        };
        conn.next().await.unwrap();
        drop(conn);
        assert!(!hub.connected(&ep));
        let err = attempt.await.unwrap().unwrap().unwrap_err();
        assert!(
            matches!(err, EgressError::Transport { sent: true, .. }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_reconnecting_listener_replaces_the_old_connection() {
        let hub = Arc::new(Hub::default());
        let ep = target();
        let mut old = hub.connect(ep);
        let attempt = {
            let hub = hub.clone();
            tokio::spawn(async move {
                hub.attempt(Handed::delivery(&claimed(ep)), &headers(), b"{}", LONG)
                    .await
            })
        };
        old.next().await.unwrap();
        let _new = hub.connect(ep);
        // The old stream ends, and what it owed fails at once.
        assert!(old.next().await.is_none());
        let err = attempt.await.unwrap().unwrap().unwrap_err();
        assert!(matches!(err, EgressError::Transport { .. }), "{err}");
        drop(old);
        assert!(
            hub.connected(&ep),
            "dropping the old connection keeps the new one"
        );
    }
}
