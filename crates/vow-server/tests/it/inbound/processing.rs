//! Processing inbound events (issue 5, items 6-8) on both stores: forwarding the exact bytes,
//! signed with each destination's secret, exactly once per destination; outcomes from the
//! destinations' answers (and their `vow-outcome` header); timeouts and dead workers left
//! `uncertain` for an operator, or retried for an idempotent destination; replay; pull mode;
//! ordering by version. Every case counts the requests destinations received and reads the
//! stored rows.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use serde_json::{json, Value};
use vow_core::{DestinationId, InboundEventId, SourceId};
use vow_store::inbound::processing::{Consumer, Outcome, WorkRequest};
use vow_store::inbound::{InboundEvent, InboundState, StoredInbound};

use super::support::*;
use crate::helpers::{delivery_config, TestApp};
use crate::receiver::{standard_signature_ok, Receiver};

on_both_stores!(
    an_event_is_forwarded_once_with_its_bytes_and_the_destinations_signature,
    fifty_concurrent_deliveries_are_stored_once_and_forwarded_once_per_destination,
    each_destination_gets_its_own_outcome_and_replay_sends_it_again,
    a_destination_can_classify_its_answer_with_vow_outcome,
    a_timeout_after_sending_is_uncertain_unless_the_destination_is_idempotent,
    a_worker_that_died_after_forwarding_leaves_the_event_uncertain,
    pull_mode_claims_completes_and_fails_through_the_api,
    older_versions_of_an_entity_are_superseded_and_not_forwarded,
);

const DESTINATION_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A GitHub source forwarding to `destinations` (`{url, idempotent}` objects; each signed
/// with [`DESTINATION_SECRET`]); their ids, in order.
async fn forwarding_source(
    app: &TestApp,
    destinations: &[(&str, bool)],
    extra: Value,
) -> (SourceId, Vec<DestinationId>) {
    let list: Vec<Value> = destinations
        .iter()
        .map(|(url, idempotent)| json!({"url": url, "secret": DESTINATION_SECRET, "idempotent": idempotent}))
        .collect();
    let mut body = json!({"scheme": "github", "secrets": [GITHUB_SECRET], "destinations": list});
    if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
        body.extend(extra);
    }
    let (status, out) = app.post("/api/v1/source", body).await;
    assert_eq!(status, 201, "{out}");
    let source = SourceId::parse(out["id"].as_str().unwrap()).unwrap();
    let ids = out["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| DestinationId::parse(d["id"].as_str().unwrap()).unwrap())
        .collect();
    (source, ids)
}

/// Delivers a GitHub event and returns the stored event's id.
pub(super) async fn received(
    app: &TestApp,
    source: SourceId,
    delivery: &str,
    body: &[u8],
) -> InboundEventId {
    let (status, out) = github_delivery(app, source, Some(delivery), body).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("received")),
        "{out}"
    );
    InboundEventId::parse(out["id"].as_str().unwrap()).unwrap()
}

pub(super) async fn stored(app: &TestApp, source: SourceId, id: InboundEventId) -> StoredInbound {
    app.inbound
        .get_inbound_event(source, id)
        .await
        .unwrap()
        .unwrap()
}

/// The outcome recorded for `destination`.
fn outcome_at(stored: &StoredInbound, destination: DestinationId) -> Outcome {
    let forward = stored
        .forwards
        .iter()
        .find(|f| f.destination == Some(destination));
    forward.expect("a forward to that destination").outcome
}

/// Polls until `id` is in `state` (at most 10 s).
async fn wait_for_state(
    app: &TestApp,
    source: SourceId,
    id: InboundEventId,
    state: InboundState,
) -> InboundEvent {
    for _ in 0..200 {
        let event = stored(app, source, id).await.event;
        if event.state == state {
            return event;
        }
        // The poll interval of a wait for a durable condition, bounded by the loop.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{id} never reached {}: {:?}",
        state.as_str(),
        stored(app, source, id).await.event
    )
}

