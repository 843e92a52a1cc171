//! Captured deliveries sent again (issue 13, defect 7) and operators' decisions per
//! destination (defect 10), on both stores. Each case counts the stored events and the
//! requests the destinations received.

use chrono::Utc;
use serde_json::{json, Value};
use vow_core::SourceId;
use vow_store::inbound::InboundState;

use super::support::*;
use crate::helpers::{delivery_config, TestApp};
use crate::receiver::Receiver;

on_both_stores!(
    a_captured_github_delivery_under_a_new_id_is_refused_and_not_forwarded_within_the_window,
    a_captured_linear_delivery_under_a_new_id_is_refused,
    signed_ids_are_unaffected_and_a_source_may_turn_the_guard_off,
    sources_say_what_their_scheme_guarantees_against_replays,
    replay_requeues_only_dead_lettered_destinations_and_resolve_only_uncertain_ones,
);

const LINEAR_SECRET: &str = "lin_wh_secret";

/// A source of `scheme` forwarding to `url`, with `extra` fields.
async fn source_to(app: &TestApp, scheme: &str, secret: &str, url: &str, extra: Value) -> SourceId {
    let mut body = json!({"scheme": scheme, "secrets": [secret],
        "destinations": [{"url": url, "secret": STANDARD_SECRET}]});
    if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
        body.extend(extra);
    }
    create_source(app, body).await.0
}

async fn a_captured_github_delivery_under_a_new_id_is_refused_and_not_forwarded_within_the_window(
    app: TestApp,
) {
    let config = delivery_config("1m", &[]);
    let destination = Receiver::start(&[]).await;
    let source = source_to(&app, "github", GITHUB_SECRET, &destination.url, json!({})).await;
    let body = br#"{"action":"opened","number":7}"#;
    let first = github_delivery(&app, source, Some("guid-1"), body).await;
    assert_eq!(first.1["outcome"], "received", "{}", first.1);
    assert_eq!(app.forward_at(&config, app.clock.now()).await, 1);

    let replay = github_delivery(&app, source, Some("guid-2"), body).await;
    assert_refused(&replay, 409, "replayed");
    assert!(replay.1["detail"]
        .as_str()
        .unwrap()
        .contains(first.1["id"].as_str().unwrap()));
    assert_eq!(
        github_delivery(&app, source, Some("guid-1"), body).await.1["outcome"],
        "duplicate"
    );
    assert_eq!(
        stored_events(&app, source, None).await.len(),
        1,
        "nothing new stored"
    );
    assert_eq!(app.forward_at(&config, app.clock.now()).await, 0);
    assert_eq!(destination.received().len(), 1, "forwarded once");
    let reasons: Vec<_> = rejections(&app, source)
        .await
        .into_iter()
        .map(|r| r.reason)
        .collect();
    assert_eq!(reasons, ["replayed"]);

    // Past the window (30 days by default for GitHub) the same content is a new event.
    app.clock
        .advance(chrono::Duration::days(30) + chrono::Duration::seconds(1));
    let late = github_delivery(&app, source, Some("guid-3"), body).await;
    assert_eq!(late.1["outcome"], "received", "{}", late.1);
    assert_eq!(stored_events(&app, source, None).await.len(), 2);
    assert_eq!(app.forward_at(&config, app.clock.now()).await, 1);
    assert_eq!(destination.received().len(), 2);
}

/// A Linear delivery of `body` under `delivery`.
async fn linear_delivery(
    app: &TestApp,
    source: SourceId,
    delivery: &str,
    body: &[u8],
) -> (u16, Value) {
    let signature = hex::encode(mac_sha256(LINEAR_SECRET.as_bytes(), &[body]));
    let headers = [
        ("linear-signature", signature),
        ("linear-delivery", delivery.to_owned()),
    ];
    deliver(app, &format!("/in/{source}"), &headers, body).await
}

