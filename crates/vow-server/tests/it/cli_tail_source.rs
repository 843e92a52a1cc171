//! `vow tail --source` end to end, with real processes: a `vow serve` child (SQLite and
//! PostgreSQL), real receivers as the sources' destinations, signed GitHub deliveries (good
//! ones, a bad signature, a reused id with another payload), and real `vow tail --output json`
//! children. What a tail prints is checked against what vow's listings hold and what the
//! destination counted.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{json, Value};

use crate::child::{database, Vow};
use crate::cli_listen::{call, Proxy, OPERATOR, WAIT};
use crate::cli_tail::{run, stop_printing, tail, text, QUIET};
use crate::helpers::{eventually, TOKEN};
use crate::inbound::support::{github_signature, GITHUB_SECRET};
use crate::json_child::JsonChild;
use crate::receiver::Receiver;

/// A failed forward is retried 2 s later: long enough for a tail's polls to see it fail.
const ENV: &[(&str, &str)] = &[("VOW_RETRY_SCHEDULE", "2s")];

on_both_child_stores!(
    tail_source_prints_each_arrival_forward_and_refusal_once,
    a_dropped_source_tail_resumes_printing_nothing_twice,
    tail_source_refuses_bad_flags_and_unknown_sources_saying_why,
);

/// A GitHub source forwarding to `url`; its id and its destination's.
async fn source(base: &str, url: &str) -> (String, String) {
    let body = json!({
        "scheme": "github",
        "secrets": [GITHUB_SECRET],
        "destinations": [{"url": url, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}],
    });
    let (status, out) = call(base, Method::POST, "/api/v1/source", Some(body)).await;
    assert_eq!(status, 201, "{out}");
    (text(&out["id"]), text(&out["destinations"][0]["id"]))
}

