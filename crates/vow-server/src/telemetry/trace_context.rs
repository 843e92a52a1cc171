//! W3C trace context (`traceparent`, `tracestate`) in and out of vow.
//!
//! - In: an API request's `traceparent` makes its `http.request` span a child of the caller's
//!   span ([`continue_from`]), so the application's trace continues into vow.
//! - Kept: a message is stored with the `traceparent` of its `store.create_message` span
//!   ([`for_message`]); a delivery attempt, later and maybe in another process, becomes a child
//!   of it ([`follow`]): the message's trace holds its attempts.
//! - Out: every attempt sends its own span's context ([`outbound`]), so the endpoint can join the
//!   trace.
//!
//! Without an exporter the spans have no OpenTelemetry context. A message created with a valid
//! `traceparent` header then stores that header as it came, and each attempt sends it on with a
//! fresh span id (the attempt's, though no span of that id is exported): the endpoint still
//! joins the creator's trace, at no cost for requests without the header.

use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::{HeaderMap, HeaderValue};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceState};
use opentelemetry::Context;
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether a trace exporter is installed in this process ([`exporting`]).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Notes that spans are exported from now on (the telemetry's `init`, once its subscriber with
/// an exporter is installed).
pub(super) fn exporting() {
    EXPORTING.store(true, Ordering::Relaxed);
}

/// The span `make` makes while traces are exported; [`Span::none`] otherwise, at no cost.
pub fn traced(make: impl FnOnce() -> Span) -> Span {
    if EXPORTING.load(Ordering::Relaxed) {
        make()
    } else {
        Span::none()
    }
}

/// The header that names the trace and the parent span.
pub const TRACEPARENT: &str = "traceparent";

/// The remote span context a `traceparent` (version 00 or later, valid ids) names; `None` when
/// it is malformed.
pub fn parse(traceparent: &str) -> Option<SpanContext> {
    let mut headers = HeaderMap::new();
    headers.insert(TRACEPARENT, HeaderValue::from_str(traceparent).ok()?);
    incoming(&headers)
}

/// The span context in `headers`' `traceparent` (and `tracestate`), if valid.
fn incoming(headers: &HeaderMap) -> Option<SpanContext> {
    let traceparent = headers.get(TRACEPARENT)?.to_str().ok()?;
    // The propagator takes ids shorter than the W3C widths; only these widths are a trace.
    let widths: Vec<usize> = traceparent.split('-').map(str::len).take(4).collect();
    if widths != [2, 32, 16, 2] {
        return None;
    }
    let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    let remote = cx.span().span_context().clone();
    remote.is_valid().then_some(remote)
}

/// `context` as a `traceparent` value.
pub fn format(context: &SpanContext) -> String {
    format!(
        "00-{:032x}-{:016x}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags().to_u8()
    )
}

/// `span`'s OpenTelemetry context; `None` without an exporter.
fn exported(span: &Span) -> Option<SpanContext> {
    let context = span.context().span().span_context().clone();
    context.is_valid().then_some(context)
}

/// Makes `span` (a request's, not yet entered) a child of the caller's span its `headers` name.
pub fn continue_from(span: &Span, headers: &HeaderMap) {
    if let Some(remote) = incoming(headers) {
        // Without an exporter there is no parent to set; nothing is lost.
        drop(span.set_parent(Context::new().with_remote_span_context(remote)));
    }
}

/// The `traceparent` to store with a message created within `span` by a request with
/// `headers`: `span`'s own, else (no exporter) the request's valid `traceparent` as sent.
pub fn for_message(span: &Span, headers: &HeaderMap) -> Option<String> {
    exported(span)
        .or_else(|| incoming(headers))
        .map(|c| format(&c))
}

/// Makes `span` (an attempt's, not yet entered) a child of the span its message was stored
/// with.
pub fn follow(span: &Span, stored: Option<&str>) {
    if let Some(parent) = stored.and_then(parse) {
        drop(span.set_parent(Context::new().with_remote_span_context(parent)));
    }
}

/// Adds the trace context an attempt within `span` sends: `span`'s own; without an exporter,
/// the message's `stored` one with a fresh span id; nothing when there is neither.
pub fn outbound(span: &Span, stored: Option<&str>, headers: &mut HeaderMap) {
    let context = match exported(span) {
        Some(context) => context,
        None => match stored.and_then(parse) {
            Some(parent) => SpanContext::new(
                parent.trace_id(),
                fresh_span_id(),
                parent.trace_flags(),
                false,
                TraceState::default(),
            ),
            None => return,
        },
    };
    let cx = Context::new().with_remote_span_context(context);
    TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(headers));
}

/// A random span id (never the invalid all-zero one).
fn fresh_span_id() -> SpanId {
    loop {
        let id = SpanId::from_bytes(rand::random());
        if id != SpanId::INVALID {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips_and_malformed_ones_are_refused() {
        let context = parse(VALID).expect("valid");
        assert_eq!(format(&context), VALID);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn without_an_exporter_the_creators_trace_goes_on_with_a_new_span_id() {
        let mut request = HeaderMap::new();
        request.insert(TRACEPARENT, HeaderValue::from_static(VALID));
        let stored = for_message(&Span::none(), &request);
        assert_eq!(stored.as_deref(), Some(VALID));

        let mut sent = HeaderMap::new();
        outbound(&Span::none(), stored.as_deref(), &mut sent);
        let sent = sent[TRACEPARENT].to_str().unwrap();
        let (ours, theirs) = (parse(sent).unwrap(), parse(VALID).unwrap());
        assert_eq!(ours.trace_id(), theirs.trace_id());
        assert_ne!(ours.span_id(), theirs.span_id());
        assert_eq!(ours.trace_flags(), theirs.trace_flags());
    }

    #[test]
    fn nothing_is_stored_or_sent_without_an_exporter_or_a_header() {
        assert_eq!(for_message(&Span::none(), &HeaderMap::new()), None);
        let mut sent = HeaderMap::new();
        outbound(&Span::none(), None, &mut sent);
        assert!(sent.is_empty());
    }
}
