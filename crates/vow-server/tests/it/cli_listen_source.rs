//! `vow listen --source` end to end, with real processes: a `vow serve` child (SQLite and
//! PostgreSQL), provider-signed requests to an inbound source, the real `vow listen` binary
//! relaying the source's forwarded events to a real local receiver, and a second real receiver
//! as the source's ordinary destination. Counts what both receivers got and reads the forwards
//! and the source back through the API.

use serde_json::{json, Value};

use crate::child::{database, Vow};
use crate::cli_listen::{a_500_then_a_200, call, OPERATOR, WAIT};
use crate::helpers::{eventually, TOKEN};
use crate::inbound::support::{github_signature, GITHUB_SECRET};
use crate::json_child::JsonChild;
use crate::receiver::{standard_signature_ok, Receiver};

/// Fast retries, so a local 500 is retried within the test.
const ENV: &[(&str, &str)] = &[("VOW_RETRY_SCHEDULE", "1s,1s,1s")];

on_both_child_stores!(
    listen_source_relays_the_providers_exact_bytes_signed_for_the_relay_destination,
    a_local_500_then_200_is_two_attempts_of_the_forward,
    an_exhausted_forward_dead_letters_and_a_replay_reaches_the_listener,
);

/// A connected `vow listen --source` child relaying `source`'s forwarded events to `local`.
pub(crate) struct Listening {
    pub(crate) child: JsonChild,
    /// The relay destination's id.
    pub(crate) destination: String,
    /// The signing secret it printed.
    pub(crate) secret: String,
}

/// Starts `vow listen --source source` to `local`; returns once it is connected.
pub(crate) async fn listen_source(base: &str, source: &str, local: &str) -> Listening {
    let mut child = JsonChild::start(&[
        "listen", local, "--source", source, "--url", base, "--token", TOKEN,
    ]);
    let listening = child.next("listening").await;
    child.next("connected").await;
    let text = |key: &str| listening[key].as_str().unwrap().to_owned();
    Listening {
        destination: text("destinationId"),
        secret: text("secret"),
        child,
    }
}

/// A GitHub source whose one ordinary destination is `destination`; its id.
pub(crate) async fn github_source(base: &str, destination: &str) -> String {
    let body = json!({
        "scheme": "github",
        "secrets": [GITHUB_SECRET],
        "destinations": [{"url": destination}],
    });
    let (status, out) = call(base, reqwest::Method::POST, "/api/v1/source", Some(body)).await;
    assert_eq!(status, 201, "{out}");
    out["id"].as_str().unwrap().to_owned()
}

/// Sends `body` to `source` as GitHub delivery `delivery`, byte for byte; 202 expected.
async fn github_delivery(base: &str, source: &str, delivery: &str, body: &[u8]) {
    let resp = reqwest::Client::new()
        .post(format!("{base}/in/{source}"))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", github_signature(GITHUB_SECRET, body))
        .header("x-github-event", "push")
        .header("x-github-delivery", delivery)
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert!((200..300).contains(&status), "{status}");
}

/// The source's event whose provider id is `delivery`, with its forwards, once `ready` says so.
async fn event_when(
    base: &str,
    source: &str,
    delivery: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    eventually(
        &format!("event {delivery} of {source}"),
        OPERATOR,
        WAIT,
        || async {
            let path = format!("/api/v1/source/{source}/event");
            let (_, page) = call(base, reqwest::Method::GET, &path, None).await;
            let listed = page["data"]
                .as_array()?
                .iter()
                .find(|e| e["eventId"] == delivery)?;
            let path = format!("/api/v1/source/{source}/event/{}", listed["id"].as_str()?);
            let (_, event) = call(base, reqwest::Method::GET, &path, None).await;
            ready(&event).then_some(event)
        },
    )
    .await
}

/// The forward of `event` to `destination`.
fn forward<'a>(event: &'a Value, destination: &str) -> &'a Value {
    event["forwards"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["destinationId"] == destination)
        .unwrap_or_else(|| panic!("no forward to {destination}: {event}"))
}

/// Every forward completed, and the event's own state recorded as completed too (a worker
/// records the forwards' outcomes before it ends its lease).
fn all_completed(event: &Value) -> bool {
    event["state"] == "completed"
        && event["forwards"]
            .as_array()
            .is_some_and(|f| !f.is_empty() && f.iter().all(|f| f["outcome"] == "completed"))
}