async fn an_event_is_forwarded_once_with_its_bytes_and_the_destinations_signature(app: TestApp) {
    let config = delivery_config("1s", &[]);
    let app = TestApp::spawn_with(app.backend, config.clone()).await;
    let destination = Receiver::start(&[]).await;
    let (source, dests) = forwarding_source(&app, &[(&destination.url, false)], json!({})).await;
    let body = br#"{"ref":"refs/heads/main",  "after":"abc"}"#;
    let id = received(&app, source, "d-1", body).await;

    let got = destination.wait_for(1).await;
    let event = wait_for_state(&app, source, id, InboundState::Completed).await;
    assert_eq!(event.attempts, 1);
    let r = &got[0];
    assert_eq!(&r.body[..], &body[..], "the exact bytes");
    assert_eq!(r.header("webhook-id"), id.to_string());
    assert_eq!(r.header("vow-source"), source.to_string());
    assert_eq!(r.header("vow-event-id"), "d-1");
    assert_eq!(
        r.header("x-github-event"),
        "push",
        "the provider's headers go along"
    );
    assert_eq!(
        r.header("x-hub-signature-256"),
        "",
        "never the provider's signature"
    );
    assert!(
        standard_signature_ok(r, DESTINATION_SECRET),
        "signed with the destination's secret"
    );
    let full = stored(&app, source, id).await;
    assert_eq!(outcome_at(&full, dests[0]), Outcome::Completed);
    assert_eq!(full.forwards[0].status, Some(200));
    assert_eq!(
        app.forward_at(&config, Utc::now()).await,
        0,
        "nothing is due again"
    );
    assert_eq!(full.event.attempts, 1, "claimed once");
    assert_eq!(destination.received().len(), 1, "forwarded once");
}

async fn fifty_concurrent_deliveries_are_stored_once_and_forwarded_once_per_destination(
    app: TestApp,
) {
    let config = delivery_config("1s", &[]);
    let app = TestApp::spawn_with(app.backend, config.clone()).await;
    let (a, b) = (Receiver::start(&[]).await, Receiver::start(&[]).await);
    let (source, _) = forwarding_source(&app, &[(&a.url, false), (&b.url, true)], json!({})).await;
    let body = br#"{"action":"opened","number":7}"#;
    let answers = concurrent_github_deliveries(&app, source, "same-delivery", body, 50).await;
    assert!(
        answers.iter().all(|(status, _)| *status == 200),
        "{answers:?}"
    );
    let events = stored_events(&app, source, None).await;
    assert_eq!(events.len(), 1, "one stored row");
    assert_eq!(events[0].duplicates, 49);
    let event = wait_for_state(&app, source, events[0].id, InboundState::Completed).await;
    assert_eq!(
        app.forward_at(&config, Utc::now()).await,
        0,
        "nothing is due again"
    );
    assert_eq!(event.attempts, 1, "claimed once");
    assert_eq!(
        (a.received().len(), b.received().len()),
        (1, 1),
        "one forward per destination"
    );
}

