//! `vow replay` as a user runs it: the real binary against a real `vow serve` child on SQLite
//! and on PostgreSQL, replaying dead letters to a real receiver that fails until it is switched
//! to succeed. What the receiver got is counted (requests and distinct message ids), what
//! stays dead-lettered is read back through the API, and the printed summary must say the
//! same counts.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::child::{database, Vow};
use crate::cli_client::{api, app_with_endpoint, cli, stderr, stdout};
use crate::cli_listen::{OPERATOR, WAIT};
use crate::helpers::eventually;
use crate::helpers::TOKEN;
use crate::receiver::Receiver;

/// One attempt per delivery (a 500 dead-letters it at once), and no auto-disabling, so a test
/// makes dead letters as fast as the receiver answers.
const ENV: &[(&str, &str)] = &[
    ("VOW_RETRY_SCHEDULE", "none"),
    ("VOW_DISABLE_AFTER_DEAD_LETTERS", "0"),
];

on_both_child_stores!(
    replay_delivers_each_matching_dead_letter_once_and_says_the_true_counts,
    replay_refuses_bad_input_with_a_clear_error,
    no_wait_requeues_and_leaves_the_deliveries_to_vow,
    ctrl_c_stops_following_and_the_replay_goes_on,
);

/// A child, an app `shop` with an endpoint `orders` at `receiver` (failing), and `created`
/// messages of `order.created` and `paid` of `order.paid`, all dead-lettered; the app and
/// endpoint ids, and the message ids by type.
struct DeadLetters {
    vow: Vow,
    _db: Option<tempfile::TempDir>,
    app: String,
    endpoint: String,
    created: Vec<String>,
    paid: Vec<String>,
}

