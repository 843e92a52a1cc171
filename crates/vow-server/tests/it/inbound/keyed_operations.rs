//! `Idempotency-Key` on the inbound operations (issue 13, defect 5): a pull consumer's claim,
//! complete and fail, and an operator's resolve, replay, release and discard. The same key and
//! request again replays the first answer (`Idempotent-Replayed: true`) and the store shows ONE
//! effect; the key with another request is 422 and writes nothing. A keyed claim is replayed
//! (same events, same lease tokens) only while its leases hold; after them the key runs a new
//! claim (the injected clock moves past the leases).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use vow_core::{InboundEventId, SourceId};
use vow_store::inbound::processing::Outcome;
use vow_store::inbound::{InboundEvent, InboundState};

use super::processing::{received, stored};
use super::support::*;
use crate::helpers::{delivery_config, into_parts, TestApp};
use crate::idempotent_routes::{keyed, replayed, twice};
use crate::receiver::Receiver;

on_both_stores!(
    a_keyed_pull_claim_returns_the_same_batch_while_its_leases_hold_then_claims_anew,
    a_keyed_complete_or_fail_records_one_outcome,
    a_keyed_resolve_of_an_uncertain_event_resolves_it_once,
    a_keyed_replay_forwards_a_rejected_event_once_more,
    a_keyed_release_or_discard_decides_a_quarantined_event_once,
);

/// The keyed request is refused as a reuse of the key.
async fn assert_reused(app: &TestApp, path: &str, key: &str, body: Option<Value>) {
    let (status, problem) = into_parts(keyed(app, path, key, body).await).await;
    assert_eq!(status, 422, "{path}: {problem}");
    assert_eq!(
        problem["type"], "urn:vow:problem:idempotency-key-reused",
        "{path}"
    );
}

async fn event(app: &TestApp, source: SourceId, id: InboundEventId) -> InboundEvent {
    stored(app, source, id).await.event
}

