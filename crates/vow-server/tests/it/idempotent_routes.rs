//! `Idempotency-Key` on every create route besides message creation (which `idempotency.rs`
//! covers in depth): the same key and request replay the first response and write nothing more
//! (counted in the store); the same key sent to another target is a reuse; a business refusal
//! on the way is replayed; an invalid key is refused on every route before anything runs; and a
//! key's status can be read back, scoped to its application.

use reqwest::{Method, Response};
use serde_json::{json, Value};
use vow_core::{AppId, EndpointId};
use vow_store::{DeliveryStatus, Order, Seek};

use crate::helpers::{into_parts, TestApp};

/// POSTs `body` (or nothing) to `path` with `Idempotency-Key: key`.
pub(crate) async fn keyed(app: &TestApp, path: &str, key: &str, body: Option<Value>) -> Response {
    let mut req = app
        .request(Method::POST, path)
        .header("idempotency-key", key);
    if let Some(body) = body {
        req = req.json(&body);
    }
    req.send().await.unwrap()
}

pub(crate) fn replayed(r: &Response) -> bool {
    r.headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true")
}

/// Sends the same keyed request twice: the first runs, the second replays it byte for byte.
/// Returns the first answer's status and body.
pub(crate) async fn twice(
    app: &TestApp,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let first = keyed(app, path, key, body.clone()).await;
    assert!(!replayed(&first), "{path}: the first request runs");
    assert!(
        first.headers().contains_key("idempotency-expires"),
        "{path}"
    );
    let status = first.status().as_u16();
    let first_body = first.bytes().await.unwrap();
    let second = keyed(app, path, key, body).await;
    assert!(replayed(&second), "{path}: the second request is a replay");
    assert_eq!(second.status().as_u16(), status, "{path}");
    assert_eq!(second.bytes().await.unwrap(), first_body, "{path}");
    let value = serde_json::from_slice(&first_body).unwrap_or(Value::Null);
    (status, value)
}

fn all() -> Seek {
    Seek::for_iterator(None, Order::Ascending, 250)
}

async fn applications_event_types_and_endpoints_are_created_once_per_key(app: TestApp) {
    let (status, created) =
        twice(&app, "/api/v1/app", "app-1", Some(json!({"name": "Shop"}))).await;
    assert_eq!(status, 201);
    let apps = app.store.list_applications(&all()).await.unwrap();
    assert_eq!(apps.len(), 1);
    assert_eq!(apps[0].id.to_string(), created["id"]);

    let event_type = json!({"name": "invoice.paid", "description": "Paid"});
    let (status, _) = twice(&app, "/api/v1/event-type", "et-1", Some(event_type)).await;
    assert_eq!(status, 201);
    let types = app.store.list_event_types(&all(), true).await.unwrap();
    assert_eq!(types.len(), 1);

    let app_id = created["id"].as_str().unwrap();
    let path = format!("/api/v1/app/{app_id}/endpoint");
    let endpoint = json!({"url": "https://a.example/hook"});
    let (status, ep) = twice(&app, &path, "ep-1", Some(endpoint)).await;
    assert_eq!(status, 201);
    let app_id = AppId::parse(app_id).unwrap();
    let endpoints = app.store.list_endpoints(app_id, &all()).await.unwrap();
    assert_eq!(endpoints.len(), 1);
    assert_eq!(endpoints[0].id.to_string(), ep["id"]);

    // Without a key, the same body is a new request: a second endpoint.
    let (status, _) = app
        .post(&path, json!({"url": "https://a.example/hook"}))
        .await;
    assert_eq!(status, 201);
    assert_eq!(
        app.store
            .list_endpoints(app_id, &all())
            .await
            .unwrap()
            .len(),
        2
    );
}

