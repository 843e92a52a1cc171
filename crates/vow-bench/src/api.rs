//! A minimal client for the parts of vow's Svix-compatible API a benchmark needs.
//!
//! Owns: the keep-alive HTTP client, creating the application and its endpoints, and posting one
//! message with a 1 KiB JSON body: by default a one-letter pad, answered without its payload
//! (`?with_content=false`, so the answer is small); like an SDK, a realistic event answered
//! with it. For the inbound side: creating a source, posting one signed delivery to
//! `/in/{source_id}`, and reading back every stored event and rejection of a source, page by
//! page.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use crate::signed::Delivery;
use crate::vow_process::ADMIN_TOKEN;

/// Bytes of a message body (the whole `MessageIn` JSON).
pub const BODY_BYTES: usize = 1024;

/// How one POST ended.
#[derive(Debug)]
pub enum PostOutcome {
    /// 2xx with the new message's id.
    Acked(String),
    /// 503 with `Retry-After`: vow shed the message (graceful overload).
    Shed,
    /// A non-2xx status (but a shed).
    Rejected(u16),
    /// No answer (connection error or timeout).
    Failed,
}

/// How vow answered one inbound delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboundAnswer {
    /// 200 `{"outcome":"received"}`.
    Received,
    /// 200 `{"outcome":"duplicate"}`.
    Duplicate,
    /// Another status, or a 200 with another body (the status).
    Status(u16),
    /// No answer (connection error or timeout).
    Failed,
}

/// One stored inbound event, as `GET /api/v1/source/{id}/event` lists it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredEvent {
    /// The provider's event id.
    pub event_id: Option<String>,
    /// `received`, `quarantined`, ...
    pub state: String,
    /// Re-sends counted against it.
    pub duplicates: u64,
}

/// One recorded refusal, as `GET /api/v1/source/{id}/rejection` lists it.
#[derive(Debug, Clone, Deserialize)]
pub struct StoredRejection {
    /// Why (`vow_signature`'s reason code).
    pub reason: String,
    /// The status answered.
    pub status: u16,
}

#[derive(Deserialize)]
struct ListPage<T> {
    data: Vec<T>,
    done: bool,
    iterator: Option<String>,
}

#[derive(Deserialize)]
struct OutcomeOnly {
    outcome: String,
}

/// One reading of vow's `/metrics`.
pub struct Metrics(String);

impl Metrics {
    /// The value of the sample `series` (a metric name with its labels as vow renders them,
    /// e.g. `vow_retention_purged_total{what="messages"}`); 0 when absent.
    pub fn value(&self, series: &str) -> f64 {
        let value = self.0.lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            value.trim().parse::<f64>().ok()
        });
        value.unwrap_or(0.0)
    }

    /// The share of the observations of histogram `name` whose series has every label of
    /// `labels` (each as vow renders it, e.g. `status="202"`) that took at most `le` (one of its
    /// bucket bounds, as rendered: `"0.05"`); `None` when there are none.
    pub fn share_within(&self, name: &str, labels: &[&str], le: &str) -> Option<f64> {
        let bucket = format!("{name}_bucket{{");
        let count = |bound: &str| -> f64 {
            let le = format!("le=\"{bound}\"");
            let series = self.0.lines().filter_map(|line| line.strip_prefix(&bucket));
            let matching = series.filter(|rest| {
                let labels_end = rest.rfind('}').unwrap_or(0);
                let set = &rest[..labels_end];
                set.split(',').any(|l| l == le)
                    && labels.iter().all(|l| set.split(',').any(|s| s == *l))
            });
            let values = matching.filter_map(|rest| rest.rsplit(' ').next()?.parse::<f64>().ok());
            values.sum()
        };
        let all = count("+Inf");
        (all > 0.0).then(|| count(le) / all)
    }
}

/// The API of one vow process.
#[derive(Debug, Clone)]
pub struct Api {
    client: reqwest::Client,
    /// The vow processes message creates go to, in turn; the first takes everything else too
    /// ([`Api::base`]). One unless [`Api::spread_over`] several.
    nodes: Arc<[String]>,
    turn: Arc<AtomicUsize>,
}

