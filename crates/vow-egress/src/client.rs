//! [`EgressClient`]: the HTTP client vow sends deliveries with, and its one send method,
//! [`EgressClient::post`].
//!
//! Every request goes through [`EgressClient::check_url`] (IP-literal hosts, which reqwest does
//! not resolve) and [`GuardedResolver`] (names). The client speaks HTTP/1.1 with keep-alive over
//! rustls, never follows redirects, ignores proxy environment variables and never retries on its
//! own (retrying is the delivery worker's decision). Only a prefix of each response body is kept.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use reqwest::header::{self, HeaderMap, HeaderName};
use tokio::time::Instant;
use url::{Host, Url};

use crate::body::TrackedBody;
use crate::error::{BuildError, EgressError};
use crate::policy::AddressPolicy;
use crate::resolver::GuardedResolver;

/// How an [`EgressClient`] behaves. `EgressConfig::default()` is the production setting.
#[derive(Debug, Clone)]
pub struct EgressConfig {
    /// Which destination addresses are permitted. Default: no special-purpose address.
    pub policy: AddressPolicy,
    /// Limit on establishing a TCP (and TLS) connection. Default 5 s; the request timeout still
    /// applies on top.
    pub connect_timeout: Duration,
    /// Limit on the whole exchange, from resolving the host to reading the kept body prefix,
    /// unless [`EgressClient::post`] is given its own. Default 10 s.
    pub request_timeout: Duration,
    /// `User-Agent` sent when the caller's headers have none. Default `vow/<version>`.
    pub user_agent: String,
    /// How many bytes of a response body are kept ([`EgressResponse::body_prefix`]). Default 4096.
    pub max_response_bytes: usize,
    /// How many further body bytes are read and discarded so the connection can go back to the
    /// pool; a longer body closes the connection instead. Default 64 KiB.
    pub max_drain_bytes: usize,
    /// Idle keep-alive connections kept per host. Default 16.
    pub pool_max_idle_per_host: usize,
    /// How long an idle connection is kept. Default 30 s.
    pub pool_idle_timeout: Duration,
}

impl Default for EgressConfig {
    fn default() -> Self {
        Self {
            policy: AddressPolicy::default(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            user_agent: concat!("vow/", env!("CARGO_PKG_VERSION")).to_owned(),
            max_response_bytes: 4096,
            max_drain_bytes: 64 * 1024,
            pool_max_idle_per_host: 16,
            pool_idle_timeout: Duration::from_secs(30),
        }
    }
}

/// What came back from a destination. A `3xx` is a response like any other (redirects are not
/// followed).
#[derive(Clone)]
pub struct EgressResponse {
    /// The status code.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// At most `max_response_bytes` bytes from the start of the body.
    pub body_prefix: Bytes,
    /// Whether the body was longer than `body_prefix`.
    pub body_truncated: bool,
    /// From the start of [`EgressClient::post`] until the body prefix was read.
    pub latency: Duration,
}

impl EgressResponse {
    /// The value of header `name` when present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `Retry-After` header as sent (seconds or an HTTP date).
    pub fn retry_after(&self) -> Option<&str> {
        self.header(header::RETRY_AFTER.as_str())
    }

    /// The `Vow-Outcome` header, with which an endpoint tells vow how to treat the delivery.
    pub fn vow_outcome(&self) -> Option<&str> {
        self.header("vow-outcome")
    }
}

impl fmt::Debug for EgressResponse {
    /// Header names and the body length only: values and bodies may carry secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressResponse")
            .field("status", &self.status)
            .field("header_names", &self.headers.keys().collect::<Vec<_>>())
            .field("body_prefix_len", &self.body_prefix.len())
            .field("body_truncated", &self.body_truncated)
            .field("latency", &self.latency)
            .finish()
    }
}

/// Request headers the client owns: connection management and framing are hyper's, and the
/// `Host` comes from the URL. Dropped from the caller's headers so a forwarded request cannot
/// smuggle a second body or address another virtual host.
const OWNED_HEADERS: [HeaderName; 9] = [
    header::HOST,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
];

/// The outbound HTTP client. Cheap to clone (connection pool and policy are shared).
#[derive(Clone)]
pub struct EgressClient {
    http: reqwest::Client,
    policy: Arc<AddressPolicy>,
    request_timeout: Duration,
    max_response_bytes: usize,
    max_drain_bytes: usize,
}

impl fmt::Debug for EgressClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressClient")
            .field("policy", &self.policy)
            .field("request_timeout", &self.request_timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish_non_exhaustive()
    }
}

