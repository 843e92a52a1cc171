//! A minimal client for the parts of vow's Svix-compatible API a benchmark needs.
//!
//! Owns: the keep-alive HTTP client, creating the application and its endpoints, and posting one
//! message with a 1 KiB JSON body (`?with_content=false`, so the answer is small).

use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use crate::vow_process::ADMIN_TOKEN;

/// Bytes of a message body (the whole `MessageIn` JSON).
pub const BODY_BYTES: usize = 1024;

/// How one POST ended.
#[derive(Debug)]
pub enum PostOutcome {
    /// 2xx with the new message's id.
    Acked(String),
    /// A non-2xx status.
    Rejected(u16),
    /// No answer (connection error or timeout).
    Failed,
}

/// The API of one vow process.
#[derive(Debug, Clone)]
pub struct Api {
    client: reqwest::Client,
    base: String,
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
            base: base.to_string(),
        })
    }

    async fn create(&self, path: &str, body: serde_json::Value) -> anyhow::Result<String> {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
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

    /// Posts `body` as a message of `app`.
    pub async fn post_message(&self, app: &str, body: Bytes, key: Option<String>) -> PostOutcome {
        let mut req = self
            .client
            .post(format!(
                "{}/api/v1/app/{app}/msg?with_content=false",
                self.base
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
        let Ok(bytes) = resp.bytes().await else {
            return PostOutcome::Failed;
        };
        if !status.is_success() {
            return PostOutcome::Rejected(status.as_u16());
        }
        match serde_json::from_slice::<IdOnly>(&bytes) {
            Ok(m) => PostOutcome::Acked(m.id),
            Err(_) => PostOutcome::Rejected(status.as_u16()),
        }
    }
}

/// A `MessageIn` body of exactly [`BODY_BYTES`] bytes, tagged with `seq`.
pub fn message_body(seq: u64) -> Bytes {
    let head = format!(r#"{{"eventType":"bench.event","payload":{{"seq":{seq},"pad":""#);
    let tail = r#""}}"#;
    let pad = BODY_BYTES.saturating_sub(head.len() + tail.len());
    let mut s = String::with_capacity(BODY_BYTES);
    s.push_str(&head);
    s.extend(std::iter::repeat_n('x', pad));
    s.push_str(tail);
    Bytes::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_body_is_1_kib_of_valid_json() {
        for seq in [0, 7, u64::MAX] {
            let b = message_body(seq);
            assert_eq!(b.len(), BODY_BYTES);
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(v["payload"]["seq"], seq);
        }
    }
}
