//! `vow listen` end to end, with real processes: a `vow serve` child (SQLite and PostgreSQL),
//! the real `vow listen` binary relaying to a real local receiver, and (for the reconnect test)
//! a TCP proxy between the two that can cut the connection. Counts what the receiver got and
//! reads the attempts back through the API.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::child::{database, Vow};
use crate::helpers::{eventually, into_parts, TOKEN};
use crate::json_child::JsonChild;
use crate::receiver::{standard_signature_ok, Receiver};

/// How often a test polls vow's API for what it records asynchronously, and for how long.
pub(crate) const OPERATOR: Duration = Duration::from_millis(100);
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// Fast retries, so a local 500 is retried within the test.
const ENV: &[(&str, &str)] = &[("VOW_RETRY_SCHEDULE", "1s,1s,1s")];

on_both_child_stores!(
    listen_relays_exact_bytes_that_verify_with_the_printed_secret,
    a_local_500_then_200_is_two_attempts_in_vow,
    an_exhausted_delivery_dead_letters_and_a_replay_reaches_the_listener,
    a_disconnected_listen_gets_what_was_sent_meanwhile_on_reconnect,
);

/// A `vow listen` child relaying `app`'s deliveries to `local`, with `--output json`.
fn start_listen(base: &str, app: &str, local: &str, extra: &[&str]) -> JsonChild {
    let args = [
        "listen", local, "--app", app, "--url", base, "--token", TOKEN,
    ];
    JsonChild::start(&[&args[..], extra].concat())
}

pub(crate) async fn call(
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    into_parts(request.send().await.unwrap()).await
}

pub(crate) async fn create_app(base: &str) -> String {
    let (status, app) = call(
        base,
        reqwest::Method::POST,
        "/api/v1/app",
        Some(json!({"name": "dev"})),
    )
    .await;
    assert_eq!(status, 201, "{app}");
    app["id"].as_str().unwrap().to_string()
}