async fn each_destination_gets_its_own_outcome_and_replay_sends_it_again(app: TestApp) {
    let config = delivery_config("1m", &[]);
    let flaky = Receiver::start(&[500]).await;
    let refusing = Receiver::start(&[422]).await;
    let (source, dests) = forwarding_source(
        &app,
        &[(&flaky.url, false), (&refusing.url, false)],
        json!({}),
    )
    .await;
    let id = received(&app, source, "d-1", b"{}").await;

    assert_eq!(app.forward_at(&config, Utc::now()).await, 1);
    let first = stored(&app, source, id).await;
    assert_eq!(first.event.state, InboundState::Retryable);
    assert_eq!(
        (outcome_at(&first, dests[0]), outcome_at(&first, dests[1])),
        (Outcome::Retryable, Outcome::Rejected)
    );
    assert!(first
        .event
        .last_error
        .unwrap_or_default()
        .contains("HTTP 500"));
    let due = first.event.next_attempt_at.unwrap();
    assert!(
        due > Utc::now() + chrono::Duration::seconds(25),
        "after the 1m schedule's jittered delay: {due}"
    );

    assert_eq!(app.forward_at(&config, due).await, 1);
    let second = stored(&app, source, id).await;
    assert_eq!(
        second.event.state,
        InboundState::Rejected,
        "completed at one, rejected at the other"
    );
    assert_eq!(
        (flaky.received().len(), refusing.received().len()),
        (2, 1),
        "the retry went only where it was owed"
    );

    let (status, out) = app
        .post(
            &format!("/api/v1/source/{source}/event/{id}/replay"),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("retryable")),
        "{out}"
    );
    assert_eq!(app.forward_at(&config, Utc::now()).await, 1);
    let third = stored(&app, source, id).await;
    assert_eq!(third.event.state, InboundState::Completed);
    assert_eq!((flaky.received().len(), refusing.received().len()), (2, 2));
    let (status, out) = app
        .post(
            &format!("/api/v1/source/{source}/event/{id}/replay"),
            json!({}),
        )
        .await;
    assert_eq!(status, 409, "a completed event is not replayed: {out}");

    // Out of attempts: dead-lettered, and listed as such.
    let down = Receiver::start(&[503, 503]).await;
    let (source, _) = forwarding_source(&app, &[(&down.url, false)], json!({})).await;
    let id = received(&app, source, "d-2", b"{}").await;
    let once = delivery_config("none", &[]);
    assert_eq!(app.forward_at(&once, Utc::now()).await, 1);
    assert_eq!(
        stored(&app, source, id).await.event.state,
        InboundState::DeadLettered
    );
    let (status, page) = app
        .get(&format!(
            "/api/v1/source/{source}/event?state=dead_lettered"
        ))
        .await;
    assert_eq!(
        (status, page["data"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{page}"
    );
    let (status, one) = app
        .get(&format!("/api/v1/source/{source}/event/{id}"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(one["forwards"][0]["outcome"], "dead_lettered", "{one}");
    assert_eq!(one["forwards"][0]["status"], 503, "{one}");
}

async fn a_destination_can_classify_its_answer_with_vow_outcome(app: TestApp) {
    let config = delivery_config("1m", &[]);
    let destination = Receiver::start(&[500]).await;
    destination.answer_with_header("vow-outcome", "rejected");
    let (source, dests) = forwarding_source(&app, &[(&destination.url, false)], json!({})).await;
    let id = received(&app, source, "d-1", b"{}").await;
    app.forward_at(&config, Utc::now()).await;
    let full = stored(&app, source, id).await;
    assert_eq!(
        (full.event.state, outcome_at(&full, dests[0])),
        (InboundState::Rejected, Outcome::Rejected)
    );

    destination.answer_with_header("vow-outcome", "uncertain");
    let id = received(&app, source, "d-2", b"{\"n\":2}").await;
    app.forward_at(&config, Utc::now()).await;
    assert_eq!(
        stored(&app, source, id).await.event.state,
        InboundState::Uncertain,
        "even with a 200"
    );
}

async fn a_timeout_after_sending_is_uncertain_unless_the_destination_is_idempotent(app: TestApp) {
    // delivery_config times attempts out after 1 s.
    let config = delivery_config("1m", &[]);
    let (slow, slow_idempotent) = (Receiver::start(&[]).await, Receiver::start(&[]).await);
    slow.answer_after(Duration::from_secs(3));
    slow_idempotent.answer_after(Duration::from_secs(3));
    let (source, dests) = forwarding_source(
        &app,
        &[(&slow.url, false), (&slow_idempotent.url, true)],
        json!({}),
    )
    .await;
    let id = received(&app, source, "d-1", b"{}").await;
    app.forward_at(&config, Utc::now()).await;
    let full = stored(&app, source, id).await;
    assert_eq!(
        (outcome_at(&full, dests[0]), outcome_at(&full, dests[1])),
        (Outcome::Uncertain, Outcome::Retryable)
    );
    assert_eq!(
        full.event.state,
        InboundState::Retryable,
        "the idempotent one is retried"
    );

    // Reconciliation: the idempotent retry succeeds; an operator decides the other.
    slow_idempotent.answer_after(Duration::ZERO);
    app.forward_at(&config, full.event.next_attempt_at.unwrap())
        .await;
    assert_eq!(
        stored(&app, source, id).await.event.state,
        InboundState::Uncertain
    );
    assert_eq!(
        slow.received().len(),
        1,
        "an uncertain forward is never repeated on its own"
    );
    let path = format!("/api/v1/source/{source}/event/{id}/resolve");
    let (status, out) = app.post(&path, json!({"outcome": "maybe"})).await;
    assert_eq!(status, 422, "{out}");
    slow.answer_after(Duration::ZERO);
    let (status, out) = app.post(&path, json!({"outcome": "retry"})).await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("retryable")),
        "{out}"
    );
    app.forward_at(&config, Utc::now()).await;
    assert_eq!(
        stored(&app, source, id).await.event.state,
        InboundState::Completed
    );
    assert_eq!(
        (slow.received().len(), slow_idempotent.received().len()),
        (2, 2)
    );
    let (status, _) = app.post(&path, json!({"outcome": "completed"})).await;
    assert_eq!(status, 409, "only an uncertain event is resolved");
}

async fn a_worker_that_died_after_forwarding_leaves_the_event_uncertain(app: TestApp) {
    let config = delivery_config("1m", &[]);
    let (plain, idempotent) = (Receiver::start(&[]).await, Receiver::start(&[]).await);
    let (source, dests) = forwarding_source(
        &app,
        &[(&plain.url, false), (&idempotent.url, true)],
        json!({}),
    )
    .await;
    let id = received(&app, source, "d-1", b"{}").await;
    // A worker claims the event with a short lease, forwards it, and dies before recording.
    let now = Utc::now();
    let request = WorkRequest {
        now,
        lease: chrono::Duration::seconds(5),
        limit: 10,
        consumer: Consumer::Push,
        max_attempts: 8,
    };
    let claimed = app
        .inbound
        .claim_inbound_work(&request)
        .await
        .unwrap()
        .claimed;
    assert_eq!(claimed.len(), 1);
    let dead_worker_sends = reqwest::Client::new()
        .post(&plain.url)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(dead_worker_sends.status(), 200);
    assert_eq!(
        app.forward_at(&config, now + chrono::Duration::seconds(3))
            .await,
        0,
        "still leased"
    );

    // Once the lease has run out, the next claim settles it: uncertain where it may have
    // arrived, a safe retry at the idempotent destination.
    app.forward_at(&config, now + chrono::Duration::seconds(6))
        .await;
    let full = stored(&app, source, id).await;
    assert_eq!(full.event.state, InboundState::Uncertain);
    assert_eq!(
        (outcome_at(&full, dests[0]), outcome_at(&full, dests[1])),
        (Outcome::Uncertain, Outcome::Completed)
    );
    assert_eq!(
        (plain.received().len(), idempotent.received().len()),
        (1, 1),
        "nothing sent twice"
    );
    let (status, out) = app
        .post(
            &format!("/api/v1/source/{source}/event/{id}/resolve"),
            json!({"outcome": "completed"}),
        )
        .await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("completed")),
        "{out}"
    );
    assert_eq!(plain.received().len(), 1);
}