async fn dead_letters(
    postgres: bool,
    receiver: &Receiver,
    created: usize,
    paid: usize,
) -> DeadLetters {
    let (db, dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    receiver.answer_status(Some(500));
    let (app, endpoint, _) = app_with_endpoint(&vow, receiver).await;
    let path = format!("/api/v1/app/{app}/endpoint/{endpoint}");
    api(&vow, Method::PATCH, &path, Some(json!({"uid": "orders"}))).await;
    let send = async |event_type: &str, n: usize| {
        let mut ids = Vec::new();
        for i in 0..n {
            let body = json!({"eventType": event_type, "payload": {"n": i}});
            let msg = api(
                &vow,
                Method::POST,
                &format!("/api/v1/app/{app}/msg"),
                Some(body),
            )
            .await;
            ids.push(msg["id"].as_str().unwrap().to_string());
        }
        ids
    };
    let created = send("order.created", created).await;
    let paid = send("order.paid", paid).await;
    let all = created.len() + paid.len();
    receiver.wait_for(all).await;
    let dead = stats_when(&vow, &app, &endpoint, |s| s["fail"] == all).await;
    assert_eq!(dead["pending"], 0, "{dead}");
    DeadLetters {
        vow,
        _db: dir,
        app,
        endpoint,
        created,
        paid,
    }
}

/// The endpoint's stats once `done` holds of them (at most 20 s).
async fn stats_when(vow: &Vow, app: &str, endpoint: &str, done: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/api/v1/app/{app}/endpoint/{endpoint}/stats");
    // Outcomes are recorded asynchronously, after the receiver answered.
    eventually("the endpoint's stats get there", OPERATOR, WAIT, || async {
        let stats = api(vow, Method::GET, &path, None).await;
        done(&stats).then_some(stats)
    })
    .await
}

/// `vow replay --app shop --endpoint orders --url … --token …` and `more`.
fn replay_args<'a>(vow: &'a Vow, more: &[&'a str]) -> Vec<&'a str> {
    let target: [&str; 4] = ["--url", &vow.base, "--token", TOKEN];
    let mut args = vec!["replay", "--app", "shop", "--endpoint", "orders"];
    args.extend_from_slice(&target);
    args.extend_from_slice(more);
    args
}

/// Runs [`replay_args`] to the end.
async fn replay(vow: &Vow, more: &[&str]) -> std::process::Output {
    let config = tempfile::tempdir().unwrap();
    cli(config.path(), &replay_args(vow, more), b"").await
}

/// The one JSON line `--output json` printed.
pub(crate) fn json_out(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    let text = stdout(out);
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// The `webhook-id`s (message or inbound event ids) of the requests the receiver got from the `from`th on.
pub(crate) fn ids_received(receiver: &Receiver, from: usize) -> Vec<String> {
    receiver.received()[from..]
        .iter()
        .map(|r| r.header("webhook-id").to_string())
        .collect()
}

pub(crate) fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

async fn replay_delivers_each_matching_dead_letter_once_and_says_the_true_counts(postgres: bool) {
    let receiver = Receiver::start(&[]).await;
    let d = dead_letters(postgres, &receiver, 4, 2).await;
    let (vow, app, endpoint) = (&d.vow, &d.app, &d.endpoint);

    // A dry run counts and changes nothing.
    let out = replay(vow, &["--event-type", "order.created", "--dry-run"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "dry run: 4 dead letters of orders would be replayed; nothing was changed.\n"
    );
    let out = replay(vow, &["--dry-run", "-o", "json"]).await;
    let counted = json_out(&out);
    assert_eq!(counted, json!({"dryRun": true, "count": 6}));
    let stats = stats_when(vow, app, endpoint, |_| true).await;
    assert_eq!(
        (&stats["fail"], &stats["pending"]),
        (&json!(6), &json!(0)),
        "{stats}"
    );
    assert_eq!(receiver.received().len(), 6, "nothing was sent again");

    // Replayed while the receiver still fails: each is tried once more and fails for good.
    let out = replay(vow, &["--event-type", "order.paid", "-o", "json"]).await;
    let summary = json_out(&out);
    assert!(
        summary["replayId"].as_str().unwrap().starts_with("rpl_"),
        "{summary}"
    );
    let failed = json!({"requeued": 2, "delivered": 0, "failed": 2, "pending": 0, "sending": 0});
    for (key, value) in failed.as_object().unwrap() {
        assert_eq!(&summary[key], value, "{key} in {summary}");
    }
    assert_eq!(summary["finished"], true);
    assert_eq!(sorted(ids_received(&receiver, 6)), sorted(d.paid.clone()));

    // The receiver is back: the created ones arrive, each exactly once, and the summary says so.
    receiver.answer_status(None);
    let out = replay(vow, &["--event-type", "order.created"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let got = ids_received(&receiver, 8);
    assert_eq!(got.len(), 4, "one request per dead letter: {got:?}");
    assert_eq!(sorted(got), sorted(d.created.clone()), "each message once");
    let text = stdout(&out);
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("replayed 4 dead letters to orders (rpl_")
            && last.contains("): 4 delivered, 0 failed, 0 waiting in "),
        "{text}"
    );
    // Not a terminal: plain progress lines, no control characters anywhere.
    let progress = stderr(&out);
    assert!(progress.lines().count() >= 1, "{progress:?}");
    for line in progress.lines() {
        assert!(line.starts_with("requeued 4  delivered "), "{progress:?}");
    }
    for printed in [&text, &progress] {
        assert!(!printed.contains(['\x1b', '\r']), "{printed:?}");
    }

    // The paid ones stay dead letters; the created ones are delivered.
    let stats = stats_when(vow, app, endpoint, |_| true).await;
    assert_eq!(
        (&stats["success"], &stats["fail"]),
        (&json!(4), &json!(2)),
        "{stats}"
    );
    let out = replay(vow, &["--dry-run", "-o", "json"]).await;
    assert_eq!(json_out(&out), json!({"dryRun": true, "count": 2}));
    assert_eq!(receiver.received().len(), 12);
}

async fn replay_refuses_bad_input_with_a_clear_error(postgres: bool) {
    let receiver = Receiver::start(&[]).await;
    let d = dead_letters(postgres, &receiver, 1, 0).await;
    let vow = &d.vow;
    let refused = async |args: &[&str], says: &str| {
        let out = replay(vow, args).await;
        assert!(!out.status.success(), "{args:?}: {}", stdout(&out));
        let text = stderr(&out);
        assert!(text.contains(says), "{args:?}: {text}");
    };
    refused(
        &["--since", "yesterday"],
        "--since \"yesterday\" is not a time",
    )
    .await;
    refused(
        &["--since", "1h", "--until", "2h"],
        "must be before --until",
    )
    .await;
    refused(&["--event-type", "not a name!"], "eventTypes").await;
    refused(&["--bogus"], "unexpected argument '--bogus'").await;
    let config = tempfile::tempdir().unwrap();
    let base: [&str; 5] = ["replay", "--url", &vow.base, "--app", "shop"];
    let without_token = [&base[..], &["--endpoint", "nope"][..]].concat();
    let out = cli(config.path(), &without_token, b"").await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no token"), "{}", stderr(&out));
    let with_token = [&base[..], &["--token", TOKEN, "--endpoint", "nope"][..]].concat();
    let out = cli(config.path(), &with_token, b"").await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Endpoint not found"),
        "{}",
        stderr(&out)
    );
    let stats = stats_when(vow, &d.app, &d.endpoint, |_| true).await;
    assert_eq!(
        (&stats["fail"], &stats["pending"]),
        (&json!(1), &json!(0)),
        "nothing replayed"
    );
    assert_eq!(receiver.received().len(), 1);
}

async fn no_wait_requeues_and_leaves_the_deliveries_to_vow(postgres: bool) {
    let receiver = Receiver::start(&[]).await;
    let d = dead_letters(postgres, &receiver, 2, 0).await;
    receiver.answer_status(None);
    let out = replay(&d.vow, &["--no-wait", "-o", "json"]).await;
    let summary = json_out(&out);
    assert_eq!(
        (&summary["requeued"], &summary["finished"]),
        (&json!(2), &json!(false))
    );
    assert!(
        summary["replayId"].as_str().unwrap().starts_with("rpl_"),
        "{summary}"
    );
    assert_eq!(stderr(&out), "", "no progress when not following");
    let stats = stats_when(&d.vow, &d.app, &d.endpoint, |s| s["success"] == 2).await;
    assert_eq!(stats["fail"], 0, "{stats}");
    assert_eq!(
        sorted(ids_received(&receiver, 2)),
        sorted(d.created.clone())
    );
}

async fn ctrl_c_stops_following_and_the_replay_goes_on(postgres: bool) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let receiver = Receiver::start(&[]).await;
    let d = dead_letters(postgres, &receiver, 1, 0).await;
    receiver.answer_status(None);
    // Slow on purpose: the replayed delivery is still being sent when Ctrl-C comes.
    receiver.answer_after(Duration::from_secs(3));
    let config = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_vow"))
        .args(replay_args(&d.vow, &[]))
        .env_clear()
        .env("XDG_CONFIG_HOME", config.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut progress = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(10), progress.next_line()).await;
    let first = first
        .expect("a first progress line")
        .unwrap()
        .unwrap_or_default();
    assert!(
        first.starts_with("requeued 1  delivered 0  failed 0  waiting 1"),
        "{first}"
    );
    let pid = child.id().unwrap().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().await.unwrap();
    let mut rest = Vec::new();
    while let Some(line) = progress.next_line().await.unwrap() {
        rest.push(line);
    }
    assert!(out.status.success(), "{rest:?}");
    assert!(
        rest.iter()
            .any(|l| l.starts_with("Stopped following; the replay continues in vow.")),
        "{rest:?}"
    );
    let text = stdout(&out);
    assert!(
        text.contains("): 0 delivered, 0 failed, 1 waiting in "),
        "{text}"
    );
    let stats = stats_when(&d.vow, &d.app, &d.endpoint, |s| s["success"] == 1).await;
    assert_eq!(stats["pending"], 0, "{stats}");
    assert_eq!(ids_received(&receiver, 1), d.created);
}
