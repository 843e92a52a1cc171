//! OpenTelemetry traces end to end: a `vow serve` child (SQLite and PostgreSQL) with
//! `VOW_OTEL_ENDPOINT` pointing at an in-test OTLP/HTTP receiver (protobuf, decoded with
//! `opentelemetry-proto`), delivering to a real receiver. The trace a message is created in
//! holds its delivery attempt, and the endpoint gets that attempt's `traceparent`.
//!
//! A child process, not an in-process `TestApp`: the tracing subscriber (and so the exporter's
//! layer) is process-wide, and the test process runs many servers at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;

use crate::child::{database, Vow};
use crate::cli_listen::{call, create_app, send_raw};
use crate::helpers::eventually;
use crate::receiver::Receiver;

on_both_child_stores!(
    a_messages_trace_holds_its_attempt_and_the_endpoint_gets_its_traceparent,
    a_callers_traceparent_is_continued_into_the_message_and_its_attempt,
);

const POLL: Duration = Duration::from_millis(100);
const WAIT: Duration = Duration::from_secs(20);

/// An OTLP/HTTP collector on 127.0.0.1 that keeps every span it is sent.
struct Collector {
    base: String,
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Collector {
    async fn start() -> Collector {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/traces", post(export))
            .with_state(spans.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Collector { base, spans }
    }

    /// The span named `name` in trace `trace_id`, once exported.
    async fn span(&self, name: &str, trace_id: &[u8]) -> Span {
        eventually(
            &format!("a {name} span in trace {}", hex::encode(trace_id)),
            POLL,
            WAIT,
            || async {
                let spans = self.spans.lock().unwrap();
                spans
                    .iter()
                    .find(|s| s.name == name && s.trace_id == trace_id)
                    .cloned()
            },
        )
        .await
    }
}

/// `POST /v1/traces`: an `ExportTraceServiceRequest` in protobuf; answers an empty (all
/// accepted) `ExportTraceServiceResponse`.
async fn export(
    State(spans): State<Arc<Mutex<Vec<Span>>>>,
    body: Bytes,
) -> ([(&'static str, &'static str); 1], Vec<u8>) {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    let mut kept = spans.lock().unwrap();
    for resource in request.resource_spans {
        for scope in resource.scope_spans {
            kept.extend(scope.spans);
        }
    }
    ([("content-type", "application/x-protobuf")], Vec::new())
}

/// The string value of `span`'s attribute `key`, or its integer value as text.
fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span
        .attributes
        .iter()
        .find(|a| a.key == key)?
        .value
        .as_ref()?;
    match value.value.as_ref()? {
        AnyValue::StringValue(s) => Some(s.clone()),
        AnyValue::IntValue(i) => Some(i.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// The trace id and parent span id of a `traceparent`, as bytes.
fn traceparent_ids(traceparent: &str) -> (Vec<u8>, Vec<u8>) {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "a traceparent: {traceparent:?}");
    assert_eq!(parts[0], "00", "{traceparent:?}");
    (
        hex::decode(parts[1]).unwrap(),
        hex::decode(parts[2]).unwrap(),
    )
}

/// A vow exporting to `collector` every 100 ms, its app and an endpoint at `receiver`.
async fn traced_vow(postgres: bool, collector: &Collector, receiver: &Receiver) -> TracedVow {
    let (url, dir) = database(postgres).await;
    let vow = Vow::start(
        &url,
        &[
            ("VOW_OTEL_ENDPOINT", collector.base.as_str()),
            ("VOW_OTEL_SERVICE_NAME", "vow-under-test"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    )
    .await;
    let app = create_app(&vow.base).await;
    let (status, ep) = call(
        &vow.base,
        reqwest::Method::POST,
        &format!("/api/v1/app/{app}/endpoint"),
        Some(json!({"url": receiver.url})),
    )
    .await;
    assert_eq!(status, 201, "{ep}");
    TracedVow {
        vow,
        app,
        _dir: dir,
    }
}

struct TracedVow {
    vow: Vow,
    app: String,
    _dir: Option<tempfile::TempDir>,
}

/// Checks the exported trace of the message whose only attempt reached `receiver`: the
/// `store.create_message` span is in the trace the endpoint was sent, the `delivery.attempt`
/// span is its child, and the `traceparent` the endpoint got names that attempt span. Returns
/// the trace id and the `http.request` span.
async fn check_trace(collector: &Collector, receiver: &Receiver, msg_id: &str) -> (Vec<u8>, Span) {
    let got = receiver.wait_for(1).await;
    assert_eq!(got.len(), 1, "one attempt");
    let (trace_id, parent) = traceparent_ids(got[0].header("traceparent"));

    let create = collector.span("store.create_message", &trace_id).await;
    assert_eq!(attribute(&create, "msg_id").as_deref(), Some(msg_id));
    let attempt = collector.span("delivery.attempt", &trace_id).await;
    assert_eq!(
        attempt.parent_span_id, create.span_id,
        "the attempt is a child of the message's write"
    );
    assert_eq!(
        parent, attempt.span_id,
        "the endpoint's traceparent names the attempt span"
    );
    assert_eq!(attribute(&attempt, "msg_id").as_deref(), Some(msg_id));
    assert_eq!(attribute(&attempt, "outcome").as_deref(), Some("delivered"));
    assert_eq!(attribute(&attempt, "status_code").as_deref(), Some("200"));

    let request = collector.span("http.request", &trace_id).await;
    assert_eq!(
        create.parent_span_id, request.span_id,
        "the write is within the API request"
    );
    assert_eq!(
        attribute(&request, "route").as_deref(),
        Some("/api/v1/app/{app_id}/msg")
    );
    assert_eq!(attribute(&request, "method").as_deref(), Some("POST"));
    assert_eq!(attribute(&request, "status").as_deref(), Some("202"));
    (trace_id, request)
}

async fn a_messages_trace_holds_its_attempt_and_the_endpoint_gets_its_traceparent(postgres: bool) {
    let collector = Collector::start().await;
    let receiver = Receiver::start(&[]).await;
    let traced = traced_vow(postgres, &collector, &receiver).await;
    let msg = send_raw(&traced.vow.base, &traced.app, "order.created", r#"{"n":1}"#).await;

    let (_, request) = check_trace(&collector, &receiver, &msg).await;
    assert!(
        request.parent_span_id.is_empty(),
        "a request without traceparent starts the trace"
    );
}

async fn a_callers_traceparent_is_continued_into_the_message_and_its_attempt(postgres: bool) {
    let collector = Collector::start().await;
    let receiver = Receiver::start(&[]).await;
    let traced = traced_vow(postgres, &collector, &receiver).await;
    let (trace, caller) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1/app/{}/msg", traced.vow.base, traced.app))
        .bearer_auth(crate::helpers::TOKEN)
        .header("traceparent", format!("00-{trace}-{caller}-01"))
        .json(&json!({"eventType": "order.created", "payload": {"n": 2}}))
        .send()
        .await
        .unwrap();
    let (status, msg) = crate::helpers::into_parts(resp).await;
    assert_eq!(status, 202, "{msg}");

    let (trace_id, request) = check_trace(&collector, &receiver, msg["id"].as_str().unwrap()).await;
    assert_eq!(trace_id, hex::decode(trace).unwrap(), "the caller's trace");
    assert_eq!(request.parent_span_id, hex::decode(caller).unwrap());
}

/// Without an exporter (an in-process server; no `otel_endpoint`), a creator's `traceparent` is
/// still passed on: the endpoint gets the creator's trace and flags with a span id of vow's;
/// a message created without one is delivered without one.
mod untraced {
    use crate::delivery::{send, setup};
    use crate::helpers::{delivery_config, Backend, TestApp};
    use crate::receiver::Receiver;

    const CREATOR: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_a_creators_traceparent_reaches_the_endpoint() {
        a_creators_traceparent_reaches_the_endpoint(Backend::Sqlite).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_a_creators_traceparent_reaches_the_endpoint() {
        a_creators_traceparent_reaches_the_endpoint(Backend::Postgres).await
    }

    async fn a_creators_traceparent_reaches_the_endpoint(backend: Backend) {
        let app = TestApp::spawn_with(backend, delivery_config("none", &[])).await;
        let receiver = Receiver::start(&[]).await;
        let s = setup(&app, &receiver.url, serde_json::json!({})).await;
        let resp = app
            .request(
                reqwest::Method::POST,
                &format!("/api/v1/app/{}/msg", s.app_id),
            )
            .header("traceparent", CREATOR)
            .json(&serde_json::json!({"eventType": "order.created", "payload": {"n": 1}}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 202);
        let got = receiver.wait_for(1).await;
        let (trace, span) = super::traceparent_ids(got[0].header("traceparent"));
        let (creator_trace, creator_span) = super::traceparent_ids(CREATOR);
        assert_eq!(trace, creator_trace, "the creator's trace");
        assert_ne!(span, creator_span, "a span id of vow's");
        assert!(got[0].header("traceparent").ends_with("-01"), "the flags");

        send(
            &app,
            &s.app_id,
            r#"{"eventType":"order.created","payload":{"n":2}}"#,
        )
        .await;
        let got = receiver.wait_for(2).await;
        assert_eq!(got[1].header("traceparent"), "", "none without a creator's");
        assert_eq!(receiver.received().len(), 2);
    }
}
