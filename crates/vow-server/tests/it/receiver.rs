//! A real webhook receiver for tests: records every request (headers and exact body), answers
//! with a scripted sequence of status codes, and verifies signatures with its own HMAC code and
//! `ring`'s ed25519, independent of `vow-signature`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::sync::Notify;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    /// When it arrived.
    pub at: std::time::Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap())
            .unwrap_or_default()
    }
}

#[derive(Default)]
struct Inner {
    received: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<u16>>,
    arrived: Notify,
    /// A header every answer carries.
    header: Mutex<Option<(&'static str, String)>>,
    /// How long each answer takes.
    delay: Mutex<Duration>,
    /// The status every answer has, whatever the script says.
    status: Mutex<Option<u16>>,
    /// The body every answer has (empty unless set).
    body: Mutex<String>,
}

/// A receiver listening on 127.0.0.1.
pub struct Receiver {
    pub url: String,
    inner: Arc<Inner>,
}

impl Receiver {
    /// Starts a receiver that answers `script` in order, then 200.
    pub async fn start(script: &[u16]) -> Receiver {
        let inner = Arc::new(Inner::default());
        inner.script.lock().unwrap().extend(script);
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, inner }
    }

    /// Makes every later answer carry `name: value`.
    pub fn answer_with_header(&self, name: &'static str, value: &str) {
        *self.inner.header.lock().unwrap() = Some((name, value.to_owned()));
    }

    /// Makes every later answer wait `delay` first (after recording the request).
    pub fn answer_after(&self, delay: Duration) {
        *self.inner.delay.lock().unwrap() = delay;
    }

    /// Makes every later answer carry `body`.
    pub fn answer_body(&self, body: &str) {
        *self.inner.body.lock().unwrap() = body.to_owned();
    }

    /// Makes every later answer `status` (`None`: back to the script, then 200).
    pub fn answer_status(&self, status: Option<u16>) {
        *self.inner.status.lock().unwrap() = status;
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    /// Waits (at most 10 s) until `n` requests have arrived.
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let arrived = self.inner.arrived.notified();
                if self.received().len() >= n {
                    return;
                }
                arrived.await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "expected {n} requests, got {}",
            self.received().len()
        );
        self.received()
    }
}

async fn receive(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    inner.received.lock().unwrap().push(Received {
        headers,
        body,
        at: std::time::Instant::now(),
    });
    inner.arrived.notify_waiters();
    let fixed = *inner.status.lock().unwrap();
    let status = fixed.unwrap_or_else(|| inner.script.lock().unwrap().pop_front().unwrap_or(200));
    let delay = *inner.delay.lock().unwrap();
    if !delay.is_zero() {
        // A receiver that is slow on purpose ([`Receiver::answer_after`]): the behaviour a test
        // asks for, not a wait for work.
        tokio::time::sleep(delay).await;
    }
    let mut answer = HeaderMap::new();
    if let Some((name, value)) = inner.header.lock().unwrap().clone() {
        answer.insert(name, value.parse().unwrap());
    }
    let body = inner.body.lock().unwrap().clone();
    (StatusCode::from_u16(status).unwrap(), answer, body)
}

fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().to_vec()
}

/// Whether a Standard Webhooks request verifies with `secret` (`whsec_…`): some `v1,` entry of
/// `webhook-signature` is HMAC-SHA256(base64-decoded key, "id.timestamp.body").
pub fn standard_signature_ok(r: &Received, secret: &str) -> bool {
    let key = STANDARD
        .decode(secret.trim_start_matches("whsec_"))
        .unwrap();
    let expected = hmac_sha256(
        &key,
        &[
            r.header("webhook-id").as_bytes(),
            b".",
            r.header("webhook-timestamp").as_bytes(),
            b".",
            &r.body,
        ],
    );
    let expected = format!("v1,{}", STANDARD.encode(expected));
    r.header("webhook-signature")
        .split(' ')
        .any(|entry| entry == expected)
}

/// Whether a Standard Webhooks request verifies with the ed25519 public key of `secret_key`
/// (`whsk_`, Svix's layout: base64 of seed ‖ public key, so the public key is the last 32
/// bytes): some `v1a,` entry of `webhook-signature` is `ring`'s valid signature over
/// "id.timestamp.body".
pub fn ed25519_signature_ok(r: &Received, secret_key: &str) -> bool {
    use ring::signature::{UnparsedPublicKey, ED25519};
    let pair = STANDARD
        .decode(secret_key.trim_start_matches("whsk_"))
        .unwrap();
    let public = UnparsedPublicKey::new(&ED25519, &pair[32..]);
    let content = [
        r.header("webhook-id").as_bytes(),
        b".",
        r.header("webhook-timestamp").as_bytes(),
        b".",
        &r.body,
    ]
    .concat();
    r.header("webhook-signature")
        .split(' ')
        .filter_map(|entry| entry.strip_prefix("v1a,"))
        .filter_map(|sig| STANDARD.decode(sig).ok())
        .any(|sig| public.verify(&content, &sig).is_ok())
}

/// The versions of `webhook-signature`'s entries, in order (`["v1a", "v1"]`).
pub fn signature_versions(r: &Received) -> Vec<String> {
    r.header("webhook-signature")
        .split(' ')
        .filter_map(|entry| entry.split_once(',').map(|(v, _)| v.to_string()))
        .collect()
}

/// Seed 003's check: `x-signature` is `t=<webhook time>` then `v1=` entries, one of which is
/// the hex HMAC of "t.body" keyed by the secret text.
pub fn seed_timestamped_ok(r: &Received, secret_text: &str) -> bool {
    let header = r.header("x-signature");
    let Some((t, entries)) = header
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(','))
    else {
        return false;
    };
    let expected = hex::encode(hmac_sha256(
        secret_text.as_bytes(),
        &[t.as_bytes(), b".", &r.body],
    ));
    entries
        .split(',')
        .any(|entry| entry.strip_prefix("v1=") == Some(expected.as_str()))
}

/// Seed 000's check: `x-signature` is `sha256=` + hex HMAC keyed by the secret text.
pub fn seed_sha256_ok(r: &Received, secret_text: &str) -> bool {
    let expected = format!(
        "sha256={}",
        hex::encode(hmac_sha256(secret_text.as_bytes(), &[&r.body]))
    );
    r.header("x-signature") == expected
}