/// POSTs a GitHub delivery `id` of `body` to `source`, signed with `secret`; the answer.
async fn deliver(base: &str, source: &str, id: &str, body: &str, secret: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/in/{source}"))
        .header(
            "x-hub-signature-256",
            github_signature(secret, body.as_bytes()),
        )
        .header("x-github-event", "push")
        .header("x-github-delivery", id)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A good delivery, stored as received.
async fn received(base: &str, source: &str, id: &str, body: &str) -> String {
    let (status, out) = deliver(base, source, id, body, GITHUB_SECRET).await;
    assert_eq!(
        (status, &out["outcome"]),
        (200, &json!("received")),
        "{out}"
    );
    text(&out["id"])
}

/// `GET path`'s `data`, once `done` says it is complete (at most 20 s).
async fn listed(base: &str, path: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    eventually(path, OPERATOR, WAIT, || async {
        let (status, page) = call(base, Method::GET, path, None).await;
        assert_eq!(status, 200, "{page}");
        let data = page["data"].as_array().unwrap().clone();
        done(&data).then_some(data)
    })
    .await
}

/// The stored events of `source`, once `completed` of them are.
async fn events(base: &str, source: &str, completed: usize) -> Vec<Value> {
    let path = format!("/api/v1/source/{source}/event?limit=250");
    listed(base, &path, |events| {
        events.iter().filter(|e| e["state"] == "completed").count() >= completed
    })
    .await
}

/// The next `n` activity lines `tail` prints.
async fn lines(tail: &mut JsonChild, n: usize) -> Vec<Value> {
    let mut got = Vec::new();
    for _ in 0..n {
        got.push(tail.next("activity").await);
    }
    got
}

/// The keys of `lines`, checking none was printed twice.
fn keys(lines: &[Value]) -> BTreeSet<String> {
    let keys: BTreeSet<String> = lines.iter().map(|l| text(&l["key"])).collect();
    assert_eq!(
        keys.len(),
        lines.len(),
        "a line was printed twice: {lines:?}"
    );
    keys
}

/// `(kind, outcome or arrival, id)` of each line, sorted.
fn said(lines: &[Value]) -> Vec<(String, String, String)> {
    let mut said: Vec<_> = lines
        .iter()
        .map(|l| {
            let what = match l["kind"].as_str() {
                Some("event") => text(&l["arrival"]),
                Some("forward") => text(&l["outcome"]),
                _ => text(&l["reason"]),
            };
            (text(&l["kind"]), what, text(&l["id"]))
        })
        .collect();
    said.sort();
    said
}

async fn tail_source_prints_each_arrival_forward_and_refusal_once(postgres: bool) {
    let (url, _dir) = database(postgres).await;
    let vow = Vow::start(&url, ENV).await;
    let destination = Receiver::start(&[500]).await;
    let elsewhere = Receiver::start(&[]).await;
    let (ours, dst) = source(&vow.base, &destination.url).await;
    let (theirs, _) = source(&vow.base, &elsewhere.url).await;

    let mut everything = tail(&vow.base, &["--source", &ours]).await;
    let mut failures = tail(&vow.base, &["--source", &ours, "--status", "fail"]).await;
    let first = received(&vow.base, &ours, "d-1", r#"{"n":1}"#).await;
    let second = received(&vow.base, &ours, "d-2", r#"{"n":2}"#).await;
    let (status, out) = deliver(&vow.base, &ours, "d-3", r#"{"n":3}"#, "wrong").await;
    assert_eq!(status, 401, "{out}");
    let (status, held) = deliver(&vow.base, &ours, "d-1", r#"{"n":9}"#, GITHUB_SECRET).await;
    assert_eq!(
        (status, &held["outcome"]),
        (202, &json!("quarantined")),
        "{held}"
    );
    received(&vow.base, &theirs, "b-1", r#"{"b":1}"#).await;

    // The destination answered 500 once, then 200 to each event: three forwards.
    assert_eq!(destination.wait_for(3).await.len(), 3);
    assert_eq!(elsewhere.wait_for(1).await.len(), 1);
    let stored = events(&vow.base, &ours, 2).await;
    let path = format!("/api/v1/source/{ours}/rejection");
    let refusals = listed(&vow.base, &path, |r| !r.is_empty()).await;
    let printed = lines(&mut everything, 7).await;
    let printed_failures = lines(&mut failures, 3).await;
    tokio::time::sleep(QUIET).await;
    let all = stop_printing(everything, printed, "activity").await;
    let failed = stop_printing(failures, printed_failures, "activity").await;

    // Each arrival, refusal and forward outcome once, as vow holds them; nothing of `theirs`.
    keys(&all);
    let (quarantined, refusal) = (text(&held["id"]), text(&refusals[0]["id"]));
    let mut stored_ids: Vec<String> = stored.iter().map(|e| text(&e["id"])).collect();
    stored_ids.sort();
    let mut arrived: Vec<String> = vec![first.clone(), second.clone(), quarantined.clone()];
    arrived.sort();
    assert_eq!(stored_ids, arrived);
    let retried = all
        .iter()
        .find(|l| l["outcome"] == "retryable")
        .unwrap_or_else(|| panic!("the 500 is a retryable forward: {all:?}"));
    let retried_id = text(&retried["id"]);
    assert_eq!(retried["status"], 500, "{retried}");
    let mut want = vec![
        ("event".into(), "received".into(), first.clone()),
        ("event".into(), "received".into(), second.clone()),
        ("event".into(), "quarantined".into(), quarantined.clone()),
        (
            "rejection".into(),
            "signature_mismatch".into(),
            refusal.clone(),
        ),
        ("forward".into(), "retryable".into(), retried_id.clone()),
        ("forward".into(), "completed".into(), first.clone()),
        ("forward".into(), "completed".into(), second.clone()),
    ];
    want.sort();
    assert_eq!(said(&all), want, "{all:?}");
    assert_eq!(all.len(), destination.wait_for(3).await.len() + 4);
    for line in &all {
        assert_ne!(line["providerEventId"], "b-1", "{line}");
        if line["kind"] == "forward" {
            assert_eq!(line["destination"], dst.as_str(), "{line}");
        }
        assert_eq!(
            line["failed"],
            line["outcome"] == "retryable"
                || line["arrival"] == "quarantined"
                || line["kind"] == "rejection",
            "{line}"
        );
    }
    // `--status fail`: the quarantined arrival, the refusal and the failed forward only.
    keys(&failed);
    let mut want_failed = vec![
        ("event".into(), "quarantined".into(), quarantined),
        ("rejection".into(), "signature_mismatch".into(), refusal),
        ("forward".into(), "retryable".into(), retried_id),
    ];
    want_failed.sort();
    assert_eq!(said(&failed), want_failed, "{failed:?}");
}

async fn a_dropped_source_tail_resumes_printing_nothing_twice(postgres: bool) {
    let (url, _dir) = database(postgres).await;
    let vow = Vow::start(&url, &[]).await;
    let proxy = Proxy::start(&vow.base).await;
    let destination = Receiver::start(&[]).await;
    let (ours, _) = source(&vow.base, &destination.url).await;
    let mut following = tail(&proxy.url, &["--source", &ours]).await;
    received(&vow.base, &ours, "d-1", r#"{"n":1}"#).await;
    destination.wait_for(1).await;
    let mut printed = lines(&mut following, 2).await;
    proxy.cut();
    received(&vow.base, &ours, "d-2", r#"{"n":2}"#).await;
    destination.wait_for(2).await;
    events(&vow.base, &ours, 2).await;
    proxy.restore();
    // The resumed stream sends the last seconds again: the tail prints only what it has not.
    following.next("connected").await;
    printed.extend(lines(&mut following, 2).await);
    tokio::time::sleep(QUIET).await;
    let printed = stop_printing(following, printed, "activity").await;
    assert_eq!(keys(&printed).len(), 4, "{printed:?}");
    let kinds: Vec<String> = said(&printed)
        .into_iter()
        .map(|s| s.0 + " " + &s.1)
        .collect();
    assert_eq!(
        kinds,
        [
            "event received",
            "event received",
            "forward completed",
            "forward completed"
        ]
    );
}

async fn tail_source_refuses_bad_flags_and_unknown_sources_saying_why(postgres: bool) {
    let (url, _dir) = database(postgres).await;
    let vow = Vow::start(&url, &[]).await;
    let target = ["--url", vow.base.as_str(), "--token", TOKEN];
    let tail = |extra: &[&str]| run(&[&["tail"][..], &target, extra].concat());
    let unknown = "src_01JF0000000000000000000000";

    let (ok, said) = tail(&[
        "--source",
        unknown,
        "--app",
        "app_01JF0000000000000000000000",
    ]);
    assert!(
        !ok && said.contains("--source") && said.contains("--app"),
        "{said}"
    );
    let (ok, said) = tail(&["--source", unknown, "--status", "success"]);
    assert!(!ok && said.contains("--status fail"), "{said}");
    let (ok, said) = tail(&["--source", unknown]);
    assert!(
        !ok && said.contains("404") && said.contains("Source"),
        "{said}"
    );
    let (ok, said) = run(&[
        "tail", "--url", &vow.base, "--token", "nope", "--source", unknown,
    ]);
    assert!(!ok && said.contains("401"), "{said}");
}