#[derive(Deserialize)]
struct IdOnly {
    id: String,
}

impl Api {
    /// A client for `base` (`http://127.0.0.1:<port>`), keeping up to `pool` idle connections.
    pub fn new(base: &str, pool: usize) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(pool)
            .pool_idle_timeout(Duration::from_secs(120))
            .tcp_nodelay(true)
            .timeout(Duration::from_secs(60))
            .http1_only()
            .no_proxy()
            .build()?;
        Ok(Self {
            client,
            nodes: Arc::from([base.to_string()]),
            turn: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Points this client at `base` (vow restarted on another port).
    pub fn moved_to(&mut self, base: &str) {
        self.nodes = Arc::from([base.to_string()]);
    }

    /// Posts message creates to each of `bases` (vow processes sharing one database) in turn;
    /// everything else still goes to the first. Keeps the current node if `bases` is empty.
    pub fn spread_over(&mut self, bases: Vec<String>) {
        if !bases.is_empty() {
            self.nodes = Arc::from(bases);
        }
    }

    /// The node every request but a message create goes to.
    fn base(&self) -> &str {
        &self.nodes[0]
    }

    /// The node the next message create goes to.
    fn next_node(&self) -> &str {
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        &self.nodes[turn % self.nodes.len()]
    }

    async fn create(&self, path: &str, body: serde_json::Value) -> anyhow::Result<String> {
        let resp = self
            .client
            .post(format!("{}{path}", self.base()))
            .bearer_auth(ADMIN_TOKEN)
            .json(&body)
            .send()
            .await
            .with_context(|| format!("POST {path}"))?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            bail!("POST {path}: {status}: {text}");
        }
        Ok(serde_json::from_str::<IdOnly>(&text)?.id)
    }

    /// Creates an application; returns its id.
    pub async fn create_app(&self) -> anyhow::Result<String> {
        self.create("/api/v1/app", json!({"name": "bench"})).await
    }

    /// Creates an endpoint of `app` delivering to `url`; returns its id.
    pub async fn create_endpoint(&self, app: &str, url: &str) -> anyhow::Result<String> {
        self.create(
            &format!("/api/v1/app/{app}/endpoint"),
            json!({"url": url, "description": "bench"}),
        )
        .await
    }

    /// `GET /metrics` of every node message creates go to, one after another, read once for
    /// any number of series: [`Metrics::share_within`] counts them all, [`Metrics::value`]
    /// reads the first node's.
    pub async fn metrics(&self) -> anyhow::Result<Metrics> {
        let mut text = String::new();
        for node in self.nodes.iter() {
            let resp = self
                .client
                .get(format!("{node}/metrics"))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await
                .context("GET /metrics")?;
            text.push_str(&resp.error_for_status()?.text().await?);
        }
        Ok(Metrics(text))
    }

    /// Posts `body` as a message of `app`, with `key` as its `Idempotency-Key`; `with_content`:
    /// the answer carries the payload, as the Svix SDKs ask by default.
    pub async fn post_message(
        &self,
        app: &str,
        body: Bytes,
        key: Option<String>,
        with_content: bool,
    ) -> PostOutcome {
        let mut req = self
            .client
            .post(format!(
                "{}/api/v1/app/{app}/msg?with_content={with_content}",
                self.next_node()
            ))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "application/json");
        if let Some(key) = key {
            req = req.header("idempotency-key", key);
        }
        let sent = req.body(body).send().await;
        let Ok(resp) = sent else {
            return PostOutcome::Failed;
        };
        let status = resp.status();
        let shed = status == reqwest::StatusCode::SERVICE_UNAVAILABLE
            && resp.headers().contains_key(reqwest::header::RETRY_AFTER);
        let Ok(bytes) = resp.bytes().await else {
            return PostOutcome::Failed;
        };
        if shed {
            return PostOutcome::Shed;
        }
        if !status.is_success() {
            return PostOutcome::Rejected(status.as_u16());
        }
        match serde_json::from_slice::<IdOnly>(&bytes) {
            Ok(m) => PostOutcome::Acked(m.id),
            Err(_) => PostOutcome::Rejected(status.as_u16()),
        }
    }
}

