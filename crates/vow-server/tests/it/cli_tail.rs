//! `vow tail` end to end, with real processes: a `vow serve` child (SQLite and PostgreSQL), real
//! receivers (one answers 200, one 500), and real `vow tail --output json` children. What a tail
//! prints is checked against what the receivers counted and what vow's attempt listing holds.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::child::{database, Vow};
use crate::cli_listen::{call, create_app, send_raw, Proxy, OPERATOR, WAIT};
use crate::helpers::eventually;
use crate::helpers::TOKEN;
use crate::json_child::JsonChild;
use crate::receiver::Receiver;

/// One retry, a second later: a 500 makes two attempts, the first with a next try.
const ENV: &[(&str, &str)] = &[("VOW_RETRY_SCHEDULE", "1s")];

/// Messages sent to the application.
const N: usize = 3;

/// Longer than the stream goes back to catch attempts that land late (3 s) plus a poll: a
/// duplicate would have been printed by then.
pub(crate) const QUIET: Duration = Duration::from_millis(4500);

on_both_child_stores!(
    tail_prints_each_attempt_the_receivers_got_once,
    a_dropped_tail_resumes_where_it_was_printing_nothing_twice,
    a_bad_flag_or_a_refused_token_exits_non_zero_saying_why,
);

/// `vow tail --url base --token TOKEN extra… --output json`, once it is connected.
pub(crate) async fn tail(base: &str, extra: &[&str]) -> JsonChild {
    let args = ["tail", "--url", base, "--token", TOKEN];
    let mut child = JsonChild::start(&[&args[..], extra].concat());
    child.next("connected").await;
    child
}

/// Ctrl-C (which must exit 0), then every attempt it printed from `first` on.
async fn stop(tail: JsonChild, first: Vec<Value>) -> Vec<Value> {
    stop_printing(tail, first, "attempt").await
}

/// Ctrl-C (which must exit 0), then every line of type `kind` it printed from `first` on.
pub(crate) async fn stop_printing(
    mut tail: JsonChild,
    first: Vec<Value>,
    kind: &str,
) -> Vec<Value> {
    assert!(tail.interrupt(), "vow tail exits 0 on Ctrl-C");
    let mut all = first;
    all.extend(tail.rest(kind).await);
    all
}

/// The next `n` attempts `tail` prints.
async fn attempts(tail: &mut JsonChild, n: usize) -> Vec<Value> {
    let mut got = Vec::new();
    for _ in 0..n {
        got.push(tail.next("attempt").await);
    }
    got
}

/// An endpoint of `app` at `url`; its id.
async fn endpoint(base: &str, app: &str, url: &str) -> String {
    let path = format!("/api/v1/app/{app}/endpoint");
    let (status, ep) = call(base, Method::POST, &path, Some(json!({ "url": url }))).await;
    assert_eq!(status, 201, "{ep}");
    ep["id"].as_str().unwrap().to_string()
}

/// The ids of the attempts vow lists for `endpoint`, once there are `n` (at most 20 s).
async fn listed(base: &str, app: &str, endpoint: &str, n: usize) -> Vec<String> {
    let path = format!("/api/v1/app/{app}/attempt/endpoint/{endpoint}?limit=250");
    // The attempts are recorded asynchronously; this polls as an operator would.
    eventually(
        &format!("{n} attempts to {endpoint}"),
        OPERATOR,
        WAIT,
        || async {
            let (status, page) = call(base, Method::GET, &path, None).await;
            assert_eq!(status, 200, "{page}");
            let data = page["data"].as_array().unwrap();
            (data.len() >= n).then(|| {
                let mut ids: Vec<String> = data.iter().map(|a| text(&a["id"])).collect();
                ids.sort();
                ids
            })
        },
    )
    .await
}

pub(crate) fn text(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("{v} is no string"))
        .to_string()
}

/// The sorted ids of `lines` of `endpoint`, checking none is printed twice.
fn ids_of(lines: &[Value], endpoint: &str) -> Vec<String> {
    let mut ids: Vec<String> = lines
        .iter()
        .filter(|l| l["endpointId"] == endpoint)
        .map(|l| text(&l["id"]))
        .collect();
    let printed = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        printed,
        "an attempt was printed twice: {lines:?}"
    );
    ids
}

