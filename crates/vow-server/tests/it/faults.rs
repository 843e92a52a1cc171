//! Receivers that misbehave below HTTP status codes: too slow for the endpoint's timeout, a
//! connection dropped without an answer, nothing listening, and `429` with `Retry-After`. Each
//! case checks the recorded attempts (status, error text), the stored schedule, and how many
//! requests the fake receiver read.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use vow_store::DeliveryStatus;

use crate::delivery::{attempts, delivery_status, send, setup, Setup};
use crate::helpers::{delivery_config, TestApp};

/// What the fake receiver does once it has read a request.
#[derive(Clone)]
enum Fault {
    /// Answers 200, but only after this long.
    Slow(StdDuration),
    /// Closes the connection without answering.
    Drop,
    /// Writes this raw HTTP response.
    Answer(String),
}

/// A raw TCP receiver on 127.0.0.1 that reads each request whole, counts it, and then does its
/// [`Fault`].
struct FaultyReceiver {
    url: String,
    requests: Arc<AtomicUsize>,
}

impl FaultyReceiver {
    async fn start(fault: Fault) -> FaultyReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = requests.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, fault.clone(), counter.clone()));
            }
        });
        FaultyReceiver { url, requests }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn serve(mut stream: TcpStream, fault: Fault, requests: Arc<AtomicUsize>) {
    if !read_request(&mut stream).await {
        return;
    }
    requests.fetch_add(1, Ordering::SeqCst);
    let answer = match fault {
        Fault::Drop => return,
        Fault::Slow(wait) => {
            // Slow on purpose: the fault under test.
            tokio::time::sleep(wait).await;
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string()
        }
        Fault::Answer(raw) => raw,
    };
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads the head and a `content-length` body; false when the peer went away first.
async fn read_request(stream: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return true;
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// An application with one endpoint to `url` (with `extra` fields) and one message to it.
async fn one_message(app: &TestApp, url: &str, extra: serde_json::Value) -> (Setup, String) {
    let s = setup(app, url, extra).await;
    let msg = send(app, &s.app_id, r#"{"eventType":"a.b","payload":{"n":1}}"#).await;
    (s, msg)
}

/// The stored `next_attempt_at` of the message's only delivery.
async fn next_attempt_at(app: &TestApp, s: &Setup, msg: &str) -> DateTime<Utc> {
    let (app_id, msg) = (s.app_id.parse().unwrap(), msg.parse().unwrap());
    app.store.list_deliveries(app_id, msg).await.unwrap()[0].next_attempt_at
}

async fn a_receiver_slower_than_the_endpoint_timeout_fails_with_a_timeout_and_is_retried(
    app: TestApp,
) {
    let receiver = FaultyReceiver::start(Fault::Slow(StdDuration::from_secs(2))).await;
    let (s, msg) = one_message(&app, &receiver.url, json!({"timeoutMs": 200})).await;
    let config = delivery_config("1m,1m", &[]);
    let t0 = Utc::now();
    assert_eq!(app.drain_at(&config, t0).await, 1);
    assert_eq!(app.drain_at(&config, t0 + Duration::minutes(2)).await, 1);

    assert_eq!(receiver.requests(), 2, "both attempts reached the receiver");
    let tried = attempts(&app, &s.app_id, &msg).await;
    assert_eq!(tried.len(), 2);
    for a in &tried {
        assert!(!a.success && a.response_status.is_none(), "{a:?}");
        let error = a.error.as_deref().unwrap();
        assert!(
            error.contains("timed out waiting for the response"),
            "{error}"
        );
        assert!(
            a.duration_ms < 2000,
            "cut off at the endpoint's timeout: {}",
            a.duration_ms
        );
    }
    let (status, n, _) = delivery_status(&app, &s.app_id, &msg).await;
    assert_eq!((status, n), (DeliveryStatus::Pending, 2), "one retry left");
}

async fn a_dropped_connection_fails_with_a_connection_error_and_is_retried(app: TestApp) {
    let receiver = FaultyReceiver::start(Fault::Drop).await;
    let (s, msg) = one_message(&app, &receiver.url, json!({})).await;
    let config = delivery_config("1m,1m", &[]);
    let t0 = Utc::now();
    assert_eq!(app.drain_at(&config, t0).await, 1);
    assert!(
        next_attempt_at(&app, &s, &msg).await > t0 + Duration::seconds(29),
        "retried later"
    );
    assert_eq!(app.drain_at(&config, t0 + Duration::minutes(2)).await, 1);

    assert_eq!(receiver.requests(), 2);
    let tried = attempts(&app, &s.app_id, &msg).await;
    assert_eq!(tried.len(), 2);
    for a in &tried {
        assert!(!a.success && a.response_status.is_none(), "{a:?}");
        let error = a.error.as_deref().unwrap();
        assert!(error.starts_with("connection failed"), "{error}");
    }
    let (status, n, _) = delivery_status(&app, &s.app_id, &msg).await;
    assert_eq!((status, n), (DeliveryStatus::Pending, 2));
}

async fn a_closed_port_is_retried_then_dead_lettered_after_the_schedule(app: TestApp) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    drop(listener);
    let (s, msg) = one_message(&app, &url, json!({})).await;
    let config = delivery_config("1m,1m", &[]);
    let t0 = Utc::now();
    for minutes in [0, 2, 4] {
        assert_eq!(
            app.drain_at(&config, t0 + Duration::minutes(minutes)).await,
            1
        );
    }
    assert_eq!(
        app.drain_at(&config, t0 + Duration::hours(1)).await,
        0,
        "nothing left to try"
    );

    let tried = attempts(&app, &s.app_id, &msg).await;
    assert_eq!(
        tried.len(),
        3,
        "the first attempt and the schedule's two retries"
    );
    for a in &tried {
        let error = a.error.as_deref().unwrap();
        assert!(error.starts_with("could not connect"), "{error}");
    }
    let (status, n, reason) = delivery_status(&app, &s.app_id, &msg).await;
    assert_eq!((status, n), (DeliveryStatus::DeadLettered, 3));
    assert!(reason.is_some());
}

fn too_many_requests(retry_after: &str) -> Fault {
    Fault::Answer(format!(
        "HTTP/1.1 429 Too Many Requests\r\nretry-after: {retry_after}\r\ncontent-length: 4\r\nconnection: close\r\n\r\nslow"
    ))
}

async fn retry_after_in_seconds_or_as_a_date_sets_the_next_attempt(app: TestApp) {
    // The schedule's first delay (1 s, jittered) is shorter than the hint; its cap (1 h) longer.
    let config = delivery_config("1s,1h", &[]);
    let seconds = FaultyReceiver::start(too_many_requests("7")).await;
    let (s, msg) = one_message(&app, &seconds.url, json!({})).await;
    let t0 = Utc::now();
    assert_eq!(app.drain_at(&config, t0).await, 1);
    let wait = next_attempt_at(&app, &s, &msg).await - t0;
    assert!(
        wait >= Duration::seconds(7) && wait < Duration::seconds(9),
        "{wait}"
    );
    let tried = attempts(&app, &s.app_id, &msg).await;
    assert_eq!((tried.len(), tried[0].response_status), (1, Some(429)));
    assert_eq!(tried[0].response, "slow");
    assert_eq!(seconds.requests(), 1);
    assert_eq!(
        app.drain_at(&config, t0 + Duration::seconds(5)).await,
        0,
        "not before 7 s"
    );

    let t1 = t0 + Duration::minutes(10);
    let date = (t1 + Duration::seconds(30))
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    let dated = FaultyReceiver::start(too_many_requests(&date)).await;
    let (s, msg) = one_message(&app, &dated.url, json!({})).await;
    assert_eq!(
        app.drain_at(&config, t1).await,
        2,
        "with the first one's retry"
    );
    assert_eq!(seconds.requests(), 2);
    let wait = next_attempt_at(&app, &s, &msg).await - t1;
    assert!(
        wait >= Duration::seconds(28) && wait <= Duration::seconds(31),
        "{wait}"
    );
    assert_eq!(dated.requests(), 1);
}

on_both_stores!(
    a_receiver_slower_than_the_endpoint_timeout_fails_with_a_timeout_and_is_retried,
    a_dropped_connection_fails_with_a_connection_error_and_is_retried,
    a_closed_port_is_retried_then_dead_lettered_after_the_schedule,
    retry_after_in_seconds_or_as_a_date_sets_the_next_attempt,
);