impl EgressClient {
    /// Builds the client (and its connection pool) from `config`.
    pub fn new(config: EgressConfig) -> Result<Self, BuildError> {
        let policy = Arc::new(config.policy);
        let http = reqwest::Client::builder()
            .use_rustls_tls()
            .http1_only()
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .no_proxy()
            .referer(false)
            .dns_resolver(Arc::new(GuardedResolver::new(policy.clone())))
            .connect_timeout(config.connect_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            .pool_idle_timeout(config.pool_idle_timeout)
            .tcp_nodelay(true)
            .tcp_keepalive(Duration::from_secs(60))
            .user_agent(config.user_agent)
            .build()
            .map_err(|err| BuildError(Box::new(err.without_url())))?;
        Ok(Self {
            http,
            policy,
            request_timeout: config.request_timeout,
            max_response_bytes: config.max_response_bytes,
            max_drain_bytes: config.max_drain_bytes,
        })
    }

    /// The address policy every destination is checked against.
    pub fn policy(&self) -> &AddressPolicy {
        &self.policy
    }

    /// Checks what can be checked without DNS: the scheme is `http` or `https`, there is a host,
    /// and an IP-literal host is permitted by the policy. Host names are checked when they are
    /// resolved. [`EgressClient::post`] always calls this; it is public so that an API can
    /// reject an endpoint URL when it is created.
    pub fn check_url(&self, url: &Url) -> Result<(), EgressError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(EgressError::InvalidUrl {
                reason: format!("scheme `{}` is not http or https", url.scheme()),
            });
        }
        let ip = match url.host() {
            None => {
                return Err(EgressError::InvalidUrl {
                    reason: "the URL has no host".to_owned(),
                })
            }
            Some(Host::Ipv4(v4)) => v4.into(),
            Some(Host::Ipv6(v6)) => v6.into(),
            // `url` normalises IPv4 literals of http(s) URLs (`0x7f.1`, `127.1`, `127.0.0.1.`)
            // to `Host::Ipv4`; this is a second line in case a form slips through as a name.
            Some(Host::Domain(name)) => match name.trim_end_matches('.').parse() {
                Ok(ip) => ip,
                Err(_) => return Ok(()),
            },
        };
        self.policy.check(ip).map_err(|refusal| {
            tracing::info!(host = url.host_str(), %refusal, "egress: destination refused");
            EgressError::Refused(refusal)
        })
    }

    /// POSTs `body` with `headers` to `url` and returns the status, headers and body prefix.
    ///
    /// `timeout` (default: the configured request timeout) bounds the whole exchange: name
    /// resolution, connecting, sending and reading the kept body prefix. Headers that belong to
    /// the connection (`Host`, `Content-Length`, `Transfer-Encoding`, `Connection`, ...) are
    /// dropped from `headers`; `Content-Length` is always the length of `body`. After the prefix,
    /// up to `max_drain_bytes` more are read (within what is left of the timeout) and discarded
    /// so the connection can be reused.
    pub async fn post(
        &self,
        url: &Url,
        mut headers: HeaderMap,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<EgressResponse, EgressError> {
        self.check_url(url)?;
        let started = Instant::now();
        let deadline = started + timeout.unwrap_or(self.request_timeout);
        for name in &OWNED_HEADERS {
            headers.remove(name);
        }
        let (body, sent) = TrackedBody::new(body);
        let request = self
            .http
            .post(url.clone())
            .headers(headers)
            .body(reqwest::Body::wrap(body));

        let result = tokio::time::timeout_at(deadline, async {
            let mut response = request
                .send()
                .await
                .map_err(|err| EgressError::from_reqwest(err, sent.get()))?;
            let (body_prefix, more) = read_prefix(&mut response, self.max_response_bytes).await?;
            Ok::<_, EgressError>((response, body_prefix, more))
        })
        .await;
        let (mut response, body_prefix, more) = match result {
            Ok(Ok(done)) => done,
            Ok(Err(err)) => return Err(self.log_failure(url, err)),
            Err(_elapsed) => {
                return Err(self.log_failure(url, EgressError::Timeout { sent: sent.get() }))
            }
        };
        let latency = started.elapsed();
        let body_truncated = match more {
            None => false,
            Some(discarded) => {
                let drained =
                    tokio::time::timeout_at(deadline, drain(&mut response, self.max_drain_bytes))
                        .await;
                discarded || !matches!(drained, Ok(Some(0)))
            }
        };
        let status = response.status().as_u16();
        tracing::debug!(
            host = url.host_str(),
            status,
            latency_ms = latency.as_millis() as u64,
            body_truncated,
            "egress: response"
        );
        Ok(EgressResponse {
            status,
            headers: std::mem::take(response.headers_mut()),
            body_prefix,
            body_truncated,
            latency,
        })
    }

    fn log_failure(&self, url: &Url, err: EgressError) -> EgressError {
        // `err`'s Display holds no URL, header value or body.
        tracing::debug!(host = url.host_str(), error = %err, "egress: request failed");
        err
    }
}

/// Reads up to `max` bytes of the body. Returns them and whether the body is known to have
/// ended within them (`None`), or not (`Some(discarded)`: whether bytes past `max` were already
/// read and thrown away).
async fn read_prefix(
    response: &mut reqwest::Response,
    max: usize,
) -> Result<(Bytes, Option<bool>), EgressError> {
    let capacity = response
        .content_length()
        .map_or(max, |len| len.min(max as u64) as usize);
    let mut prefix = BytesMut::with_capacity(capacity);
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|err| EgressError::from_reqwest(err, true))?;
        let Some(chunk) = chunk else {
            return Ok((prefix.freeze(), None));
        };
        let room = max - prefix.len();
        if chunk.len() > room {
            prefix.extend_from_slice(&chunk[..room]);
            return Ok((prefix.freeze(), Some(true)));
        }
        prefix.extend_from_slice(&chunk);
        if prefix.len() == max {
            return Ok((prefix.freeze(), Some(false)));
        }
    }
}

/// Reads and discards the rest of the body, giving up after `max` bytes. Returns how many bytes
/// were past the prefix (`None` when the body was longer than `max` or failed).
async fn drain(response: &mut reqwest::Response, max: usize) -> Option<usize> {
    let mut drained = 0usize;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                drained += chunk.len();
                if drained > max {
                    return None;
                }
            }
            Ok(None) => return Some(drained),
            Err(_) => return None,
        }
    }
}