async fn tail_prints_each_attempt_the_receivers_got_once(postgres: bool) {
    let (url, _dir) = database(postgres).await;
    let vow = Vow::start(&url, ENV).await;
    let ok = Receiver::start(&[]).await;
    let failing = Receiver::start(&[500; 2 * N]).await;
    let app = create_app(&vow.base).await;
    let good = endpoint(&vow.base, &app, &ok.url).await;
    let bad = endpoint(&vow.base, &app, &failing.url).await;
    let other = create_app(&vow.base).await;
    let theirs = endpoint(&vow.base, &other, &ok.url).await;

    let mut everything = tail(&vow.base, &[]).await;
    let mut failures = tail(&vow.base, &["--app", &app, "--status", "fail"]).await;
    let mut others = tail(&vow.base, &["--app", &other]).await;
    let mut sent = Vec::new();
    for i in 0..N {
        let payload = format!(r#"{{"order": {i}}}"#);
        sent.push(send_raw(&vow.base, &app, "order.created", &payload).await);
    }
    let theirs_msg = send_raw(&vow.base, &other, "invoice.paid", "{}").await;

    assert_eq!(failing.wait_for(2 * N).await.len(), 2 * N);
    assert_eq!(
        ok.wait_for(N + 1).await.len(),
        N + 1,
        "N of app, 1 of other"
    );
    let good_ids = listed(&vow.base, &app, &good, N).await;
    let bad_ids = listed(&vow.base, &app, &bad, 2 * N).await;
    let theirs_ids = listed(&vow.base, &other, &theirs, 1).await;
    let first = attempts(&mut everything, 3 * N + 1).await;
    let first_failures = attempts(&mut failures, 2 * N).await;
    let first_others = attempts(&mut others, 1).await;
    tokio::time::sleep(QUIET).await;
    let all = stop(everything, first).await;
    let failed = stop(failures, first_failures).await;
    let of_other = stop(others, first_others).await;

    // Exactly what the receivers got and vow recorded, each once.
    assert_eq!(all.len(), 3 * N + 1, "{all:?}");
    assert_eq!(ids_of(&all, &good), good_ids);
    assert_eq!(ids_of(&all, &bad), bad_ids);
    assert_eq!(ids_of(&all, &theirs), theirs_ids);
    // `--status fail`: the 500s only; `--app`: that application's only.
    assert_eq!(failed.len(), 2 * N, "{failed:?}");
    assert_eq!(ids_of(&failed, &bad), bad_ids);
    assert_eq!(of_other.len(), 1, "{of_other:?}");
    assert_eq!(ids_of(&of_other, &theirs), theirs_ids);
    assert_eq!(of_other[0]["msgId"], theirs_msg.as_str());
    assert_eq!(of_other[0]["eventType"], "invoice.paid");

    // `--since` catches up on what was made before the tail started.
    let mut late = tail(&vow.base, &["--app", &app, "--since", "10m"]).await;
    let history = attempts(&mut late, 3 * N).await;
    assert!(late.interrupt());
    assert_eq!(ids_of(&history, &good), good_ids);
    assert_eq!(ids_of(&history, &bad), bad_ids);

    // Each delivery's attempts in order, each saying what happened.
    let mut deliveries: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
    for line in &all {
        let key = (text(&line["msgId"]), text(&line["endpointId"]));
        deliveries.entry(key).or_default().push(line);
    }
    for msg in &sent {
        let to_good = &deliveries[&(msg.clone(), good.clone())];
        assert_eq!(to_good.len(), 1, "{to_good:?}");
        let line = to_good[0];
        assert_eq!(
            (&line["appId"], &line["status"], &line["outcome"]),
            (&json!(app), &json!(200), &json!("success"))
        );
        assert_eq!(
            (&line["attempt"], &line["url"]),
            (&json!(1), &json!(ok.url))
        );
        assert_eq!(line["eventType"], "order.created");
        assert!(line["nextAttempt"].is_null(), "{line}");
        let to_bad = &deliveries[&(msg.clone(), bad.clone())];
        let numbers: Vec<&Value> = to_bad.iter().map(|l| &l["attempt"]).collect();
        assert_eq!(numbers, [&json!(1), &json!(2)], "{to_bad:?}");
        assert!(to_bad[0]["id"].as_str() < to_bad[1]["id"].as_str());
        for line in to_bad {
            assert_eq!(
                (&line["status"], &line["outcome"]),
                (&json!(500), &json!("fail"))
            );
            assert!(line["ms"].is_u64() && line["time"].is_string(), "{line}");
        }
        assert!(to_bad[0]["nextAttempt"].is_string(), "{:?}", to_bad[0]);
        assert!(
            to_bad[1]["nextAttempt"].is_null(),
            "dead-lettered: {:?}",
            to_bad[1]
        );
    }
}

async fn a_dropped_tail_resumes_where_it_was_printing_nothing_twice(postgres: bool) {
    let (url, _dir) = database(postgres).await;
    let vow = Vow::start(&url, &[]).await;
    let proxy = Proxy::start(&vow.base).await;
    let ok = Receiver::start(&[]).await;
    let app = create_app(&vow.base).await;
    let good = endpoint(&vow.base, &app, &ok.url).await;
    let mut following = tail(&proxy.url, &["--app", &app]).await;
    for i in 0..2 {
        send_raw(&vow.base, &app, "order.created", &format!(r#"{{"n":{i}}}"#)).await;
    }
    ok.wait_for(2).await;
    let mut printed = attempts(&mut following, 2).await;
    proxy.cut();
    for i in 2..4 {
        send_raw(&vow.base, &app, "order.created", &format!(r#"{{"n":{i}}}"#)).await;
    }
    ok.wait_for(4).await;
    let recorded = listed(&vow.base, &app, &good, 4).await;
    proxy.restore();
    // The resumed stream sends the last seconds again (the first two among them): the tail
    // prints only the two it has not.
    following.next("connected").await;
    printed.extend(attempts(&mut following, 2).await);
    tokio::time::sleep(QUIET).await;
    let printed = stop(following, printed).await;
    assert_eq!(printed.len(), 4, "{printed:?}");
    assert_eq!(ids_of(&printed, &good), recorded);
}

/// Runs `vow args…` to its end; its exit status and what it said on stderr.
pub(crate) fn run(args: &[&str]) -> (bool, String) {
    let config = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vow"))
        .args(args)
        .env_clear()
        .env("XDG_CONFIG_HOME", config.path())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn a_bad_flag_or_a_refused_token_exits_non_zero_saying_why(postgres: bool) {
    let (url, _dir) = database(postgres).await;
    let vow = Vow::start(&url, &[]).await;
    let target = ["--url", vow.base.as_str(), "--token", TOKEN];
    let tail = |extra: &[&str]| run(&[&["tail"][..], &target, extra].concat());

    let (ok, said) = tail(&["--status", "maybe"]);
    assert!(
        !ok && said.contains("--status") && said.contains("expected `fail` or `success`"),
        "{said}"
    );
    let (ok, said) = tail(&["--since", "yesterday"]);
    assert!(
        !ok && said.contains("--since") && said.contains("RFC 3339"),
        "{said}"
    );
    let (ok, said) = tail(&["--endpoint", "ep_2x0"]);
    assert!(!ok && said.contains("--app"), "{said}");
    let (ok, said) = tail(&["--app", "app_01JF0000000000000000000000"]);
    assert!(
        !ok && said.contains("404") && said.contains("Application not found"),
        "{said}"
    );
    let (ok, said) = run(&["tail", "--url", &vow.base, "--token", "not-the-token"]);
    assert!(!ok && said.contains("401"), "{said}");
    let unreachable = "http://127.0.0.1:9";
    let (ok, said) = run(&["tail", "--url", unreachable, "--token", TOKEN]);
    assert!(!ok && said.contains("cannot reach vow"), "{said}");
}