/// The ids of `source`'s destinations, as read back.
pub(crate) async fn destination_ids(base: &str, source: &str) -> Vec<String> {
    let path = format!("/api/v1/source/{source}");
    let (status, out) = call(base, reqwest::Method::GET, &path, None).await;
    assert_eq!(status, 200, "{out}");
    out["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Provider bodies whose bytes a re-serialisation would change, and one that is not UTF-8.
const BODIES: [&[u8]; 4] = [
    br#"{"b": 1,   "a": [1, 2.50, 1e3]}"#,
    "{\"name\":\"caf\\u00e9 \u{2713}\",\"nested\":{\"z\":null}}".as_bytes(),
    b"{\n  \"multi\": \"line\"\n}",
    b"\xff\xfe not UTF-8 \x00\xc3",
];

async fn listen_source_relays_the_providers_exact_bytes_signed_for_the_relay_destination(
    postgres: bool,
) {
    let (db, _dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    let local = Receiver::start(&[]).await;
    let other = Receiver::start(&[]).await;
    let source = github_source(&vow.base, &other.url).await;
    let [ordinary] = <[String; 1]>::try_from(destination_ids(&vow.base, &source).await).unwrap();
    let Listening {
        child: mut listen,
        destination: relay,
        secret,
    } = listen_source(&vow.base, &source, &local.url).await;
    assert_eq!(
        destination_ids(&vow.base, &source).await,
        vec![ordinary.clone(), relay.clone()]
    );
    for (i, body) in BODIES.iter().enumerate() {
        github_delivery(&vow.base, &source, &format!("guid-{i}"), body).await;
    }
    let got = local.wait_for(BODIES.len()).await;
    for (i, body) in BODIES.iter().enumerate() {
        let delivery = format!("guid-{i}");
        let event = event_when(&vow.base, &source, &delivery, all_completed).await;
        let id = event["id"].as_str().unwrap();
        let r = got
            .iter()
            .find(|r| r.header("vow-event-id") == delivery)
            .unwrap_or_else(|| panic!("{delivery} was not relayed"));
        assert_eq!(&r.body[..], *body, "{delivery}: the provider's exact bytes");
        assert!(
            standard_signature_ok(r, &secret),
            "{delivery} verifies with the printed secret"
        );
        assert_eq!(r.header("webhook-id"), id);
        assert_eq!(r.header("vow-source"), source);
        assert_eq!(forward(&event, &relay)["status"], 200, "{event}");
        assert_eq!(forward(&event, &ordinary)["status"], 200, "{event}");
    }
    for _ in BODIES {
        let line = listen.next("delivery").await;
        assert_eq!(line["status"], 200, "{line}");
    }
    // Ctrl-C removes the relay destination, and only it.
    assert!(listen.interrupt(), "vow listen exits cleanly on Ctrl-C");
    assert_eq!(
        destination_ids(&vow.base, &source).await,
        vec![ordinary.clone()]
    );
    // The ordinary destination got every event, before and after.
    github_delivery(&vow.base, &source, "guid-after", b"{\"after\":true}").await;
    event_when(&vow.base, &source, "guid-after", all_completed).await;
    let to_other = other.wait_for(BODIES.len() + 1).await;
    let mut ids: Vec<&str> = to_other.iter().map(|r| r.header("vow-event-id")).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        ["guid-0", "guid-1", "guid-2", "guid-3", "guid-after"],
        "each once"
    );
    assert_eq!(local.received().len(), BODIES.len(), "nothing after Ctrl-C");
}

async fn a_local_500_then_200_is_two_attempts_of_the_forward(postgres: bool) {
    let (db, _dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    let local = Receiver::start(&[500]).await;
    let other = Receiver::start(&[]).await;
    let source = github_source(&vow.base, &other.url).await;
    let Listening {
        child: mut listen,
        destination: relay,
        ..
    } = listen_source(&vow.base, &source, &local.url).await;
    github_delivery(&vow.base, &source, "guid-1", br#"{"n":1}"#).await;
    a_500_then_a_200(&mut listen, &local).await;
    let event = event_when(&vow.base, &source, "guid-1", all_completed).await;
    let relayed = forward(&event, &relay);
    assert_eq!(relayed["attempts"], 2, "{event}");
    assert_eq!(relayed["status"], 200, "{event}");
    assert_eq!(event["state"], "completed", "{event}");
    // The ordinary destination was forwarded to once: a retry goes only where it is owed.
    assert_eq!(other.received().len(), 1);
}

async fn an_exhausted_forward_dead_letters_and_a_replay_reaches_the_listener(postgres: bool) {
    let (db, _dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    // As many failures as the schedule has attempts; then 200.
    let local = Receiver::start(&[500; 4]).await;
    let other = Receiver::start(&[]).await;
    let source = github_source(&vow.base, &other.url).await;
    let Listening {
        child: _listen,
        destination: relay,
        ..
    } = listen_source(&vow.base, &source, &local.url).await;
    github_delivery(&vow.base, &source, "guid-1", br#"{"n":1}"#).await;
    let event = event_when(&vow.base, &source, "guid-1", |e| {
        e["state"] == "dead_lettered"
    })
    .await;
    assert_eq!(
        local.received().len(),
        4,
        "the first attempt and the schedule's three retries"
    );
    assert_eq!(forward(&event, &relay)["status"], 500, "{event}");
    let id = event["id"].as_str().unwrap();
    let replay = format!("/api/v1/source/{source}/event/{id}/replay");
    let body = json!({"destination": relay});
    let (status, out) = call(&vow.base, reqwest::Method::POST, &replay, Some(body)).await;
    assert!(status < 300, "{out}");
    local.wait_for(5).await;
    let event = event_when(&vow.base, &source, "guid-1", all_completed).await;
    assert_eq!(forward(&event, &relay)["status"], 200, "{event}");
    assert_eq!(
        other.received().len(),
        1,
        "the replay went to the relay destination only"
    );
}
