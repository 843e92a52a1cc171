//! What a keyed request is: its numbers exactly as sent (past 64 bits, long decimals, exponents
//! beyond `f64`), in its fingerprint and on the way to the endpoint, and the query parameters
//! its route reads. Bodies are sent as raw text, never through `serde_json::Value`.

use chrono::Utc;
use reqwest::{Method, Response};
use serde_json::{json, Value};
use vow_core::AppId;
use vow_store::{MessageFilter, Order, Seek};

use crate::delivery::setup;
use crate::helpers::{delivery_config, TestApp};
use crate::receiver::Receiver;

/// POSTs the raw `body` as a message of `app_id`, with `Idempotency-Key: key`, to
/// `.../msg{query}`.
async fn send(app: &TestApp, app_id: &str, key: &str, query: &str, body: &str) -> Response {
    app.request(Method::POST, &format!("/api/v1/app/{app_id}/msg{query}"))
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

async fn status_and_json(r: Response) -> (u16, Value) {
    (r.status().as_u16(), r.json().await.unwrap())
}

/// How many messages the application has stored.
async fn stored(app: &TestApp, app_id: &str) -> usize {
    let seek = Seek::for_iterator(None, Order::Descending, 1000);
    let id = AppId::parse(app_id).unwrap();
    let filter = MessageFilter::default();
    let rows = app.store.list_messages(id, &filter, &seek).await;
    rows.unwrap().len()
}

/// `payload` as a message's whole body.
fn message(payload: &str) -> String {
    format!(r#"{{"eventType":"invoice.paid","payload":{payload}}}"#)
}

/// Two amounts that `f64` cannot tell apart are two requests under one key: the second is a 422
/// naming the field, and one message is stored. A payload of numbers past 64 bits and `f64`
/// reaches the endpoint byte for byte as sent, and reads back so.
async fn numbers_are_exact_in_the_fingerprint_and_on_the_way_to_the_endpoint(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let first = message(r#"{"amount":18446744073709551616}"#);
    let (status, _) = status_and_json(send(&app, &s.app_id, "big-1", "", &first).await).await;
    assert_eq!(status, 202);
    for other in [
        r#"{"amount":18446744073709551617}"#,
        r#"{"amount":18446744073709551616.000000001}"#,
    ] {
        let r = send(&app, &s.app_id, "big-1", "", &message(other)).await;
        let (status, problem) = status_and_json(r).await;
        assert_eq!(status, 422, "{other}: {problem}");
        assert_eq!(problem["type"], "urn:vow:problem:idempotency-key-reused");
        assert_eq!(problem["differences"], json!(["/payload/amount"]));
    }
    // Another spelling of the same number is the same request.
    let respelled = message(r#"{"amount":1.8446744073709551616e19}"#);
    let replay = send(&app, &s.app_id, "big-1", "", &respelled).await;
    assert_eq!(replay.status(), 202);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(stored(&app, &s.app_id).await, 1);

    let payload = r#"{"a": 18446744073709551617, "b":123456789.123456789123,"c":1e400, "d":-0.0}"#;
    let created = send(&app, &s.app_id, "big-2", "", &message(payload)).await;
    assert_eq!(created.status(), 202);
    // `1e400` is out of `f64`'s range: read the answer as text (the id is all it needs).
    let created = created.text().await.unwrap();
    assert!(
        created.contains(&format!(r#""payload":{payload}"#)),
        "{created}"
    );
    #[derive(serde::Deserialize)]
    struct Created {
        id: String,
    }
    let msg = serde_json::from_str::<Created>(&created).unwrap().id;
    app.drain_at(&delivery_config("1s", &[]), Utc::now()).await;
    let got = receiver.received();
    let delivered: Vec<&[u8]> = got.iter().map(|r| &r.body[..]).collect();
    assert!(delivered.contains(&payload.as_bytes()), "{delivered:?}");
    assert_eq!(got.len(), 2, "one delivery per message");
    let read = app
        .get_text(&format!("/api/v1/app/{}/msg/{msg}", s.app_id))
        .await;
    assert!(read.contains(&format!(r#""payload":{payload}"#)), "{read}");
}

/// A query parameter the route reads is part of the request: `?with_content=false` and then no
/// query under one key is a 422 naming the parameter, not a replay of the content-less answer;
/// the same query again replays; one the route does not declare is refused. One message is
/// stored.
async fn a_query_the_route_reads_is_part_of_the_request(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    let body = message(r#"{"amount":10}"#);
    let quiet = "?with_content=false";
    let (status, first) = status_and_json(send(&app, &app_id, "q-1", quiet, &body).await).await;
    assert_eq!(status, 202);
    assert_eq!(first["payload"], json!({}));
    let (status, problem) = status_and_json(send(&app, &app_id, "q-1", "", &body).await).await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["type"], "urn:vow:problem:idempotency-key-reused");
    assert_eq!(problem["differences"], json!(["?with_content"]));
    assert!(
        problem["detail"].as_str().unwrap().contains("with_content"),
        "{problem}"
    );
    // A parameter the route does not declare is refused when it has a value (never dropped
    // silently), and, empty, is not part of the request.
    let (status, refused) =
        status_and_json(send(&app, &app_id, "q-1", "?with_content=false&utm=x", &body).await).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["detail"][0]["loc"], json!(["query", "utm"]));
    let again = send(&app, &app_id, "q-1", "?with_content=false&utm=", &body).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let (status, replayed) = status_and_json(again).await;
    assert_eq!((status, replayed), (202, first));
    assert_eq!(stored(&app, &app_id).await, 1);
}

/// A key with a control byte (DEL, 0x01) never reaches vow: hyper's HTTP/1 parser (httparse)
/// refuses the header line and answers a bare 400 itself, before any handler runs, so vow
/// cannot answer its `idempotency-key-invalid` problem (see docs/problems.md). What holds: the
/// request never runs, with or without its key.
async fn a_key_with_a_control_byte_is_refused_before_anything_runs(app: TestApp) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app_id = app.create_app("Shop").await;
    let body = message(r#"{"amount":10}"#);
    let addr = app.base.trim_start_matches("http://");
    for byte in [0x7f_u8, 0x01] {
        let mut head = format!(
            "POST /api/v1/app/{app_id}/msg HTTP/1.1\r\nhost: {addr}\r\n\
             authorization: Bearer {}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\nidempotency-key: a",
            crate::helpers::TOKEN,
            body.len()
        )
        .into_bytes();
        head.push(byte);
        head.extend_from_slice(b"b\r\n\r\n");
        head.extend_from_slice(body.as_bytes());
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(&head).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
        assert!(
            answer.to_ascii_lowercase().contains("content-length: 0"),
            "{answer}"
        );
    }
    assert_eq!(stored(&app, &app_id).await, 0);
}

on_both_stores!(
    numbers_are_exact_in_the_fingerprint_and_on_the_way_to_the_endpoint,
    a_query_the_route_reads_is_part_of_the_request,
    a_key_with_a_control_byte_is_refused_before_anything_runs,
);
