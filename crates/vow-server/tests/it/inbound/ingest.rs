//! `POST /in/...`: verification on the raw bytes (400, 401, 404, 413), handshakes, the token
//! URL, and the atomic claim (one row among concurrent duplicates, no dedupe without an id).

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha512;
use vow_core::SourceId;

use super::support::*;
use crate::helpers::{test_config, TestApp};

on_both_stores!(
    fifty_concurrent_identical_deliveries_store_exactly_one_event,
    an_expired_or_future_timestamp_is_a_401_and_a_recorded_rejection,
    an_invalid_signature_is_a_401_and_stores_nothing,
    a_missing_signature_header_is_a_400,
    an_unknown_source_is_a_404,
    an_oversized_body_is_a_413_and_a_recorded_rejection,
    slack_url_verification_is_answered_with_its_challenge,
    the_token_url_ingests_like_the_id_url,
    standard_webhooks_deliveries_verify_with_a_rotated_secret_and_dedupe_by_webhook_id,
    a_generic_hmac_source_verifies_its_configured_scheme,
    deliveries_without_an_event_id_are_each_stored,
);

async fn fifty_concurrent_identical_deliveries_store_exactly_one_event(app: TestApp) {
    let source = github_source(&app).await;
    let body = br#"{"ref":"refs/heads/main","after":"abc"}"#;
    let mut outcomes = Vec::new();
    for (status, out) in concurrent_github_deliveries(&app, source, "guid-1", body, 50).await {
        assert_eq!(status, 200, "{out}");
        outcomes.push(out["outcome"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        outcomes.iter().filter(|o| *o == "received").count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(outcomes.iter().filter(|o| *o == "duplicate").count(), 49);
    let stored = stored_events(&app, source, None).await;
    assert_eq!(stored.len(), 1, "exactly one stored event row");
    let event = &stored[0];
    assert_eq!(
        (event.event_id.as_deref(), event.account.as_str()),
        (Some("guid-1"), "42")
    );
    assert_eq!(event.duplicates, 49);
    let content = app
        .inbound
        .get_inbound_event(source, event.id)
        .await
        .unwrap();
    let content = content.unwrap().content.unwrap();
    assert_eq!(content.payload, body, "the exact bytes");
    let names: Vec<&str> = content.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"x-github-event"), "{names:?}");
    assert!(
        !names.contains(&"x-hub-signature-256"),
        "signatures are never stored: {names:?}"
    );
}

async fn an_expired_or_future_timestamp_is_a_401_and_a_recorded_rejection(app: TestApp) {
    let source = stripe_source(&app).await;
    let body = br#"{"id":"evt_1","type":"charge.succeeded"}"#;
    let old = stripe_delivery(&app, source, now() - 600, body).await;
    assert_refused(&old, 401, "timestamp_too_old");
    let future = stripe_delivery(&app, source, now() + 600, body).await;
    assert_refused(&future, 401, "timestamp_too_new");
    assert!(stored_events(&app, source, None).await.is_empty());
    let recorded = rejections(&app, source).await;
    let reasons: Vec<(&str, u16, u64)> = recorded
        .iter()
        .map(|r| (r.reason.as_str(), r.status, r.body_size))
        .collect();
    let size = body.len() as u64;
    assert_eq!(
        reasons,
        [
            ("timestamp_too_old", 401, size),
            ("timestamp_too_new", 401, size)
        ]
    );
    let (status, listed) = app.get(&format!("/api/v1/source/{source}/rejection")).await;
    assert_eq!(status, 200);
    assert_eq!(
        listed["data"][0]["reason"], "timestamp_too_new",
        "newest first"
    );
    let (_, metrics) = app.get("/metrics").await;
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    assert!(
        metrics.contains("vow_inbound_rejections_total{reason=\"timestamp_too_old\"}"),
        "{metrics}"
    );
    assert!(
        stripe_delivery(&app, source, now(), body).await.0 == 200,
        "a fresh one passes"
    );
}

async fn an_invalid_signature_is_a_401_and_stores_nothing(app: TestApp) {
    let source = github_source(&app).await;
    let body = br#"{"zen":"Keep it logically awesome."}"#;
    let headers = [
        (
            "x-hub-signature-256",
            github_signature("another secret", body),
        ),
        ("x-github-delivery", "guid-1".to_owned()),
    ];
    let outcome = deliver(&app, &format!("/in/{source}"), &headers, body).await;
    assert_refused(&outcome, 401, "signature_mismatch");
    assert!(stored_events(&app, source, None).await.is_empty());
    let recorded = rejections(&app, source).await;
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].reason, "signature_mismatch");
    let tampered = [
        ("x-hub-signature-256", github_signature(GITHUB_SECRET, body)),
        ("x-github-delivery", "guid-1".to_owned()),
    ];
    let outcome = deliver(
        &app,
        &format!("/in/{source}"),
        &tampered,
        b"{\"zen\":\"changed\"}",
    )
    .await;
    assert_refused(&outcome, 401, "signature_mismatch");
    assert!(stored_events(&app, source, None).await.is_empty());
}