impl Api {
    /// Creates a Standard Webhooks source verified with `secret`, with no destinations;
    /// returns its id.
    pub async fn create_source(&self, secret: &str) -> anyhow::Result<String> {
        let body = json!({
            "description": "bench",
            "scheme": "standard-webhooks",
            "secrets": [secret],
            "destinations": [],
        });
        self.create("/api/v1/source", body).await
    }

    /// Posts `d` to `/in/{source}` with its `webhook-*` headers (no admin token).
    pub async fn post_inbound(&self, source: &str, d: &Delivery) -> InboundAnswer {
        let sent = self
            .client
            .post(format!("{}/in/{source}", self.base()))
            .header("content-type", "application/json")
            .header("webhook-id", &d.id)
            .header("webhook-timestamp", &d.timestamp)
            .header("webhook-signature", &d.signature)
            .body(d.body.clone())
            .send()
            .await;
        let Ok(resp) = sent else {
            return InboundAnswer::Failed;
        };
        let status = resp.status().as_u16();
        let Ok(bytes) = resp.bytes().await else {
            return InboundAnswer::Failed;
        };
        if status != 200 {
            return InboundAnswer::Status(status);
        }
        match serde_json::from_slice::<OutcomeOnly>(&bytes) {
            Ok(o) if o.outcome == "received" => InboundAnswer::Received,
            Ok(o) if o.outcome == "duplicate" => InboundAnswer::Duplicate,
            _ => InboundAnswer::Status(status),
        }
    }

    /// Every item of the listing at `path` (ascending, 250 per page).
    async fn list_all<T: serde::de::DeserializeOwned>(&self, path: &str) -> anyhow::Result<Vec<T>> {
        let mut out = Vec::new();
        let mut iterator: Option<String> = None;
        loop {
            let mut req = self
                .client
                .get(format!("{}{path}", self.base()))
                .bearer_auth(ADMIN_TOKEN)
                .query(&[("limit", "250"), ("order", "ascending")]);
            if let Some(it) = &iterator {
                req = req.query(&[("iterator", it)]);
            }
            let resp = req.send().await.with_context(|| format!("GET {path}"))?;
            let status = resp.status();
            let text = resp.text().await?;
            if !status.is_success() {
                bail!("GET {path}: {status}: {text}");
            }
            let page: ListPage<T> = serde_json::from_str(&text)?;
            let empty = page.data.is_empty();
            out.extend(page.data);
            if page.done || empty || page.iterator.is_none() {
                return Ok(out);
            }
            iterator = page.iterator;
        }
    }

    /// Every event stored for `source`.
    pub async fn source_events(&self, source: &str) -> anyhow::Result<Vec<StoredEvent>> {
        self.list_all(&format!("/api/v1/source/{source}/event"))
            .await
    }

    /// Every refusal recorded for `source`.
    pub async fn source_rejections(&self, source: &str) -> anyhow::Result<Vec<StoredRejection>> {
        self.list_all(&format!("/api/v1/source/{source}/rejection"))
            .await
    }
}

