//! The OTLP trace exporter: spans in protobuf over HTTP to `<otel_endpoint>/v1/traces`, in
//! batches that a task on the tokio runtime sends (a full queue drops spans rather than slow
//! the server down). It sends with the workspace's `reqwest` through [`ReqwestClient`].

use std::time::Duration;

use anyhow::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::runtime::Tokio;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use opentelemetry_sdk::Resource;
use tracing_subscriber::registry::LookupSpan;

/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// A running exporter: the tracer provider whose batch processor sends the spans.
pub struct Exporter {
    provider: SdkTracerProvider,
    tracer: Tracer,
}

impl Exporter {
    /// Starts exporting to the collector at `endpoint` (a base URL), as `service_name`. Call
    /// within a tokio runtime: the batch processor is a task on it.
    pub fn start(endpoint: &str, service_name: &str) -> anyhow::Result<Exporter> {
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .context("building the OTLP HTTP client")?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(ReqwestClient(client))
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{endpoint}/v1/traces"))
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .context("building the OTLP span exporter (setting `otel_endpoint`)")?;
        let processor = BatchSpanProcessor::builder(exporter, Tokio).build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(
                Resource::builder()
                    .with_service_name(service_name.to_owned())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("vow");
        Ok(Exporter { provider, tracer })
    }

    /// The `tracing` layer that turns spans into OpenTelemetry spans of this exporter.
    pub fn layer<S>(&self) -> tracing_opentelemetry::OpenTelemetryLayer<S, Tracer>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.tracer.clone())
    }

    /// Exports what is still queued and stops. Blocks: call outside async code, while the
    /// runtime still runs.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("warning: exporting the last spans failed: {e}");
        }
    }
}

/// `reqwest` as the exporter's HTTP client.
#[derive(Debug)]
struct ReqwestClient(reqwest::Client);

#[async_trait::async_trait]
impl HttpClient for ReqwestClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let sent = self
            .0
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await?;
        let mut response = Response::builder().status(sent.status());
        if let Some(headers) = response.headers_mut() {
            *headers = sent.headers().clone();
        }
        Ok(response.body(sent.bytes().await?)?)
    }
}