fn ids(claimed: &Value) -> Vec<String> {
    let data = claimed["data"].as_array().expect("a claim's data");
    data.iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

fn time(value: &Value) -> DateTime<Utc> {
    value.as_str().unwrap().parse().unwrap()
}

/// Claims the due events of pull source `source`, without a key.
async fn claim(app: &TestApp, source: SourceId, body: Value) -> Value {
    let (status, out) = app
        .post(&format!("/api/v1/source/{source}/event/claim"), body)
        .await;
    assert_eq!(status, 200, "{out}");
    out
}

async fn a_keyed_pull_claim_returns_the_same_batch_while_its_leases_hold_then_claims_anew(
    app: TestApp,
) {
    let source = github_source(&app).await;
    let [a, b, c] = [
        received(&app, source, "d-a", br#"{"delivery":"d-a"}"#).await,
        received(&app, source, "d-b", br#"{"delivery":"d-b"}"#).await,
        received(&app, source, "d-c", br#"{"delivery":"d-c"}"#).await,
    ];
    let path = format!("/api/v1/source/{source}/event/claim");
    let body = json!({"limit": 2, "leaseSeconds": 30});

    let (status, batch) = twice(&app, &path, "claim-1", Some(body.clone())).await;
    assert_eq!(status, 200, "{batch}");
    assert_eq!(ids(&batch), [a.to_string(), b.to_string()]);
    for id in [a, b] {
        assert_eq!(
            event(&app, source, id).await.state,
            InboundState::Processing
        );
    }
    assert_eq!(
        event(&app, source, c).await.state,
        InboundState::Received,
        "the replay leased nothing more"
    );

    // The record lives as long as the leases, and leaves no tombstone.
    let (status, key) = app
        .get("/api/v1/idempotency-key/claim-1?route=source.event.claim")
        .await;
    assert_eq!(
        (status, key["state"].as_str()),
        (200, Some("completed")),
        "{key}"
    );
    let lease_until = time(&batch["data"][0]["leaseUntil"]);
    assert!(time(&key["expiresAt"]) <= lease_until, "{key} {batch}");
    assert_eq!(key["tombstoneUntil"], key["expiresAt"], "{key}");

    // Another claim under the key is a reuse, and leases nothing.
    let other = json!({"limit": 3, "leaseSeconds": 30});
    assert_reused(&app, &path, "claim-1", Some(other.clone())).await;
    assert_eq!(event(&app, source, c).await.state, InboundState::Received);
    let rest = claim(&app, source, json!({"limit": 10})).await;
    assert_eq!(
        ids(&rest),
        [c.to_string()],
        "what the batch left is claimable"
    );

    // Once the leases have ended, the key is free: a new claim runs instead of a replay of
    // leases that ended (the batch is settled as uncertain on the way).
    app.clock.advance(chrono::Duration::seconds(31));
    let d = received(&app, source, "d-d", br#"{"delivery":"d-d"}"#).await;
    let again = keyed(&app, &path, "claim-1", Some(body.clone())).await;
    assert!(!replayed(&again), "a new claim, not a replay");
    let (status, fresh) = into_parts(again).await;
    assert_eq!(status, 200, "{fresh}");
    assert_eq!(ids(&fresh), [d.to_string()], "{fresh}");
    assert_ne!(fresh["data"][0]["lease"], batch["data"][0]["lease"]);
    for id in [a, b] {
        assert_eq!(event(&app, source, id).await.state, InboundState::Uncertain);
    }
}

async fn a_keyed_complete_or_fail_records_one_outcome(app: TestApp) {
    let source = github_source(&app).await;
    let [a, b] = [
        received(&app, source, "d-a", br#"{"delivery":"d-a"}"#).await,
        received(&app, source, "d-b", br#"{"delivery":"d-b"}"#).await,
    ];
    let batch = claim(&app, source, json!({"limit": 2, "leaseSeconds": 60})).await;
    let lease = |i: usize| batch["data"][i]["lease"].as_str().unwrap().to_owned();
    let one = |id: InboundEventId, verb: &str| format!("/api/v1/source/{source}/event/{id}/{verb}");

    let body = json!({"lease": lease(0)});
    let (status, out) = twice(&app, &one(a, "complete"), "done-a", Some(body.clone())).await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("completed")),
        "{out}"
    );
    let done = stored(&app, source, a).await;
    assert_eq!(done.event.state, InboundState::Completed);
    assert_eq!(done.event.attempts, 1);
    assert_eq!(
        done.event.updated_at,
        time(&out["updatedAt"]),
        "recorded once"
    );
    assert_eq!(
        done.forwards.iter().map(|f| f.outcome).collect::<Vec<_>>(),
        [Outcome::Completed]
    );

    let body = json!({"lease": lease(1), "outcome": "retryable", "error": "db down"});
    let (status, out) = twice(&app, &one(b, "fail"), "fail-b", Some(body.clone())).await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("retryable")),
        "{out}"
    );
    let other = json!({"lease": lease(1), "outcome": "rejected", "error": "bad"});
    assert_reused(&app, &one(b, "fail"), "fail-b", Some(other.clone())).await;
    let failed = stored(&app, source, b).await;
    assert_eq!(failed.event.state, InboundState::Retryable, "not rejected");
    assert_eq!(failed.event.last_error.as_deref(), Some("db down"));
    assert_eq!(
        failed.event.next_attempt_at,
        Some(time(&out["nextAttemptAt"]))
    );
    assert_eq!(
        failed
            .forwards
            .iter()
            .map(|f| f.outcome)
            .collect::<Vec<_>>(),
        [Outcome::Retryable]
    );

    // A lease no longer held is a 409, stored and replayed like a success.
    let body = json!({"lease": lease(0)});
    let (status, out) = twice(&app, &one(a, "complete"), "late-a", Some(body.clone())).await;
    assert_eq!(
        (status, out["code"].as_str()),
        (409, Some("conflict")),
        "{out}"
    );
}

async fn a_keyed_resolve_of_an_uncertain_event_resolves_it_once(app: TestApp) {
    let source = github_source(&app).await;
    let a = received(&app, source, "d-a", br#"{"delivery":"d-a"}"#).await;
    claim(&app, source, json!({"limit": 1, "leaseSeconds": 5})).await;
    // The consumer never answers: its lease ends, and the next claim settles the event.
    app.clock.advance(chrono::Duration::seconds(6));
    claim(&app, source, json!({})).await;
    assert_eq!(event(&app, source, a).await.state, InboundState::Uncertain);

    let path = format!("/api/v1/source/{source}/event/{a}/resolve");
    let other = json!({"outcome": "completed"});
    let retry = json!({"outcome": "retry"});
    let (status, out) = twice(&app, &path, "resolve-a", Some(retry.clone())).await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("retryable")),
        "{out}"
    );
    assert_reused(&app, &path, "resolve-a", Some(other.clone())).await;
    let resolved = stored(&app, source, a).await;
    assert_eq!(
        resolved.event.state,
        InboundState::Retryable,
        "not completed"
    );
    assert_eq!(resolved.event.attempts, 0, "fresh attempts, once");
    assert_eq!(
        resolved
            .forwards
            .iter()
            .map(|f| f.outcome)
            .collect::<Vec<_>>(),
        [Outcome::Retryable]
    );
    let again = claim(&app, source, json!({})).await;
    assert_eq!(
        ids(&again),
        [a.to_string()],
        "requeued once: claimable again"
    );
}

async fn a_keyed_replay_forwards_a_rejected_event_once_more(app: TestApp) {
    let config = delivery_config("1m", &[]);
    let destination = Receiver::start(&[422, 422]).await;
    let body = json!({
        "scheme": "github",
        "secrets": [GITHUB_SECRET],
        "destinations": [{"url": destination.url, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}],
    });
    let (status, out) = app.post("/api/v1/source", body).await;
    assert_eq!(status, 201, "{out}");
    let source = SourceId::parse(out["id"].as_str().unwrap()).unwrap();
    let [a, b] = [
        received(&app, source, "d-a", br#"{"delivery":"d-a"}"#).await,
        received(&app, source, "d-b", br#"{"delivery":"d-b"}"#).await,
    ];
    assert_eq!(app.forward_at(&config, Utc::now()).await, 2);
    assert_eq!(destination.received().len(), 2);
    for id in [a, b] {
        assert_eq!(event(&app, source, id).await.state, InboundState::Rejected);
    }

    let replay = |id: InboundEventId| format!("/api/v1/source/{source}/event/{id}/replay");
    let (status, out) = twice(&app, &replay(a), "replay-a", None).await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("retryable")),
        "{out}"
    );
    // The key names event a's replay: event b's under it is another request.
    assert_reused(&app, &replay(b), "replay-a", None).await;
    assert_eq!(event(&app, source, b).await.state, InboundState::Rejected);

    assert_eq!(app.forward_at(&config, Utc::now()).await, 1, "one requeue");
    assert_eq!(app.forward_at(&config, Utc::now()).await, 0);
    assert_eq!(
        destination.received().len(),
        3,
        "one re-forward at the destination"
    );
    assert_eq!(event(&app, source, a).await.state, InboundState::Completed);
}

async fn a_keyed_release_or_discard_decides_a_quarantined_event_once(app: TestApp) {
    let (source, held) = two_quarantined(&app).await;
    let held: Vec<InboundEventId> = held.iter().map(|id| id.parse().unwrap()).collect();
    let decide =
        |id: InboundEventId, verb: &str| format!("/api/v1/source/{source}/event/{id}/{verb}");

    let (status, out) = twice(&app, &decide(held[0], "release"), "release-0", None).await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("received")),
        "{out}"
    );
    assert_reused(&app, &decide(held[1], "release"), "release-0", None).await;
    assert_eq!(
        event(&app, source, held[1]).await.state,
        InboundState::Quarantined,
        "the refused reuse released nothing"
    );
    let (status, out) = twice(&app, &decide(held[1], "discard"), "discard-1", None).await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("discarded")),
        "{out}"
    );

    let states: Vec<InboundState> = stored_events(&app, source, None)
        .await
        .iter()
        .map(|e| e.state)
        .collect();
    assert_eq!(
        states,
        [
            InboundState::Received,
            InboundState::Received,
            InboundState::Discarded
        ],
        "one release, one discard"
    );
}
