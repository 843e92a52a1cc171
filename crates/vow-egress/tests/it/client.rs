//! `EgressClient` against a real HTTP server on 127.0.0.1. Only loopback traffic.

use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue};
use url::Url;
use vow_egress::{AddressClass, AddressPolicy, EgressClient, EgressConfig, EgressError};

use crate::support::{response, Reply, TestServer};

fn client_with(allow: &str, tweak: impl FnOnce(&mut EgressConfig)) -> EgressClient {
    let mut config = EgressConfig {
        policy: AddressPolicy::parse_allow_list(allow).unwrap(),
        ..EgressConfig::default()
    };
    tweak(&mut config);
    EgressClient::new(config).unwrap()
}

fn loopback_client() -> EgressClient {
    client_with("127.0.0.0/8, ::1/128", |_| {})
}

fn ok_reply() -> Reply {
    response("200 OK", &[], b"ok")
}

async fn post(client: &EgressClient, url: &Url) -> Result<vow_egress::EgressResponse, EgressError> {
    client
        .post(url, HeaderMap::new(), Bytes::from_static(b"{}"), None)
        .await
}

#[tokio::test]
async fn a_loopback_ip_literal_is_refused_by_default_and_nothing_reaches_the_server() {
    let server = TestServer::start(ok_reply()).await;
    let client = client_with("", |_| {});

    let err = post(&client, &server.url("127.0.0.1")).await.unwrap_err();

    let refusal = err
        .refusal()
        .unwrap_or_else(|| panic!("not refused: {err:?}"));
    assert_eq!(refusal.class(), AddressClass::Loopback);
    assert_eq!(refusal.address().to_string(), "127.0.0.1");
    assert_eq!(server.connections_so_far().await, 0);
}

#[tokio::test]
async fn localhost_is_refused_at_resolution_and_nothing_reaches_the_server() {
    let server = TestServer::start(ok_reply()).await;
    let client = client_with("", |_| {});

    let err = post(&client, &server.url("localhost")).await.unwrap_err();

    assert!(
        matches!(&err, EgressError::Refused(r) if r.class() == AddressClass::Loopback),
        "{err:?}"
    );
    assert_eq!(server.connections_so_far().await, 0);
}

#[tokio::test]
async fn other_spellings_of_the_local_host_are_refused_too() {
    let server = TestServer::start(ok_reply()).await;
    let client = client_with("", |_| {});
    let cases = [
        ("0.0.0.0", AddressClass::Unspecified),
        ("127.1", AddressClass::Loopback),
        ("0x7f.0.0.1", AddressClass::Loopback),
        ("127.0.0.1.", AddressClass::Loopback),
        ("[::1]", AddressClass::Loopback),
        ("[::ffff:127.0.0.1]", AddressClass::Loopback),
        ("[::]", AddressClass::Unspecified),
    ];
    for (host, class) in cases {
        let err = post(&client, &server.url(host)).await.unwrap_err();
        assert!(
            matches!(&err, EgressError::Refused(r) if r.class() == class),
            "{host}: {err:?}"
        );
    }
    assert_eq!(server.connections_so_far().await, 0);
}

#[tokio::test]
async fn a_refused_destination_reads_clearly_in_the_delivery_log() {
    let client = client_with("", |_| {});
    let url = Url::parse("http://169.254.169.254/latest/meta-data/").unwrap();
    let err = post(&client, &url).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "destination refused: 169.254.169.254 is a link-local address"
    );
}

