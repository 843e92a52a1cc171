//! One relayed delivery posted to the local URL: the exact body and the headers vow signed, and
//! the local answer (status, the headers vow reads, the start of the body) or why there was
//! none, as the [`RelayResult`] reported back.

use std::time::{Duration, Instant};

use anyhow::bail;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::relay::wire::{Answer, RelayResult, Relayed, MAX_EXCERPT_BYTES};

/// Response headers vow's delivery policy reads.
const KEPT_HEADERS: [&str; 2] = ["retry-after", "vow-outcome"];

/// Request headers the HTTP client sets itself.
const OWN_HEADERS: [&str; 4] = ["host", "content-length", "transfer-encoding", "connection"];

/// The local URL and the client that posts to it.
#[derive(Debug, Clone)]
pub struct Target {
    url: reqwest::Url,
    http: reqwest::Client,
}

impl Target {
    /// A target for `url`, which must be an `http://` or `https://` URL.
    pub fn new(url: &str) -> anyhow::Result<Self> {
        let parsed = match reqwest::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => u,
            Ok(_) => bail!("the local URL {url:?} must be an http:// or https:// URL with a host"),
            Err(e) => bail!("the local URL {url:?} is not a URL: {e}"),
        };
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()?;
        Ok(Self { url: parsed, http })
    }

    /// Posts `relayed` and describes what came back.
    pub async fn post(&self, relayed: &Relayed) -> RelayResult {
        let started = Instant::now();
        let answer = self.exchange(relayed).await;
        RelayResult {
            id: relayed.id,
            ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            answer,
        }
    }

    async fn exchange(&self, relayed: &Relayed) -> Answer {
        let mut headers = HeaderMap::with_capacity(relayed.headers.len());
        for (name, value) in &relayed.headers {
            if OWN_HEADERS.contains(&name.as_str()) {
                continue;
            }
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.append(n, v);
            }
        }
        let body = match relayed.bytes() {
            Ok(body) => body,
            Err(e) => {
                return Answer::Failed {
                    timed_out: false,
                    reason: format!("vow sent a body this listener cannot decode: {e}"),
                }
            }
        };
        let request = self
            .http
            .post(self.url.clone())
            .headers(headers)
            .timeout(Duration::from_millis(relayed.timeout_ms))
            .body(body);
        let failed = |e: reqwest::Error| Answer::Failed {
            timed_out: e.is_timeout(),
            reason: innermost(&e),
        };
        let mut response = match request.send().await {
            Ok(r) => r,
            Err(e) => return failed(e),
        };
        let status = response.status().as_u16();
        let headers = KEPT_HEADERS
            .iter()
            .filter_map(|name| {
                let value = response.headers().get(*name)?.to_str().ok()?;
                Some((name.to_string(), value.to_string()))
            })
            .collect();
        let mut body = Vec::new();
        while body.len() < MAX_EXCERPT_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => return failed(e),
            }
        }
        body.truncate(MAX_EXCERPT_BYTES);
        Answer::Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }
}

/// The innermost cause of `e`, e.g. "Connection refused (os error 111)".
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