async fn pull_mode_claims_completes_and_fails_through_the_api(app: TestApp) {
    let source = github_source(&app).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(
            received(
                &app,
                source,
                &format!("d-{n}"),
                format!("{{\"n\":{n}}}").as_bytes(),
            )
            .await,
        );
    }
    let claim = format!("/api/v1/source/{source}/event/claim");
    let (status, out) = app.post(&claim, json!({"limit": 0})).await;
    assert_eq!(status, 422, "{out}");
    let (status, out) = app
        .post(&claim, json!({"limit": 2, "leaseSeconds": 30}))
        .await;
    assert_eq!(status, 200, "{out}");
    let data = out["data"].as_array().unwrap();
    let claimed: Vec<&str> = data.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(
        claimed,
        vec![ids[0].to_string(), ids[1].to_string()],
        "oldest first"
    );
    assert_eq!(data[0]["payload"], "{\"n\":0}");
    assert_eq!(data[0]["state"], "processing");
    let lease = |i: usize| data[i]["lease"].as_str().unwrap().to_owned();

    let one = |id: InboundEventId, verb: &str| format!("/api/v1/source/{source}/event/{id}/{verb}");
    let (status, out) = app
        .post(&one(ids[0], "complete"), json!({"lease": "not-it"}))
        .await;
    assert_eq!(status, 409, "{out}");
    let (status, out) = app
        .post(&one(ids[0], "complete"), json!({"lease": lease(0)}))
        .await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("completed")),
        "{out}"
    );
    let body = json!({"lease": lease(1), "outcome": "retryable", "error": "db down"});
    let (status, out) = app.post(&one(ids[1], "fail"), body).await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("retryable")),
        "{out}"
    );
    assert_eq!(out["lastError"], "db down");
    assert!(out["nextAttemptAt"].is_string(), "{out}");
    let (status, out) = app
        .post(
            &one(ids[1], "fail"),
            json!({"lease": lease(1), "outcome": "done"}),
        )
        .await;
    assert_eq!(status, 422, "{out}");

    let (status, out) = app
        .post(&claim, json!({"limit": 5, "leaseSeconds": 1}))
        .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        out["data"].as_array().unwrap().len(),
        1,
        "the retry is not due yet: {out}"
    );
    app.clock.advance(TimeDelta::milliseconds(1100));
    let (status, out) = app.post(&claim, json!({})).await;
    assert_eq!(
        (status, out["data"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{out}"
    );
    assert_eq!(
        stored(&app, source, ids[2]).await.event.state,
        InboundState::Uncertain,
        "its lease ran out"
    );
    let states: Vec<InboundState> = stored_events(&app, source, None)
        .await
        .iter()
        .map(|e| e.state)
        .collect();
    assert_eq!(states.len(), 3);

    let (pushing, _) =
        forwarding_source(&app, &[("https://dest.example/in", false)], json!({})).await;
    let (status, out) = app
        .post(&format!("/api/v1/source/{pushing}/event/claim"), json!({}))
        .await;
    assert_eq!(
        status, 409,
        "vow's workers process a source with destinations: {out}"
    );
}

async fn older_versions_of_an_entity_are_superseded_and_not_forwarded(app: TestApp) {
    let config = delivery_config("1m", &[]);
    let destination = Receiver::start(&[]).await;
    let pointers = json!({"versionPointer": "/version", "entityPointer": "/id"});
    let (source, _) = forwarding_source(&app, &[(&destination.url, false)], pointers).await;
    let newer = received(&app, source, "d-2", br#"{"id":"cus_1","version":2}"#).await;
    let older = received(&app, source, "d-1", br#"{"id":"cus_1","version":1}"#).await;
    let other = received(&app, source, "d-9", br#"{"id":"cus_2","version":1}"#).await;
    assert_eq!(app.forward_at(&config, Utc::now()).await, 2);
    let got: Vec<String> = destination
        .received()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(got.len(), 2);
    assert!(
        got.contains(&newer.to_string()) && got.contains(&other.to_string()),
        "{got:?}"
    );
    let event = stored(&app, source, older).await.event;
    assert_eq!(event.state, InboundState::Superseded);
    assert!(event.last_error.unwrap_or_default().contains("not newer"));

    // A delete at version 5 leaves its mark: a late update at version 4 is superseded too.
    let deleted = received(
        &app,
        source,
        "d-5",
        br#"{"id":"cus_1","version":5,"deleted":true}"#,
    )
    .await;
    app.forward_at(&config, Utc::now()).await;
    assert_eq!(
        stored(&app, source, deleted).await.event.state,
        InboundState::Completed
    );
    let late = received(&app, source, "d-4", br#"{"id":"cus_1","version":4}"#).await;
    app.forward_at(&config, Utc::now()).await;
    assert_eq!(
        stored(&app, source, late).await.event.state,
        InboundState::Superseded
    );
    assert_eq!(
        destination.received().len(),
        3,
        "superseded events are never forwarded"
    );
}
