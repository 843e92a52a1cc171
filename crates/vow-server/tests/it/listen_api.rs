//! The API `vow listen` uses (`/api/v1/app/{app}/listen...`): what a relay endpoint is made of,
//! what is refused with which status, and who may listen where. The relaying itself is tested
//! end to end with real processes in `cli_listen`.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{into_parts, TestApp};

on_both_stores!(
    a_relay_endpoint_is_an_ordinary_endpoint_with_the_filters_asked_for,
    bad_filters_are_refused_naming_the_field,
    only_a_relay_endpoint_can_be_listened_on,
    a_portal_token_listens_on_its_own_application_only,
    results_for_no_waiting_attempt_are_counted_as_unmatched,
);

async fn listen(app: &TestApp, app_id: &str, body: Value) -> (u16, Value) {
    app.post(&format!("/api/v1/app/{app_id}/listen"), body)
        .await
}

async fn a_relay_endpoint_is_an_ordinary_endpoint_with_the_filters_asked_for(app: TestApp) {
    let app_id = app.create_app("shop").await;
    let (status, out) = listen(
        &app,
        &app_id,
        json!({"eventTypes": ["order.created"], "channels": ["eu"], "description": "mine"}),
    )
    .await;
    assert_eq!(status, 201, "{out}");
    let ep = out["endpointId"].as_str().unwrap();
    assert_eq!(
        out["stream"].as_str().unwrap(),
        format!("/api/v1/app/{app_id}/listen/{ep}")
    );
    assert_eq!(
        out["results"].as_str().unwrap(),
        format!("/api/v1/app/{app_id}/listen/{ep}/result")
    );
    let (status, endpoint) = app
        .get(&format!("/api/v1/app/{app_id}/endpoint/{ep}"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(endpoint["url"], "relay://listen");
    assert_eq!(endpoint["eventTypes"], json!(["order.created"]));
    assert_eq!(endpoint["channels"], json!(["eu"]));
    assert_eq!(endpoint["description"], "mine");
    // It is edited like any endpoint, and stays a relay endpoint.
    let (status, patched) = app
        .patch(
            &format!("/api/v1/app/{app_id}/endpoint/{ep}"),
            json!({"description": "renamed", "retrySchedule": "5s"}),
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["url"], "relay://listen");
    assert_eq!(patched["description"], "renamed");
    // The secret answered is the endpoint's signing secret.
    let (_, secret) = app
        .get(&format!("/api/v1/app/{app_id}/endpoint/{ep}/secret"))
        .await;
    assert_eq!(secret["key"], out["secret"]);
    // No body at all: every event, every channel.
    let (status, out) = app
        .call(Method::POST, &format!("/api/v1/app/{app_id}/listen"), None)
        .await;
    assert_eq!(status, 201, "{out}");
    let (_, endpoint) = app
        .get(&format!(
            "/api/v1/app/{app_id}/endpoint/{}",
            out["endpointId"].as_str().unwrap()
        ))
        .await;
    assert_eq!(endpoint["eventTypes"], Value::Null);
    assert_eq!(endpoint["channels"], Value::Null);
}

async fn bad_filters_are_refused_naming_the_field(app: TestApp) {
    let app_id = app.create_app("shop").await;
    let (status, out) = listen(&app, &app_id, json!({"eventTypes": ["not a name!"]})).await;
    assert_eq!(status, 422, "{out}");
    assert_eq!(out["detail"][0]["loc"], json!(["body", "eventTypes", "0"]));
    let (status, out) = listen(&app, &app_id, json!({"channels": []})).await;
    assert_eq!(status, 422, "{out}");
    assert_eq!(out["detail"][0]["loc"], json!(["body", "channels"]));
    let (status, _) = listen(&app, "app_2x0000000000000000000000", json!({})).await;
    assert_eq!(status, 404);
}

async fn only_a_relay_endpoint_can_be_listened_on(app: TestApp) {
    let app_id = app.create_app("shop").await;
    let plain = app
        .create_endpoint(&app_id, json!({"url": "https://example.com/hook"}))
        .await;
    let (status, out) = app
        .get(&format!("/api/v1/app/{app_id}/listen/{plain}"))
        .await;
    assert_eq!(status, 409, "{out}");
    assert!(out["detail"]
        .as_str()
        .unwrap()
        .contains("not a relay endpoint"));
    let (status, _) = app
        .get(&format!("/api/v1/app/{app_id}/listen/ep_nope"))
        .await;
    assert_eq!(status, 404);
}

pub(crate) async fn portal_token(app: &TestApp, app_id: &str, read_only: bool) -> String {
    let (status, out) = app
        .post(
            &format!("/api/v1/auth/app-portal-access/{app_id}"),
            json!({"readOnly": read_only}),
        )
        .await;
    assert_eq!(status, 200, "{out}");
    out["token"].as_str().unwrap().to_string()
}

async fn as_token(app: &TestApp, token: &str, method: Method, path: &str) -> (u16, Value) {
    let resp = app
        .client
        .request(method, format!("{}{path}", app.base))
        .bearer_auth(token)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    into_parts(resp).await
}

async fn a_portal_token_listens_on_its_own_application_only(app: TestApp) {
    let a = app.create_app("a").await;
    let b = app.create_app("b").await;
    let token = portal_token(&app, &a, false).await;
    let (status, out) = as_token(
        &app,
        &token,
        Method::POST,
        &format!("/api/v1/app/{a}/listen"),
    )
    .await;
    assert_eq!(status, 201, "{out}");
    let (status, _) = as_token(
        &app,
        &token,
        Method::POST,
        &format!("/api/v1/app/{b}/listen"),
    )
    .await;
    assert_eq!(status, 404);
    // Nor B's relay endpoint, named through A or through B.
    let (_, theirs) = listen(&app, &b, json!({})).await;
    let theirs = theirs["endpointId"].as_str().unwrap();
    for path in [
        format!("/api/v1/app/{b}/listen/{theirs}"),
        format!("/api/v1/app/{a}/listen/{theirs}"),
    ] {
        let (status, _) = as_token(&app, &token, Method::GET, &path).await;
        assert_eq!(status, 404, "{path}");
    }
    // A read-only token may neither create a relay endpoint nor stream one.
    let read_only = portal_token(&app, &a, true).await;
    let (status, _) = as_token(
        &app,
        &read_only,
        Method::POST,
        &format!("/api/v1/app/{a}/listen"),
    )
    .await;
    assert_eq!(status, 403);
    let ours = out["endpointId"].as_str().unwrap();
    let (status, out) = as_token(
        &app,
        &read_only,
        Method::GET,
        &format!("/api/v1/app/{a}/listen/{ours}"),
    )
    .await;
    assert_eq!(status, 403, "{out}");
    assert!(out["detail"].as_str().unwrap().contains("read-only"));
}

async fn results_for_no_waiting_attempt_are_counted_as_unmatched(app: TestApp) {
    let app_id = app.create_app("shop").await;
    let (_, out) = listen(&app, &app_id, json!({})).await;
    let results = out["results"].as_str().unwrap();
    let (status, out) = app
        .post(
            results,
            json!([{"id": 99, "ms": 1, "outcome": "response", "status": 200}]),
        )
        .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out, json!({"accepted": 0, "unmatched": 1}));
    let (status, out) = app
        .post(
            results,
            json!([{"id": 1, "ms": 1, "outcome": "response", "status": 1000}]),
        )
        .await;
    assert_eq!(status, 422, "{out}");
    assert_eq!(out["detail"][0]["loc"], json!(["body", "0", "status"]));
}
