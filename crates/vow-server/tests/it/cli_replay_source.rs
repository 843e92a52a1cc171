//! `vow replay --source` as a user runs it: the real binary against a real `vow serve` child on
//! SQLite and on PostgreSQL, replaying an inbound source's dead letters to its destination, a
//! real receiver that fails until it is switched to succeed. What the receiver got is counted
//! (requests and distinct `webhook-id`s), what stays dead-lettered is read back through the
//! API, and the printed summary must say the same counts. Another source's dead letters stay
//! dead. The API's refusals are checked here too, with nothing changed after them.

use chrono::{SecondsFormat, Utc};
use reqwest::Method;
use serde_json::{json, Value};

use crate::child::{database, Vow};
use crate::cli_client::{api, api_answer, cli, stderr, stdout};
use crate::cli_listen::{OPERATOR, WAIT};
use crate::cli_replay::{ids_received, json_out, sorted};
use crate::helpers::{eventually, TOKEN};
use crate::inbound::support::{github_signature, GITHUB_SECRET};
use crate::receiver::Receiver;

/// One attempt per forward: a 500 dead-letters it at once.
const ENV: &[(&str, &str)] = &[("VOW_RETRY_SCHEDULE", "none")];

on_both_child_stores!(
    replay_source_delivers_each_dead_letter_once_and_says_the_true_counts,
    replay_source_refuses_bad_input_and_changes_nothing,
);

/// A GitHub source forwarding to `receiver`; its id.
async fn source_to(vow: &Vow, receiver: &Receiver) -> String {
    let body = json!({
        "scheme": "github",
        "secrets": [GITHUB_SECRET],
        "destinations": [{"url": receiver.url, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}],
    });
    let source = api(vow, Method::POST, "/api/v1/source", Some(body)).await;
    source["id"].as_str().unwrap().to_string()
}