/// Sends `payload` (raw JSON text, sent byte for byte) as a message of `event_type`; its id.
pub(crate) async fn send_raw(base: &str, app: &str, event_type: &str, payload: &str) -> String {
    let body = format!(r#"{{"eventType":"{event_type}","payload":{payload}}}"#);
    let resp = reqwest::Client::new()
        .post(format!("{base}/api/v1/app/{app}/msg"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let (status, msg) = into_parts(resp).await;
    assert_eq!(status, 202, "{msg}");
    msg["id"].as_str().unwrap().to_string()
}

/// The attempts of message `msg`, oldest first, once at least `n` are recorded (at most 20 s).
async fn attempts(base: &str, app: &str, msg: &str, n: usize) -> Vec<Value> {
    let path = format!("/api/v1/app/{app}/attempt/msg/{msg}");
    // Polls the API the way an operator would; the attempts are recorded asynchronously.
    eventually(
        &format!("{n} attempts of {msg}"),
        OPERATOR,
        WAIT,
        || async {
            let (status, page) = call(base, reqwest::Method::GET, &path, None).await;
            assert_eq!(status, 200, "{page}");
            let mut data = page["data"].as_array().unwrap().clone();
            (data.len() >= n).then(|| {
                data.reverse();
                data
            })
        },
    )
    .await
}

/// Payloads whose bytes a re-serialisation would change: spacing, key order, escapes, numbers.
const PAYLOADS: [&str; 3] = [
    r#"{"b": 1,   "a": [1, 2.50, 1e3]}"#,
    r#"{"name":"caf\u00e9 ✓","nested":{"z":null,"a":true}}"#,
    "{\n  \"multi\": \"line\"\n}",
];

async fn listen_relays_exact_bytes_that_verify_with_the_printed_secret(postgres: bool) {
    let (db, _dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    let receiver = Receiver::start(&[]).await;
    let app = create_app(&vow.base).await;
    let mut listen = start_listen(
        &vow.base,
        &app,
        &receiver.url,
        &["--events", "order.created,order.paid"],
    );
    let listening = listen.next("listening").await;
    let secret = listening["secret"].as_str().unwrap().to_string();
    let endpoint = listening["endpointId"].as_str().unwrap().to_string();
    listen.next("connected").await;
    let mut ids = Vec::new();
    for payload in PAYLOADS {
        ids.push(send_raw(&vow.base, &app, "order.created", payload).await);
    }
    // Filtered out by `--events`: never relayed.
    send_raw(&vow.base, &app, "user.deleted", "{}").await;
    ids.push(send_raw(&vow.base, &app, "order.paid", "{}").await);
    let got = receiver.wait_for(4).await;
    for (payload, id) in PAYLOADS.iter().chain(&["{}"]).zip(&ids) {
        let r = got
            .iter()
            .find(|r| r.header("webhook-id") == id)
            .unwrap_or_else(|| panic!("{id} was not relayed"));
        assert_eq!(&r.body[..], payload.as_bytes(), "{id}: the exact bytes");
        assert!(
            standard_signature_ok(r, &secret),
            "{id} verifies with the printed secret"
        );
    }
    for _ in 0..4 {
        let line = listen.next("delivery").await;
        assert_eq!(line["status"], 200, "{line}");
        assert!(ids.iter().any(|id| line["msgId"] == id.as_str()), "{line}");
    }
    for id in &ids {
        let attempts = attempts(&vow.base, &app, id, 1).await;
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0]["responseStatusCode"], 200);
        assert_eq!(attempts[0]["endpointId"], endpoint.as_str());
        assert_eq!(attempts[0]["url"], "relay://listen");
    }
    // Nothing more came: the filtered event stayed out.
    assert_eq!(receiver.received().len(), 4);
    // Ctrl-C deletes the relay endpoint.
    assert!(listen.interrupt(), "vow listen exits cleanly on Ctrl-C");
    let path = format!("/api/v1/app/{app}/endpoint/{endpoint}");
    let (status, _) = call(&vow.base, reqwest::Method::GET, &path, None).await;
    assert_eq!(status, 404);
}

async fn a_local_500_then_200_is_two_attempts_in_vow(postgres: bool) {
    let (db, _dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    let receiver = Receiver::start(&[500]).await;
    let app = create_app(&vow.base).await;
    let mut listen = start_listen(&vow.base, &app, &receiver.url, &[]);
    listen.next("connected").await;
    let msg = send_raw(&vow.base, &app, "order.created", r#"{"n":1}"#).await;
    a_500_then_a_200(&mut listen, &receiver).await;
    let attempts = attempts(&vow.base, &app, &msg, 2).await;
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["responseStatusCode"], 500);
    assert_eq!(attempts[0]["status"], 2);
    assert_eq!(attempts[1]["responseStatusCode"], 200);
    assert_eq!(attempts[1]["status"], 0);
    let (_, message) = call(
        &vow.base,
        reqwest::Method::GET,
        &format!("/api/v1/app/{app}/msg/{msg}/endpoint"),
        None,
    )
    .await;
    assert_eq!(message["data"][0]["statusText"], "success", "{message}");
}

/// The local receiver answered one request 500 and its retry 200: the same bytes and id twice,
/// and the listener's two lines say so.
pub(crate) async fn a_500_then_a_200(listen: &mut JsonChild, receiver: &Receiver) {
    let got = receiver.wait_for(2).await;
    assert_eq!(got[0].body, got[1].body);
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));
    for (status, attempt) in [(500, 1), (200, 2)] {
        let line = listen.next("delivery").await;
        assert_eq!(
            (line["status"].clone(), line["attempt"].clone()),
            (json!(status), json!(attempt)),
            "{line}"
        );
    }
}

/// The status text of message `msg`'s delivery, once it is `want` (at most 20 s).
async fn wait_status(base: &str, app: &str, msg: &str, want: &str) {
    let path = format!("/api/v1/app/{app}/msg/{msg}/endpoint");
    // Polls the API the way an operator would; outcomes are recorded asynchronously.
    let what = format!("the delivery of {msg} becomes {want:?}");
    eventually(&what, OPERATOR, WAIT, || async {
        let (_, out) = call(base, reqwest::Method::GET, &path, None).await;
        (out["data"][0]["statusText"] == want).then_some(())
    })
    .await
}

async fn an_exhausted_delivery_dead_letters_and_a_replay_reaches_the_listener(postgres: bool) {
    let (db, _dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    // As many failures as the schedule has attempts; then 200.
    let receiver = Receiver::start(&[500; 4]).await;
    let app = create_app(&vow.base).await;
    let mut listen = start_listen(&vow.base, &app, &receiver.url, &[]);
    let endpoint = listen.next("listening").await["endpointId"]
        .as_str()
        .unwrap()
        .to_string();
    listen.next("connected").await;
    let msg = send_raw(&vow.base, &app, "order.created", r#"{"n":1}"#).await;
    wait_status(&vow.base, &app, &msg, "fail").await;
    let tried = receiver.received().len();
    assert_eq!(
        tried, 4,
        "the first attempt and the schedule's three retries"
    );
    let attempts_so_far = attempts(&vow.base, &app, &msg, tried).await;
    assert!(attempts_so_far
        .iter()
        .all(|a| a["responseStatusCode"] == 500));
    receiver
        .received()
        .iter()
        .for_each(|r| assert_eq!(r.header("webhook-id"), msg));
    let replay = format!("/api/v1/app/{app}/endpoint/{endpoint}/replay");
    let (status, out) = call(&vow.base, reqwest::Method::POST, &replay, Some(json!({}))).await;
    assert!(status < 300, "{out}");
    receiver.wait_for(tried + 1).await;
    wait_status(&vow.base, &app, &msg, "success").await;
    let all = attempts(&vow.base, &app, &msg, tried + 1).await;
    assert_eq!(all.last().unwrap()["responseStatusCode"], 200);
    assert_eq!(all.last().unwrap()["triggerType"], 1, "a manual attempt");
}

/// A TCP proxy to `upstream` whose connections can be cut (and new ones refused) and restored.
pub(crate) struct Proxy {
    pub(crate) url: String,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<JoinHandle<()>>>>,
    _accept: JoinHandle<()>,
}

impl Proxy {
    pub(crate) async fn start(upstream: &str) -> Proxy {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (c, o) = (cut.clone(), open.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if c.load(Ordering::SeqCst) {
                    continue;
                }
                let upstream = upstream.clone();
                o.lock().unwrap().push(tokio::spawn(async move {
                    if let Ok(mut out) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                }));
            }
        });
        Proxy {
            url,
            cut,
            open,
            _accept: accept,
        }
    }

    /// Closes every connection and refuses new ones.
    pub(crate) fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for task in self.open.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    pub(crate) fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

async fn a_disconnected_listen_gets_what_was_sent_meanwhile_on_reconnect(postgres: bool) {
    let (db, _dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    let proxy = Proxy::start(&vow.base).await;
    let receiver = Receiver::start(&[]).await;
    let app = create_app(&vow.base).await;
    let mut listen = start_listen(&proxy.url, &app, &receiver.url, &[]);
    listen.next("connected").await;
    let before = send_raw(&vow.base, &app, "order.created", r#"{"n":0}"#).await;
    receiver.wait_for(1).await;
    // Its answer reached vow (else it would be retried after the reconnect: at least once).
    attempts(&vow.base, &app, &before, 1).await;
    proxy.cut();
    let meanwhile = [
        send_raw(&vow.base, &app, "order.created", r#"{"n":1}"#).await,
        send_raw(&vow.base, &app, "order.created", r#"{"n":2}"#).await,
    ];
    // Disconnected for a while: nothing arrives, vow keeps them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(receiver.received().len(), 1);
    proxy.restore();
    listen.next("connected").await;
    let got = receiver.wait_for(3).await;
    let ids: Vec<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids.len(), 3, "each once: {ids:?}");
    assert_eq!(ids[0], before);
    for id in &meanwhile {
        assert!(
            ids.contains(&id.as_str()),
            "{id} arrived after the reconnect"
        );
        let attempts = attempts(&vow.base, &app, id, 1).await;
        assert_eq!(attempts.len(), 1, "waiting spent no attempt");
        assert_eq!(attempts[0]["responseStatusCode"], 200);
    }
}