#[tokio::test]
async fn with_loopback_allowed_the_post_arrives_with_the_exact_body_and_headers() {
    let mut server = TestServer::start(ok_reply()).await;
    let client = loopback_client();
    let body = Bytes::from_static(b"{\"type\":\"invoice.paid\"}\x00\xff\r\n");
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers.insert(
        "webhook-id",
        HeaderValue::from_static("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"),
    );
    headers.insert(
        "webhook-signature",
        HeaderValue::from_static("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
    );
    // Owned by the client: must not reach the wire as given.
    headers.insert("host", HeaderValue::from_static("internal.example"));
    headers.insert("content-length", HeaderValue::from_static("1"));
    headers.insert("transfer-encoding", HeaderValue::from_static("chunked"));

    let response = client
        .post(&server.url("127.0.0.1"), headers, body.clone(), None)
        .await
        .unwrap();
    let seen = server.next_request().await;

    assert_eq!(response.status, 200);
    assert_eq!(&response.body_prefix[..], b"ok");
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/hook?token=secret");
    assert_eq!(seen.body, body.to_vec());
    assert_eq!(seen.header("content-type"), ["application/json"]);
    assert_eq!(
        seen.header("webhook-id"),
        ["msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"]
    );
    assert_eq!(
        seen.header("webhook-signature"),
        ["v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="]
    );
    assert_eq!(
        seen.header("host"),
        [format!("127.0.0.1:{}", server.addr.port())]
    );
    assert_eq!(seen.header("content-length"), [body.len().to_string()]);
    assert!(seen.header("transfer-encoding").is_empty());
    assert_eq!(
        seen.header("user-agent"),
        [concat!("vow/", env!("CARGO_PKG_VERSION"))]
    );
}

#[tokio::test]
async fn with_loopback_allowed_localhost_resolves_and_arrives() {
    let mut server = TestServer::start(ok_reply()).await;
    let response = post(&loopback_client(), &server.url("localhost"))
        .await
        .unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(server.next_request().await.body, b"{}");
}

#[tokio::test]
async fn status_headers_and_body_prefix_come_back() {
    let server = TestServer::start(response(
        "429 Too Many Requests",
        &[("retry-after", "120"), ("vow-outcome", "retry")],
        b"slow down",
    ))
    .await;

    let response = post(&loopback_client(), &server.url("127.0.0.1"))
        .await
        .unwrap();

    assert_eq!(response.status, 429);
    assert_eq!(response.retry_after(), Some("120"));
    assert_eq!(response.vow_outcome(), Some("retry"));
    assert_eq!(&response.body_prefix[..], b"slow down");
    assert!(!response.body_truncated);
    assert!(response.latency > Duration::ZERO);
}

#[tokio::test]
async fn a_redirect_is_returned_as_is_and_not_followed() {
    let elsewhere = TestServer::start(ok_reply()).await;
    let location = elsewhere.url("127.0.0.1").to_string();
    let server = TestServer::start(response("302 Found", &[("location", &location)], b"")).await;

    let response = post(&loopback_client(), &server.url("127.0.0.1"))
        .await
        .unwrap();

    assert_eq!(response.status, 302);
    assert_eq!(response.header("location"), Some(location.as_str()));
    assert_eq!(elsewhere.connections_so_far().await, 0);
}

#[tokio::test]
async fn the_body_prefix_is_truncated_at_max_response_bytes() {
    let long: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let server = TestServer::start(response("500 Internal Server Error", &[], &long)).await;
    let client = client_with("127.0.0.0/8", |c| c.max_response_bytes = 100);

    let response = post(&client, &server.url("127.0.0.1")).await.unwrap();

    assert_eq!(response.status, 500);
    assert_eq!(&response.body_prefix[..], &long[..100]);
    assert!(response.body_truncated);
}

#[tokio::test]
async fn a_body_of_exactly_max_response_bytes_is_not_truncated() {
    let server = TestServer::start(response("200 OK", &[], &[b'x'; 64])).await;
    let client = client_with("127.0.0.0/8", |c| c.max_response_bytes = 64);

    let response = post(&client, &server.url("127.0.0.1")).await.unwrap();

    assert_eq!(response.body_prefix.len(), 64);
    assert!(!response.body_truncated);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_within_the_given_timeout() {
    let mut server = TestServer::start(Reply::Silent).await;
    let timeout = Duration::from_millis(200);
    let started = Instant::now();

    let err = loopback_client()
        .post(
            &server.url("127.0.0.1"),
            HeaderMap::new(),
            Bytes::from_static(b"payload"),
            Some(timeout),
        )
        .await
        .unwrap_err();

    let elapsed = started.elapsed();
    assert!(
        matches!(err, EgressError::Timeout { sent: true }),
        "{err:?}"
    );
    assert!(elapsed >= timeout, "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert_eq!(server.next_request().await.body, b"payload");
}

#[tokio::test]
async fn the_configured_request_timeout_applies_when_none_is_given() {
    let server = TestServer::start(Reply::Silent).await;
    let client = client_with("127.0.0.0/8", |c| {
        c.request_timeout = Duration::from_millis(200)
    });
    let started = Instant::now();

    let err = post(&client, &server.url("127.0.0.1")).await.unwrap_err();

    assert!(matches!(err, EgressError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_closed_port_is_a_connect_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = Url::parse(&format!("http://127.0.0.1:{port}/hook")).unwrap();

    let err = post(&loopback_client(), &url).await.unwrap_err();

    let EgressError::Connect { reason, .. } = &err else {
        panic!("expected Connect, got {err:?}");
    };
    assert!(reason.to_lowercase().contains("refused"), "{reason}");
    assert!(!err.to_string().contains("token"), "{err}");
}

#[tokio::test]
async fn a_server_that_hangs_up_without_answering_is_a_transport_error_after_sending() {
    let server = TestServer::start(Reply::HangUp).await;

    let err = post(&loopback_client(), &server.url("127.0.0.1"))
        .await
        .unwrap_err();

    assert!(
        matches!(err, EgressError::Transport { sent: true, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_empty_body_is_sent_with_a_content_length_of_zero() {
    let mut server = TestServer::start(ok_reply()).await;

    let response = loopback_client()
        .post(
            &server.url("127.0.0.1"),
            HeaderMap::new(),
            Bytes::new(),
            None,
        )
        .await
        .unwrap();
    let seen = server.next_request().await;

    assert_eq!(response.status, 200);
    assert_eq!(seen.header("content-length"), ["0"]);
    assert!(seen.body.is_empty());
}

#[tokio::test]
async fn a_cloned_client_shares_the_policy() {
    let server = TestServer::start(ok_reply()).await;
    let client = client_with("", |_| {});
    let clone = client.clone();
    let err = post(&clone, &server.url("[::1]")).await.unwrap_err();
    assert!(err.refusal().is_some(), "{err:?}");
    assert_eq!(clone.policy(), client.policy());
}

#[tokio::test]
async fn a_url_that_is_not_http_is_invalid() {
    let client = loopback_client();
    for url in [
        "ftp://127.0.0.1/file",
        "file:///etc/passwd",
        "unix:/run/docker.sock",
    ] {
        let err = post(&client, &Url::parse(url).unwrap()).await.unwrap_err();
        assert!(
            matches!(err, EgressError::InvalidUrl { .. }),
            "{url}: {err:?}"
        );
    }
}