/// A signed GitHub delivery `n` to `source`, stored as a new event.
async fn deliver(vow: &Vow, source: &str, n: usize) {
    let body = format!(r#"{{"n":{n}}}"#);
    let answer = reqwest::Client::new()
        .post(format!("{}/in/{source}", vow.base))
        .header("content-type", "application/json")
        .header(
            "x-hub-signature-256",
            github_signature(GITHUB_SECRET, body.as_bytes()),
        )
        .header("x-github-event", "push")
        .header("x-github-hook-id", "42")
        .header("x-github-delivery", format!("delivery-{n}"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
}

/// The ids of `source`'s events in `state`.
async fn events_in(vow: &Vow, source: &str, state: &str) -> Vec<String> {
    let path = format!("/api/v1/source/{source}/event?state={state}&limit=100");
    let list = api(vow, Method::GET, &path, None).await;
    let ids = list["data"].as_array().unwrap().iter();
    sorted(ids.map(|e| e["id"].as_str().unwrap().to_string()).collect())
}

/// Waits until `source` has `n` dead-lettered events (at most 20 s); their ids.
async fn dead(vow: &Vow, source: &str, n: usize) -> Vec<String> {
    // Outcomes are recorded asynchronously, after the receiver answered.
    eventually("the events are dead-lettered", OPERATOR, WAIT, || async {
        let ids = events_in(vow, source, "dead_lettered").await;
        (ids.len() == n).then_some(ids)
    })
    .await
}

/// Runs `vow replay --source source --url … --token …` and `more` to the end.
async fn replay(vow: &Vow, source: &str, more: &[&str]) -> std::process::Output {
    let config = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = vec!["replay", "--source", source, "--url", &vow.base];
    args.extend(["--token", TOKEN]);
    args.extend_from_slice(more);
    cli(config.path(), &args, b"").await
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true)
}

async fn replay_source_delivers_each_dead_letter_once_and_says_the_true_counts(postgres: bool) {
    let (db, _dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    let (receiver, elsewhere) = (Receiver::start(&[]).await, Receiver::start(&[]).await);
    receiver.answer_status(Some(500));
    elsewhere.answer_status(Some(500));
    let source = source_to(&vow, &receiver).await;
    let other = source_to(&vow, &elsewhere).await;
    deliver(&vow, &source, 1).await;
    deliver(&vow, &source, 2).await;
    let between = now();
    deliver(&vow, &source, 3).await;
    deliver(&vow, &other, 1).await;
    receiver.wait_for(3).await;
    let all = dead(&vow, &source, 3).await;
    let first_round = sorted(ids_received(&receiver, 0));
    assert_eq!(first_round.len(), 3);
    dead(&vow, &other, 1).await;

    // Dry runs count truly, by received time too, and change nothing.
    let out = replay(&vow, &source, &["--dry-run"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("dry run: 3 dead letters of {source} would be replayed; nothing was changed.\n")
    );
    let counted = |more: &'static [&'static str]| {
        let (vow, source) = (&vow, &source);
        async move { json_out(&replay(vow, source, more).await) }
    };
    assert_eq!(
        counted(&["--dry-run", "-o", "json"]).await,
        json!({"dryRun": true, "count": 3, "skipped": 0})
    );
    let until = replay(
        &vow,
        &source,
        &["--until", &between, "--dry-run", "-o", "json"],
    )
    .await;
    assert_eq!(json_out(&until)["count"], 2);
    let since = replay(
        &vow,
        &source,
        &["--since", &between, "--dry-run", "-o", "json"],
    )
    .await;
    assert_eq!(json_out(&since)["count"], 1);
    assert_eq!(events_in(&vow, &source, "dead_lettered").await, all);
    assert_eq!(receiver.received().len(), 3, "nothing was sent again");

    // The receiver is back. The last one first, by time, followed to the end.
    receiver.answer_status(None);
    let out = replay(&vow, &source, &["--since", &between, "-o", "json"]).await;
    let summary = json_out(&out);
    assert!(
        summary["replayId"].as_str().unwrap().starts_with("rpl_"),
        "{summary}"
    );
    let want = json!({"requeued": 1, "delivered": 1, "failed": 0, "pending": 0, "sending": 0,
        "skipped": 0, "finished": true});
    for (key, value) in want.as_object().unwrap() {
        assert_eq!(&summary[key], value, "{key} in {summary}");
    }
    assert_eq!(ids_received(&receiver, 3).len(), 1);

    // Then the rest, with the plain progress lines and a summary of the true counts.
    let out = replay(&vow, &source, &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("replayed 2 dead letters of {source} (rpl_"))
            && last.contains("): 2 delivered, 0 failed, 0 waiting in "),
        "{text}"
    );
    let progress = stderr(&out);
    assert!(progress.lines().count() >= 1, "{progress:?}");
    for line in progress.lines() {
        assert!(line.starts_with("requeued 2  delivered "), "{progress:?}");
    }
    let again = ids_received(&receiver, 3);
    assert_eq!(again.len(), 3, "one request per dead letter: {again:?}");
    assert_eq!(sorted(again), first_round, "each event once");
    assert_eq!(events_in(&vow, &source, "completed").await, all);
    assert_eq!(
        counted(&["--dry-run", "-o", "json"]).await["count"],
        0,
        "nothing is left to replay"
    );

    // The other source's dead letter stayed dead, and its destination heard nothing more.
    assert_eq!(dead(&vow, &other, 1).await.len(), 1);
    assert_eq!(elsewhere.received().len(), 1);
    assert_eq!(receiver.received().len(), 6);
}

async fn replay_source_refuses_bad_input_and_changes_nothing(postgres: bool) {
    let (db, _dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    let receiver = Receiver::start(&[]).await;
    receiver.answer_status(Some(500));
    let source = source_to(&vow, &receiver).await;
    deliver(&vow, &source, 1).await;
    let all = dead(&vow, &source, 1).await;

    // The CLI: one target, and the flags of the other refused.
    for (args, says) in [
        (
            &["--app", "shop", "--endpoint", "orders"][..],
            "cannot be used with",
        ),
        (&["--event-type", "a.b"][..], "cannot be used with"),
        (
            &["--since", "1h", "--until", "2h"][..],
            "must be before --until",
        ),
    ] {
        let out = replay(&vow, &source, args).await;
        assert!(!out.status.success(), "{args:?}: {}", stdout(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    let config = tempfile::tempdir().unwrap();
    let alone: [&str; 7] = [
        "replay",
        "--destination",
        "dst_x",
        "--url",
        &vow.base,
        "--token",
        TOKEN,
    ];
    let out = cli(config.path(), &alone, b"").await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--source"), "{}", stderr(&out));

    // The API: a precise 4xx for each.
    let path = format!("/api/v1/source/{source}/replay");
    let (status, body) = api_answer(
        &vow,
        Method::POST,
        &path,
        Some(json!({"since": "2026-12-02T10:00:00Z", "until": "2026-12-01T10:00:00Z"})),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["detail"][0]["loc"], json!(["body", "until"]), "{body}");
    let unknown_destination = json!({"destination": "dst_00000000000000000000000000"});
    let (status, body) = api_answer(&vow, Method::POST, &path, Some(unknown_destination)).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "destination"]),
        "{body}"
    );
    assert!(
        body.to_string()
            .contains("is not a destination of this source"),
        "{body}"
    );
    let (status, body) =
        api_answer(&vow, Method::POST, &path, Some(json!({"destination": 7}))).await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = api_answer(&vow, Method::POST, &path, Some(json!({"bogus": true}))).await;
    assert_eq!(status, 422, "{body}");
    let nowhere = "/api/v1/source/src_00000000000000000000000000/replay";
    let (status, body) = api_answer(&vow, Method::POST, nowhere, None).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = api_answer(
        &vow,
        Method::GET,
        &format!("{nowhere}/rpl_00000000000000000000000000"),
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = api_answer(&vow, Method::GET, &format!("{path}/nope"), None).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["path", "replay_id"]),
        "{body}"
    );

    // Nothing was replayed by any of them.
    assert_eq!(events_in(&vow, &source, "dead_lettered").await, all);
    assert_eq!(receiver.received().len(), 1);

    // The same Idempotency-Key twice is one replay: the same answer, one more request.
    let keyed = async || {
        let answer = reqwest::Client::new()
            .post(format!("{}{path}", vow.base))
            .bearer_auth(TOKEN)
            .header("idempotency-key", "replay-once")
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        answer.json::<Value>().await.unwrap()
    };
    let first = keyed().await;
    assert_eq!(first["count"], 1, "{first}");
    receiver.wait_for(2).await;
    dead(&vow, &source, 1).await;
    assert_eq!(keyed().await, first);
    let id = first["id"].as_str().unwrap();
    let stats = api(&vow, Method::GET, &format!("{path}/{id}"), None).await;
    assert_eq!(
        stats,
        json!({"completed": 0, "pending": 0, "processing": 0, "rejected": 0,
            "deadLettered": 1, "uncertain": 0})
    );
    assert_eq!(receiver.received().len(), 2, "replayed once");
}