async fn a_missing_signature_header_is_a_400(app: TestApp) {
    let source = stripe_source(&app).await;
    let outcome = deliver(&app, &format!("/in/{source}"), &[], br#"{"id":"evt_1"}"#).await;
    assert_refused(&outcome, 400, "missing_header");
    let malformed = [("stripe-signature", "v1=nothex".to_owned())];
    let outcome = deliver(&app, &format!("/in/{source}"), &malformed, b"{}").await;
    assert_eq!(outcome.0, 400, "{}", outcome.1);
    assert!(stored_events(&app, source, None).await.is_empty());
    let reasons: Vec<String> = rejections(&app, source)
        .await
        .into_iter()
        .map(|r| r.reason)
        .collect();
    assert_eq!(reasons[0], "missing_header");
    assert_eq!(reasons.len(), 2);
}

async fn an_unknown_source_is_a_404(app: TestApp) {
    for path in [
        format!("/in/{}", SourceId::new()),
        "/in/not-an-id".to_owned(),
        "/in/t/0123456789abcdef".to_owned(),
    ] {
        let outcome = deliver(&app, &path, &[], b"{}").await;
        assert_refused(&outcome, 404, "unknown_source");
    }
}

async fn an_oversized_body_is_a_413_and_a_recorded_rejection(app: TestApp) {
    let source = github_source(&app).await;
    let limit = test_config(&[]).max_body_bytes;
    let body = vec![b'x'; limit + 1];
    let outcome = github_delivery(&app, source, Some("big"), &body).await;
    assert_refused(&outcome, 413, "body_too_large");
    assert!(stored_events(&app, source, None).await.is_empty());
    let recorded = rejections(&app, source).await;
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        (recorded[0].reason.as_str(), recorded[0].status),
        ("body_too_large", 413)
    );
    assert!(recorded[0].body_size > limit as u64, "{:?}", recorded[0]);
}

async fn slack_url_verification_is_answered_with_its_challenge(app: TestApp) {
    let body = json!({"scheme": "slack", "secrets": [SLACK_SECRET]});
    let (source, _) = create_source(&app, body).await;
    let handshake = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let ts = now();
    let headers = [
        ("x-slack-request-timestamp", ts.to_string()),
        (
            "x-slack-signature",
            slack_signature(SLACK_SECRET, ts, handshake),
        ),
    ];
    let (status, out) = deliver(&app, &format!("/in/{source}"), &headers, handshake).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        out,
        json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
    );
    assert!(
        stored_events(&app, source, None).await.is_empty(),
        "a handshake is not an event"
    );
    let forged = [
        ("x-slack-request-timestamp", ts.to_string()),
        ("x-slack-signature", slack_signature("wrong", ts, handshake)),
    ];
    let outcome = deliver(&app, &format!("/in/{source}"), &forged, handshake).await;
    assert_refused(&outcome, 401, "signature_mismatch");

    let event = br#"{"type":"event_callback","event_id":"Ev1","team_id":"T1"}"#;
    let headers = [
        ("x-slack-request-timestamp", ts.to_string()),
        (
            "x-slack-signature",
            slack_signature(SLACK_SECRET, ts, event),
        ),
    ];
    assert_eq!(
        deliver(&app, &format!("/in/{source}"), &headers, event)
            .await
            .0,
        200
    );
    let stored = stored_events(&app, source, None).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].event_id.as_deref(), Some("Ev1"));
}