async fn a_captured_linear_delivery_under_a_new_id_is_refused(app: TestApp) {
    let config = delivery_config("1m", &[]);
    let destination = Receiver::start(&[]).await;
    let source = source_to(&app, "linear", LINEAR_SECRET, &destination.url, json!({})).await;
    let ms = app.clock.now().timestamp_millis();
    let body = format!(r#"{{"action":"create","type":"Issue","webhookTimestamp":{ms}}}"#);
    let first = linear_delivery(&app, source, "dlv-1", body.as_bytes()).await;
    assert_eq!(first.1["outcome"], "received", "{}", first.1);
    let replay = linear_delivery(&app, source, "dlv-2", body.as_bytes()).await;
    assert_refused(&replay, 409, "replayed");
    assert_eq!(stored_events(&app, source, None).await.len(), 1);
    assert_eq!(app.forward_at(&config, app.clock.now()).await, 1);
    assert_eq!(
        destination.received().len(),
        1,
        "the replay is not forwarded"
    );
}

async fn signed_ids_are_unaffected_and_a_source_may_turn_the_guard_off(app: TestApp) {
    let config = delivery_config("1m", &[]);
    let destination = Receiver::start(&[]).await;
    // Standard Webhooks signs its id: one body under two signed ids is two events.
    let source = source_to(
        &app,
        "standard-webhooks",
        STANDARD_SECRET,
        &destination.url,
        json!({}),
    )
    .await;
    let body = br#"{"same":"bytes"}"#;
    for id in ["msg_1", "msg_2"] {
        let ts = app.clock.now().timestamp();
        let headers = [
            ("webhook-id", id.to_owned()),
            ("webhook-timestamp", ts.to_string()),
            (
                "webhook-signature",
                standard_signature(STANDARD_SECRET, id, ts, body),
            ),
        ];
        let out = deliver(&app, &format!("/in/{source}"), &headers, body).await;
        assert_eq!(out.1["outcome"], "received", "{}", out.1);
    }
    assert_eq!(stored_events(&app, source, None).await.len(), 2);

    let off = source_to(
        &app,
        "github",
        GITHUB_SECRET,
        &destination.url,
        json!({"replayWindowSecs": 0}),
    )
    .await;
    for guid in ["guid-1", "guid-2"] {
        let out = github_delivery(&app, off, Some(guid), body).await;
        assert_eq!(out.1["outcome"], "received", "{}", out.1);
    }
    assert_eq!(stored_events(&app, off, None).await.len(), 2);
    assert_eq!(app.forward_at(&config, app.clock.now()).await, 4);
    assert_eq!(destination.received().len(), 4);
}

async fn sources_say_what_their_scheme_guarantees_against_replays(app: TestApp) {
    let cases = [
        (
            "github",
            GITHUB_SECRET,
            json!({"signedTimestamp": false, "signedEventId": false,
            "digestWindowSecs": 2_592_000, "replays": "refused_within_window"}),
        ),
        (
            "stripe",
            STRIPE_SECRET,
            json!({"signedTimestamp": true, "signedEventId": true,
            "digestWindowSecs": null, "replays": "duplicate"}),
        ),
        (
            "shopify",
            "shpss",
            json!({"signedTimestamp": false, "signedEventId": false,
            "digestWindowSecs": null, "replays": "accepted"}),
        ),
        (
            "linear",
            LINEAR_SECRET,
            json!({"signedTimestamp": true, "signedEventId": false,
            "digestWindowSecs": 600, "replays": "refused"}),
        ),
    ];
    for (scheme, secret, want) in cases {
        let (status, out) = app
            .post(
                "/api/v1/source",
                json!({"scheme": scheme, "secrets": [secret]}),
            )
            .await;
        assert_eq!(status, 201, "{out}");
        assert_eq!(out["replayProtection"], want, "{scheme}");
        assert_eq!(out["replayWindowSecs"], Value::Null);
    }
    let (status, out) = app
        .post(
            "/api/v1/source",
            json!({"scheme": "github", "secrets": [GITHUB_SECRET],
            "replayWindowSecs": 400 * 86_400}),
        )
        .await;
    assert_eq!(status, 422, "{out}");
    assert_eq!(
        out["detail"][0]["loc"],
        json!(["body", "replayWindowSecs"]),
        "{out}"
    );
    let (source, _) = create_source(
        &app,
        json!({"scheme": "github", "secrets": [GITHUB_SECRET]}),
    )
    .await;
    let (status, out) = app
        .patch(
            &format!("/api/v1/source/{source}"),
            json!({"replayWindowSecs": 60}),
        )
        .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        (
            out["replayWindowSecs"].as_u64(),
            out["replayProtection"]["digestWindowSecs"].as_u64()
        ),
        (Some(60), Some(60))
    );
}

