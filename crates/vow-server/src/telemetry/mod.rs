//! Logging, and traces when configured: `tracing` to stderr, as text or JSON, filtered by the
//! `log` setting; with `otel_endpoint` set, vow's own spans also go to an OpenTelemetry collector
//! over OTLP/HTTP ([`otlp`]).
//!
//! The spans are ordinary `tracing` spans. `http.request` is logging's too (its request id is
//! in every log line of the request). `store.create_message`, `delivery.attempt` and
//! `inbound.forward` serve traces only, so they are made only while an exporter is installed
//! ([`trace_context::traced`]): without one, a span per attempt is bookkeeping in the log layer for nothing.
//! [`trace_context`] carries W3C trace context in and out: a request's `traceparent`, the one
//! stored with each message, the one each attempt sends.
//!
//! # Layout
//! - [`otlp`]: the exporter and its batch processor.
//! - [`trace_context`]: `traceparent` parsed, stored, continued and sent.

pub mod otlp;
pub mod trace_context;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{Config, LogFormat};

/// What [`init`] set up that needs an orderly end: the trace exporter, if any.
#[must_use = "call `shutdown` at exit so the last spans are exported"]
pub struct Telemetry {
    exporter: Option<otlp::Exporter>,
}

impl Telemetry {
    /// Flushes the spans not yet exported and stops the exporter. Call outside async code,
    /// while the runtime the exporter was started on still runs.
    pub fn shutdown(self) {
        if let Some(exporter) = self.exporter {
            exporter.shutdown();
        }
    }
}

/// Installs the global subscriber: logs as `log`/`log_format` say, and spans to the OTLP
/// collector at `otel_endpoint` when one is set (call within a tokio runtime then: the exporter
/// runs on it). Call once, at start.
pub fn init(config: &Config) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_new(&config.log).unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let logs = match config.log_format {
        LogFormat::Text => logs.boxed(),
        LogFormat::Json => logs.json().boxed(),
    };
    let exporter = match config.otel_endpoint.as_str() {
        "" => None,
        endpoint => Some(otlp::Exporter::start(endpoint, &config.otel_service_name)?),
    };
    // Only vow's own spans are exported, at info whatever the log filter says.
    let traces = exporter.as_ref().map(|e| {
        e.layer()
            .with_filter(Targets::new().with_target("vow_server", tracing::Level::INFO))
    });
    let result = tracing_subscriber::registry()
        .with(logs.with_filter(filter))
        .with(traces)
        .try_init();
    // A subscriber may already be set (tests); keeping it is right.
    if result.is_ok() && exporter.is_some() {
        trace_context::exporting();
    }
    Ok(Telemetry { exporter })
}