async fn a_secret_rotation_runs_once_and_the_key_cannot_rotate_another_endpoint(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    let a = app
        .create_endpoint(&app_id, json!({"url": "https://a.example/"}))
        .await;
    let b = app
        .create_endpoint(&app_id, json!({"url": "https://b.example/"}))
        .await;
    let rotate = |ep: &str| format!("/api/v1/app/{app_id}/endpoint/{ep}/secret/rotate");
    let (status, out) = twice(&app, &rotate(&a), "rot-1", None).await;
    assert_eq!(status, 200);
    let (app_key, a_id) = (
        AppId::parse(&app_id).unwrap(),
        EndpointId::parse(&a).unwrap(),
    );
    let secrets = app
        .store
        .endpoint_secrets(app_key, a_id, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(
        secrets.len(),
        2,
        "one rotation: the new secret and the old one in grace"
    );
    assert_eq!(secrets[0].key, out["key"].as_str().unwrap());

    let other = keyed(&app, &rotate(&b), "rot-1", None).await;
    let (status, problem) = into_parts(other).await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["type"], "urn:vow:problem:idempotency-key-reused");
    let b_id = EndpointId::parse(&b).unwrap();
    let b_secrets = app
        .store
        .endpoint_secrets(app_key, b_id, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(b_secrets.len(), 1, "b was not rotated");
}

/// A message to a disabled endpoint whose delivery is held, ready to be replayed.
async fn held_delivery(app: &TestApp) -> (String, String, String) {
    let app_id = app.create_app("Shop").await;
    let ep = app
        .create_endpoint(
            &app_id,
            json!({"url": "https://a.example/", "disabled": true}),
        )
        .await;
    let msg = json!({"eventType": "invoice.paid", "payload": {"n": 1}});
    let (status, out) = app.post(&format!("/api/v1/app/{app_id}/msg"), msg).await;
    assert_eq!(status, 202, "{out}");
    let msg_id = out["id"].as_str().unwrap().to_owned();
    let deliveries = app.deliveries_of(&app_id, &msg_id).await;
    assert_eq!(deliveries[0].status, DeliveryStatus::Held);
    (app_id, ep, msg_id)
}

async fn replay_recover_and_resend_run_once_per_key(app: TestApp) {
    let (app_id, ep, msg_id) = held_delivery(&app).await;
    let replay = format!("/api/v1/app/{app_id}/endpoint/{ep}/replay");
    let (status, out) = twice(&app, &replay, "replay-1", Some(json!({}))).await;
    assert_eq!((status, out["count"].as_u64()), (200, Some(1)));
    let after_replay = app.deliveries_of(&app_id, &msg_id).await;
    assert_eq!(after_replay[0].status, DeliveryStatus::Pending);
    assert!(after_replay[0].manual);

    // A resend runs once: its replay leaves the delivery as the first resend made it.
    let resend = format!("/api/v1/app/{app_id}/msg/{msg_id}/endpoint/{ep}/resend");
    let first = keyed(&app, &resend, "resend-1", None).await;
    assert_eq!(first.status(), 202);
    let after_resend = app.deliveries_of(&app_id, &msg_id).await;
    let again = keyed(&app, &resend, "resend-1", None).await;
    assert!(replayed(&again));
    assert_eq!(app.deliveries_of(&app_id, &msg_id).await, after_resend);

    let recover = format!("/api/v1/app/{app_id}/endpoint/{ep}/recover");
    let since = json!({"since": "2020-01-01T00:00:00Z"});
    let (status, task) = twice(&app, &recover, "recover-1", Some(since)).await;
    assert_eq!(status, 202);
    assert_eq!(task["status"], "finished");
    assert_eq!(app.deliveries_of(&app_id, &msg_id).await, after_resend);
}

async fn send_example_creates_one_message_per_key_and_replays_a_refusal(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    let ep = app
        .create_endpoint(&app_id, json!({"url": "https://a.example/"}))
        .await;
    let path = format!("/api/v1/app/{app_id}/endpoint/{ep}/send-example");
    let body = json!({"eventType": "invoice.paid"});

    // No such event type yet: a business refusal, stored and replayed even once it exists.
    let (status, _) = twice(&app, &path, "ex-1", Some(body.clone())).await;
    assert_eq!(status, 404);
    let schema = json!({"1": {"type": "object", "examples": [{"n": 1}]}});
    let et = json!({"name": "invoice.paid", "description": "Paid", "schemas": schema});
    assert_eq!(app.post("/api/v1/event-type", et).await.0, 201);
    let late = keyed(&app, &path, "ex-1", Some(body.clone())).await;
    assert!(replayed(&late));
    assert_eq!(late.status(), 404);

    let (status, out) = twice(&app, &path, "ex-2", Some(body)).await;
    assert_eq!(status, 202, "{out}");
    let seek = Seek::for_iterator(None, Order::Descending, 10);
    let messages = app
        .store
        .list_messages(AppId::parse(&app_id).unwrap(), &Default::default(), &seek)
        .await
        .unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].id.to_string(), out["id"]);
}