async fn replay_requeues_only_dead_lettered_destinations_and_resolve_only_uncertain_ones(
    app: TestApp,
) {
    let down = Receiver::start(&[503]).await;
    let unsure = Receiver::start(&[]).await;
    unsure.answer_with_header("vow-outcome", "uncertain");
    let list = json!([{"url": down.url, "secret": STANDARD_SECRET},
                      {"url": unsure.url, "secret": STANDARD_SECRET}]);
    let (source, out) = {
        let body = json!({"scheme": "github", "secrets": [GITHUB_SECRET], "destinations": list});
        let (status, out) = app.post("/api/v1/source", body).await;
        assert_eq!(status, 201, "{out}");
        (SourceId::parse(out["id"].as_str().unwrap()).unwrap(), out)
    };
    let (down_id, unsure_id) = (
        out["destinations"][0]["id"].as_str().unwrap().to_owned(),
        out["destinations"][1]["id"].as_str().unwrap().to_owned(),
    );
    let delivered = github_delivery(&app, source, Some("d-1"), b"{}").await;
    let id = delivered.1["id"].as_str().unwrap().to_owned();
    assert_eq!(
        app.forward_at(&delivery_config("none", &[]), Utc::now())
            .await,
        1
    );
    let events = stored_events(&app, source, None).await;
    assert_eq!(
        events[0].state,
        InboundState::Uncertain,
        "dead-lettered at one, uncertain at the other"
    );

    let base = format!("/api/v1/source/{source}/event/{id}");
    let (status, out) = app.post(&format!("{base}/replay"), json!({})).await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("retryable")),
        "{out}"
    );
    assert_eq!(out["changed"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(
        out["changed"][0]["destinationId"],
        down_id.as_str(),
        "{out}"
    );
    unsure.answer_with_header("vow-outcome", "retryable");
    assert_eq!(
        app.forward_at(&delivery_config("1m", &[]), Utc::now())
            .await,
        1
    );
    assert_eq!(
        (down.received().len(), unsure.received().len()),
        (2, 1),
        "re-forwarded only where it was dead-lettered"
    );
    assert_eq!(
        stored_events(&app, source, None).await[0].state,
        InboundState::Uncertain
    );

    let (status, out) = app
        .post(
            &format!("{base}/resolve"),
            json!({"outcome": "completed", "destination": down_id}),
        )
        .await;
    assert_eq!(status, 409, "that destination is not uncertain: {out}");
    let (status, out) = app
        .post(
            &format!("{base}/resolve"),
            json!({"outcome": "completed", "destination": unsure_id}),
        )
        .await;
    assert_eq!(
        (status, out["state"].as_str()),
        (200, Some("completed")),
        "{out}"
    );
    assert_eq!(
        out["changed"][0]["destinationId"],
        unsure_id.as_str(),
        "{out}"
    );
    assert_eq!(
        app.forward_at(&delivery_config("1m", &[]), Utc::now())
            .await,
        0
    );
    assert_eq!((down.received().len(), unsure.received().len()), (2, 1));
}
