//! A discarding OTLP/HTTP collector for `--otel-sink`: a hyper server on `127.0.0.1:0`, in this
//! process, that answers every `POST /v1/traces` with 200 and counts the exports, their bytes
//! and the spans in them (decoded, then dropped).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use tokio::net::TcpListener;

/// What the sink has been sent.
#[derive(Debug, Default)]
struct Counts {
    exports: AtomicU64,
    bytes: AtomicU64,
    spans: AtomicU64,
}

/// A running sink.
#[derive(Debug, Clone)]
pub struct OtelSink {
    counts: Arc<Counts>,
    port: u16,
}

impl OtelSink {
    /// Binds `127.0.0.1:0` and serves until the process ends.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let counts = Arc::new(Counts::default());
        let accept_counts = Arc::clone(&counts);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let counts = Arc::clone(&accept_counts);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let counts = Arc::clone(&counts);
                        async move { Ok::<_, Infallible>(handle(&counts, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self { counts, port })
    }

    /// The base URL to give vow as `VOW_OTEL_ENDPOINT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Exports received, their total body bytes and the spans in them, so far.
    pub fn received(&self) -> (u64, u64, u64) {
        (
            self.counts.exports.load(Ordering::Relaxed),
            self.counts.bytes.load(Ordering::Relaxed),
            self.counts.spans.load(Ordering::Relaxed),
        )
    }
}

async fn handle(counts: &Counts, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    counts.exports.fetch_add(1, Ordering::Relaxed);
    counts.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
    let spans = ExportTraceServiceRequest::decode(body).map_or(0, |export| {
        export
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len() as u64)
            .sum()
    });
    counts.spans.fetch_add(spans, Ordering::Relaxed);
    Response::new(Full::new(Bytes::new()))
}