/// A `MessageIn` body of exactly [`BODY_BYTES`] bytes, tagged with `seq`: `like_sdk`, a
/// realistic order event ([`event_body`]), else a payload padded with one letter.
pub fn message_body(seq: u64, like_sdk: bool) -> Bytes {
    if like_sdk {
        return event_body(seq);
    }
    let head = format!(r#"{{"eventType":"bench.event","payload":{{"seq":{seq},"pad":""#);
    let tail = r#""}}"#;
    let pad = BODY_BYTES.saturating_sub(head.len() + tail.len());
    let mut s = String::with_capacity(BODY_BYTES);
    s.push_str(&head);
    s.extend(std::iter::repeat_n('x', pad));
    s.push_str(tail);
    Bytes::from(s)
}

/// Words the realistic events are made of.
const WORDS: [&str; 24] = [
    "amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
    "kestrel", "lumen", "maple", "nectar", "onyx", "pepper", "quartz", "raven", "saffron",
    "tundra", "umber", "velvet", "willow", "zephyr",
];

/// What follows an event's line items: the start of its note, which pads it to size.
const NOTE: &str = r#"],"note":""#;

/// An order event of exactly [`BODY_BYTES`] bytes, its values drawn from `seq`: ids, names,
/// amounts and line items that vary from message to message and repeat their keys, so it
/// compresses about as a real event does (unlike a one-letter pad, which shrinks to nothing).
pub fn event_body(seq: u64) -> Bytes {
    let mut state = seq ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // splitmix64
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let word = |n: u64| WORDS[(n % WORDS.len() as u64) as usize];
    // Line items until the event nears its size; each round also draws the ids the header
    // shows, and the last round's are kept.
    let mut items = String::new();
    let mut i = 0;
    let head = loop {
        let (a, b) = (next(), next());
        if i > 0 {
            items.push(',');
        }
        items.push_str(&format!(
            r#"{{"line":{i},"sku":"SKU-{:08X}","name":"{} {}","quantity":{},"unit_amount":{}}}"#,
            a as u32,
            word(a >> 32),
            word(b),
            1 + b % 5,
            100 + (b >> 8) % 99_900
        ));
        let (c, d) = (next(), next());
        let head = format!(
            r#"{{"eventType":"order.created","payload":{{"seq":{seq},"id":"ord_{c:016x}","customer":{{"id":"cus_{d:016x}","email":"{}.{}@example.com","name":"{} {}"}},"currency":"EUR","items":["#,
            word(c),
            d % 1000,
            word(c >> 16),
            word(d >> 16),
        );
        if head.len() + items.len() + NOTE.len() + 200 > BODY_BYTES {
            break head;
        }
        i += 1;
    };
    let mut s = head + &items + NOTE;
    let tail = r#""}}"#;
    while s.len() + tail.len() < BODY_BYTES {
        let w = word(next());
        let room = BODY_BYTES - tail.len() - s.len();
        if w.len() < room {
            s.push_str(w);
            s.push(' ');
        } else {
            s.extend(std::iter::repeat_n('.', room));
        }
    }
    s.push_str(tail);
    Bytes::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_creates_go_to_each_node_in_turn_and_the_rest_to_the_first() {
        let mut api = Api::new("http://127.0.0.1:1", 1).unwrap();
        assert_eq!(api.next_node(), "http://127.0.0.1:1");
        let nodes = [
            "http://127.0.0.1:2",
            "http://127.0.0.1:3",
            "http://127.0.0.1:4",
        ];
        api.spread_over(nodes.iter().map(|n| n.to_string()).collect());
        let turns: Vec<String> = (0..7).map(|_| api.next_node().to_string()).collect();
        let start = nodes.iter().position(|n| *n == turns[0]).unwrap();
        for (i, turn) in turns.iter().enumerate() {
            assert_eq!(turn, nodes[(start + i) % nodes.len()], "turn {i}");
        }
        assert_eq!(api.base(), nodes[0]);
        // A clone (each load task has one) shares the turns.
        let other = api.clone();
        let (a, b) = (api.next_node().to_string(), other.next_node().to_string());
        assert_ne!(a, b);

        api.moved_to("http://127.0.0.1:5");
        assert_eq!(api.next_node(), "http://127.0.0.1:5");
        assert_eq!(api.next_node(), "http://127.0.0.1:5");
    }

    #[test]
    fn an_event_body_is_1_kib_of_valid_json_that_varies_with_seq() {
        let mut seen = std::collections::HashSet::new();
        for seq in [0, 1, 7, u64::MAX] {
            let b = event_body(seq);
            assert_eq!(b.len(), BODY_BYTES);
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(v["payload"]["seq"], seq);
            assert!(v["payload"]["items"].as_array().unwrap().len() >= 3);
            assert!(
                seen.insert(v["payload"]["items"].to_string()),
                "items repeat"
            );
        }
        assert_eq!(event_body(7), event_body(7), "deterministic");
    }

    #[test]
    fn a_message_body_is_1_kib_of_valid_json() {
        for seq in [0, 7, u64::MAX] {
            let b = message_body(seq, false);
            assert_eq!(b.len(), BODY_BYTES);
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(v["payload"]["seq"], seq);
        }
    }
}