async fn an_invalid_key_is_refused_on_every_create_route_before_anything_runs(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    let ep = app
        .create_endpoint(&app_id, json!({"url": "https://a.example/"}))
        .await;
    let msg = "msg_01J00000000000000000000000";
    let app_prefix = format!("/api/v1/app/{app_id}");
    let paths: Vec<(&str, String)> = vow_server::http::idempotency::ROUTES
        .iter()
        .map(|route| {
            let path = route
                .template
                .replace("/api/v1/app/{app_id}", &app_prefix)
                .replace("{endpoint_id}", &ep)
                .replace("{msg_id}", msg);
            (route.name, path)
        })
        .collect();
    assert_eq!(paths.len(), vow_server::http::idempotency::ROUTES.len());
    assert!(paths
        .iter()
        .any(|(name, _)| *name == "endpoint.secret.rotate"));
    let too_long = "k".repeat(256);
    for (name, path) in &paths {
        let resp = keyed(&app, path, &too_long, Some(json!({"name": "x"}))).await;
        let (status, problem) = into_parts(resp).await;
        assert_eq!(status, 400, "{name}: {problem}");
        assert_eq!(
            problem["type"], "urn:vow:problem:idempotency-key-invalid",
            "{name}"
        );
    }
    assert_eq!(app.store.list_applications(&all()).await.unwrap().len(), 1);
    let app_key = AppId::parse(&app_id).unwrap();
    assert_eq!(
        app.store
            .list_endpoints(app_key, &all())
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn a_keys_status_is_read_back_within_its_application(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    let msg = json!({"eventType": "invoice.paid", "payload": {"n": 1}});
    let resp = keyed(
        &app,
        &format!("/api/v1/app/{app_id}/msg"),
        "status-1",
        Some(msg),
    )
    .await;
    let (status, created) = into_parts(resp).await;
    assert_eq!(status, 202);

    let status_of = |key: &str, query: &str| format!("/api/v1/idempotency-key/{key}?{query}");
    let (status, out) = app
        .get(&status_of(
            "status-1",
            &format!("route=message.create&app_id={app_id}"),
        ))
        .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["state"], "completed");
    assert_eq!(out["route"], "message.create");
    assert_eq!(out["resource"], created["id"]);
    assert!(out["expiresAt"].is_string());

    let other = app.create_app("Other").await;
    let (status, _) = app
        .get(&status_of(
            "status-1",
            &format!("route=message.create&app_id={other}"),
        ))
        .await;
    assert_eq!(status, 404, "another application does not see the key");
    let (status, _) = app
        .get(&status_of(
            "status-2",
            &format!("route=message.create&app_id={app_id}"),
        ))
        .await;
    assert_eq!(status, 404);
    let (status, out) = app
        .get(&status_of("status-1", "route=message.create"))
        .await;
    assert_eq!(status, 422, "{out}");
    assert_eq!(out["detail"][0]["loc"], json!(["query", "app_id"]));
    let (status, out) = app
        .get(&status_of("status-1", "route=message.delete"))
        .await;
    assert_eq!(status, 422, "{out}");
}

on_both_stores!(
    applications_event_types_and_endpoints_are_created_once_per_key,
    a_secret_rotation_runs_once_and_the_key_cannot_rotate_another_endpoint,
    replay_recover_and_resend_run_once_per_key,
    send_example_creates_one_message_per_key_and_replays_a_refusal,
    an_invalid_key_is_refused_on_every_create_route_before_anything_runs,
    a_keys_status_is_read_back_within_its_application,
);