async fn the_token_url_ingests_like_the_id_url(app: TestApp) {
    let body = json!({"scheme": "github", "secrets": [GITHUB_SECRET]});
    let (source, token_path) = create_source(&app, body).await;
    let payload = br#"{"action":"opened"}"#;
    let headers = [
        (
            "x-hub-signature-256",
            github_signature(GITHUB_SECRET, payload),
        ),
        ("x-github-delivery", "guid-7".to_owned()),
        ("x-github-hook-id", "42".to_owned()),
    ];
    let (status, out) = deliver(&app, &token_path, &headers, payload).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("received")),
        "{out}"
    );
    let (status, out) = github_delivery(&app, source, Some("guid-7"), payload).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("duplicate")),
        "{out}"
    );
    assert_eq!(stored_events(&app, source, None).await.len(), 1);
    let wrong = format!("{}0", token_path);
    assert_refused(
        &deliver(&app, &wrong, &headers, payload).await,
        404,
        "unknown_source",
    );
}

async fn standard_webhooks_deliveries_verify_with_a_rotated_secret_and_dedupe_by_webhook_id(
    app: TestApp,
) {
    let body = json!({"scheme": "standard-webhooks", "secrets": [STANDARD_SECRET, ROTATED_SECRET]});
    let (source, _) = create_source(&app, body).await;
    let payload = br#"{"type":"user.created","data":{"id":"u_1"}}"#;
    let ts = now();
    let send = |secret: &'static str| {
        let headers = [
            ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek".to_owned()),
            ("webhook-timestamp", ts.to_string()),
            (
                "webhook-signature",
                standard_signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", ts, payload),
            ),
        ];
        let path = format!("/in/{source}");
        let app = &app;
        async move { deliver(app, &path, &headers, payload).await }
    };
    let (status, out) = send(ROTATED_SECRET).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("received")),
        "the older secret: {out}"
    );
    let (status, out) = send(STANDARD_SECRET).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("duplicate")),
        "{out}"
    );
    let stored = stored_events(&app, source, None).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].event_id.as_deref(),
        Some("msg_p5jXN8AQM9LWM0D4loKWxJek")
    );
}

async fn a_generic_hmac_source_verifies_its_configured_scheme(app: TestApp) {
    let body = json!({
        "scheme": "hmac",
        "secrets": ["generic-secret"],
        "hmac": {
            "header": "X-Acme-Signature",
            "prefix": "sha512=",
            "encoding": "base64",
            "algorithm": "sha512",
            "template": "{timestamp}.{body}",
            "timestampHeader": "X-Acme-Timestamp"
        },
        "eventId": {"header": "X-Acme-Event"},
        "account": {"pointer": "/tenant"}
    });
    let (source, _) = create_source(&app, body).await;
    let payload = br#"{"tenant":"t-9","kind":"order.paid"}"#;
    let ts = now().to_string();
    let mut mac = Hmac::<Sha512>::new_from_slice(b"generic-secret").unwrap();
    mac.update(format!("{ts}.").as_bytes());
    mac.update(payload);
    let signature = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    let headers = [
        ("x-acme-signature", format!("sha512={signature}")),
        ("x-acme-timestamp", ts),
        ("x-acme-event", "ord-1".to_owned()),
    ];
    let (status, out) = deliver(&app, &format!("/in/{source}"), &headers, payload).await;
    assert_eq!(status, 200, "{out}");
    let stored = stored_events(&app, source, None).await;
    assert_eq!(
        (stored[0].event_id.as_deref(), stored[0].account.as_str()),
        (Some("ord-1"), "t-9")
    );
    let content = app
        .inbound
        .get_inbound_event(source, stored[0].id)
        .await
        .unwrap();
    let names: Vec<String> = content
        .unwrap()
        .content
        .unwrap()
        .headers
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(!names.iter().any(|n| n == "x-acme-signature"), "{names:?}");
}

async fn deliveries_without_an_event_id_are_each_stored(app: TestApp) {
    // With GitHub's replay guard off: on, the second is refused as a replay (`replays`).
    let body = json!({"scheme": "github", "secrets": [GITHUB_SECRET], "replayWindowSecs": 0});
    let source = create_source(&app, body).await.0;
    let body = br#"{"same":"body"}"#;
    for _ in 0..2 {
        let (status, out) = github_delivery(&app, source, None, body).await;
        assert_eq!(
            (status, out["outcome"].as_str()),
            (200, Some("received")),
            "{out}"
        );
    }
    let stored = stored_events(&app, source, None).await;
    assert_eq!(stored.len(), 2, "identical bodies are not one event");
    assert!(stored.iter().all(|e| e.event_id.is_none()));
}
