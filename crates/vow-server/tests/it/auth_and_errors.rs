//! Authentication, health, and how bad input is refused: precise 4xx, nothing written.

use reqwest::Method;
use serde_json::json;
use vow_store::{Order, Seek};

use crate::helpers::{into_parts, test_config, TestApp};

async fn count_apps(app: &TestApp) -> usize {
    let seek = Seek::for_iterator(None, Order::Ascending, 1000);
    app.store.list_applications(&seek).await.unwrap().len()
}

async fn health_answers_without_a_token(app: TestApp) {
    for method in [Method::GET, Method::HEAD] {
        let resp = app
            .client
            .request(method, format!("{}/api/v1/health", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 204);
        assert!(resp.headers().contains_key("x-request-id"));
    }
}

async fn requests_without_the_right_token_are_refused(app: TestApp) {
    let url = format!("{}/api/v1/app", app.base);
    let none = into_parts(app.client.get(&url).send().await.unwrap()).await;
    assert_eq!(none.0, 401);
    assert_eq!(none.1["code"], "authentication_failed");
    assert!(none.1["detail"].as_str().unwrap().contains("missing"));
    let wrong = app
        .client
        .get(&url)
        .bearer_auth("nope")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let basic = app
        .client
        .get(&url)
        .header("authorization", "Basic abc")
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 401);
    let create = app
        .client
        .post(&url)
        .bearer_auth("nope")
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(create.status(), 401);
    assert_eq!(count_apps(&app).await, 0);
}

async fn malformed_json_is_a_400(app: TestApp) {
    let resp = app
        .request(Method::POST, "/api/v1/app")
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    let (status, body) = into_parts(resp).await;
    assert_eq!(status, 400);
    assert_eq!(body["code"], "invalid_json");
    assert_eq!(count_apps(&app).await, 0);
}

async fn a_missing_field_and_a_wrong_type_are_named(app: TestApp) {
    let (status, body) = app.post("/api/v1/app", json!({})).await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["loc"], json!(["body", "name"]));
    assert_eq!(body["detail"][0]["type"], "value_error.missing");

    let (status, body) = app
        .post("/api/v1/app", json!({"name": "x", "throttleRate": "fast"}))
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["loc"], json!(["body", "throttleRate"]));

    let (status, body) = app
        .post("/api/v1/app", json!({"name": "x", "uid": "has space"}))
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["loc"], json!(["body", "uid"]));
    assert_eq!(count_apps(&app).await, 0);
}

async fn another_kinds_id_in_the_path_is_named(app: TestApp) {
    let app_id = app.create_app("A").await;
    let ep = app
        .create_endpoint(&app_id, json!({"url": "https://example.com/h"}))
        .await;
    let (status, body) = app.get(&format!("/api/v1/app/{ep}")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["detail"][0]["loc"], json!(["path", "app_id"]));
    assert!(body["detail"][0]["msg"]
        .as_str()
        .unwrap()
        .contains("got an endpoint id"));
}

async fn a_body_over_the_limit_is_a_413_and_writes_nothing(app: TestApp) {
    let big = "x".repeat(1_100_000);
    let (status, body) = app.post("/api/v1/app", json!({ "name": big })).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["code"], "payload_too_large");
    assert_eq!(count_apps(&app).await, 0);
}

async fn a_non_json_media_type_is_a_415(app: TestApp) {
    let resp = app
        .request(Method::POST, "/api/v1/app")
        .header("content-type", "text/plain")
        .body("{\"name\":\"x\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415);
    assert_eq!(count_apps(&app).await, 0);
}

async fn an_unknown_route_is_a_json_404(app: TestApp) {
    let (status, body) = app.get("/api/v1/nope").await;
    assert_eq!(status, 404);
    assert_eq!(body["code"], "not_found");
}

on_both_stores!(
    health_answers_without_a_token,
    requests_without_the_right_token_are_refused,
    malformed_json_is_a_400,
    a_missing_field_and_a_wrong_type_are_named,
    another_kinds_id_in_the_path_is_named,
    a_body_over_the_limit_is_a_413_and_writes_nothing,
    a_non_json_media_type_is_a_415,
    an_unknown_route_is_a_json_404,
);

#[tokio::test]
async fn a_generated_admin_token_is_stored_only_as_a_hash_and_kept_across_restarts() {
    let (store, _dir) = vow_store_sqlite::testing::fresh_store();
    let stores = vow_server::startup::Stores::new(store);
    let store = stores.store.clone();
    let config = test_config(&[("admin_token", "")]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let first = vow_server::startup::Server::build(&config, stores.clone(), listener)
        .await
        .unwrap();
    let token = first
        .generated_token()
        .expect("a token is generated")
        .to_string();
    let stored = store.admin_token_hash().await.unwrap().unwrap();
    assert!(!stored.contains(&token));
    assert_eq!(stored.len(), 64, "a hex SHA-256");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let second = vow_server::startup::Server::build(&config, stores.clone(), listener)
        .await
        .unwrap();
    assert!(second.generated_token().is_none(), "printed only once");
    let addr = second.local_addr().unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(second.run(shutdown.clone()));
    let client = reqwest::Client::new();
    let ok = client
        .get(format!("http://{addr}/api/v1/app"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    shutdown.cancel();
}
