//! Sources through the API: CRUD and rotation without ever answering a secret, an idempotent
//! create, and configurations refused naming the field.

use reqwest::Method;
use serde_json::{json, Value};
use vow_core::SourceId;
use vow_store::{Order, Seek};

use super::support::*;
use crate::helpers::TestApp;

on_both_stores!(
    sources_are_managed_through_the_api_and_never_expose_their_secrets,
    a_source_create_honours_idempotency_key,
    invalid_source_configurations_are_refused_naming_the_field,
);

async fn sources_are_managed_through_the_api_and_never_expose_their_secrets(app: TestApp) {
    let body = json!({
        "description": "GitHub org hooks",
        "scheme": "github",
        "secrets": [GITHUB_SECRET],
        "versionPointer": "/repository/pushed_at",
        "destinations": [
            {"url": "https://dest.example/hook", "idempotent": true},
            {"url": "https://other.example/hook", "secret": ROTATED_SECRET}
        ]
    });
    let (status, created) = app.post("/api/v1/source", body).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["ingestPath"], format!("/in/{id}"));
    assert!(created["tokenPath"].as_str().unwrap().len() >= "/in/t/".len() + 32);
    assert_eq!(
        (
            created["secretCount"].clone(),
            created["toleranceSecs"].clone()
        ),
        (json!(1), json!(300))
    );
    assert_eq!(created["destinations"].as_array().unwrap().len(), 2);
    let (_, secrets) = app.get(&format!("/api/v1/source/{id}/secret")).await;
    let generated = secrets["destinations"][0]["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(generated.starts_with("whsec_"), "{secrets}");
    assert_eq!(secrets["destinations"][1]["secret"], ROTATED_SECRET);
    assert!(
        !secrets.to_string().contains(GITHUB_SECRET),
        "provider secrets are write-only"
    );

    let (status, listed) = app.get("/api/v1/source").await;
    assert_eq!(status, 200);
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert!(
        listed["data"][0].get("tokenPath").is_none(),
        "no token in lists: {listed}"
    );
    let (_, got) = app.get(&format!("/api/v1/source/{id}")).await;
    assert_eq!(got, created);
    for shown in [&created, &listed, &got] {
        let text = shown.to_string();
        for secret in [GITHUB_SECRET, generated.as_str(), ROTATED_SECRET] {
            assert!(!text.contains(secret), "a secret leaked: {text}");
        }
    }

    // Rotation: a new secret first, the old one still accepted; destinations kept by id.
    let (status, patched) = app
        .patch(
            &format!("/api/v1/source/{id}"),
            json!({"secrets": ["new-secret", GITHUB_SECRET], "toleranceSecs": 60}),
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        (
            patched["secretCount"].clone(),
            patched["toleranceSecs"].clone()
        ),
        (json!(2), json!(60))
    );
    assert_eq!(patched["destinations"], created["destinations"]);
    let source = SourceId::parse(&id).unwrap();
    let stored = app.inbound.get_source(source).await.unwrap().unwrap();
    assert_eq!(stored.fields.secrets, ["new-secret", GITHUB_SECRET]);
    assert_eq!(stored.fields.destinations[0].secret, generated);
    let (status, _) = github_delivery(&app, source, Some("d-1"), b"{}").await;
    assert_eq!(
        status, 200,
        "the old secret still verifies during the rotation"
    );

    let kept = created["destinations"][0]["id"].clone();
    let replaced = json!({
        "scheme": "stripe",
        "secrets": [STRIPE_SECRET],
        "eventId": {"header": "X-Request-Id"},
        "destinations": [{"id": kept, "url": "https://moved.example/hook"}]
    });
    let (status, put) = app.put(&format!("/api/v1/source/{id}"), replaced).await;
    assert_eq!(status, 200, "{put}");
    assert_eq!(put["scheme"], "stripe");
    assert_eq!(put["eventId"], json!({"header": "x-request-id"}));
    assert_eq!(
        put["destinations"],
        json!([{"id": kept, "url": "https://moved.example/hook", "idempotent": false}])
    );
    let stored = app.inbound.get_source(source).await.unwrap().unwrap();
    assert_eq!(
        stored.fields.destinations[0].secret, generated,
        "kept by id, its secret too"
    );

    let (status, _) = app.delete(&format!("/api/v1/source/{id}")).await;
    assert_eq!(status, 204);
    assert_eq!(app.get(&format!("/api/v1/source/{id}")).await.0, 404);
    assert_eq!(app.inbound.get_source(source).await.unwrap(), None);
    assert!(
        stored_events(&app, source, None).await.is_empty(),
        "its events went with it"
    );
    assert_eq!(app.delete(&format!("/api/v1/source/{id}")).await.0, 404);
}

async fn a_source_create_honours_idempotency_key(app: TestApp) {
    let body = json!({"scheme": "github", "secrets": [GITHUB_SECRET]});
    let send = || {
        app.request(Method::POST, "/api/v1/source")
            .header("idempotency-key", "source-1")
            .json(&body)
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    let again = send().await.unwrap();
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again, first, "the stored answer is replayed");
    let seek = Seek::for_iterator(None, Order::Ascending, 10);
    assert_eq!(
        app.inbound.list_sources(&seek).await.unwrap().len(),
        1,
        "one source stored"
    );
}

async fn invalid_source_configurations_are_refused_naming_the_field(app: TestApp) {
    let cases = [
        (
            json!({"scheme": "gitlab", "secrets": ["x"]}),
            vec!["body", "scheme"],
        ),
        (
            json!({"scheme": "hmac", "secrets": ["x"]}),
            vec!["body", "hmac"],
        ),
        (
            json!({"scheme": "standard-webhooks", "secrets": ["not base64!"]}),
            vec!["body", "secrets", "0"],
        ),
        (
            json!({"scheme": "github", "secrets": []}),
            vec!["body", "secrets"],
        ),
        (
            json!({"scheme": "github", "secrets": ["x"], "toleranceSecs": 0}),
            vec!["body", "toleranceSecs"],
        ),
        (
            json!({"scheme": "github", "secrets": ["x"], "eventId": {"pointer": "id"}}),
            vec!["body", "eventId", "pointer"],
        ),
        (
            json!({"scheme": "hmac", "secrets": ["x"], "hmac": {"header": "x-sig", "template": "{timestamp}{body}"}}),
            vec!["body", "hmac", "header"],
        ),
        (
            json!({"scheme": "github", "secrets": ["x"], "destinations": [{"url": "ftp://x"}]}),
            vec!["body", "destinations", "0", "url"],
        ),
    ];
    for (body, loc) in cases {
        let (status, out) = app.post("/api/v1/source", body.clone()).await;
        assert_eq!(status, 422, "{body} -> {out}");
        assert_eq!(out["detail"][0]["loc"], json!(loc), "{body} -> {out}");
    }
    let seek = Seek::for_iterator(None, Order::Ascending, 10);
    assert!(app.inbound.list_sources(&seek).await.unwrap().is_empty());
}
