//! `Idempotency-Key` on message creation: a replay returns the first response and writes
//! nothing; a different body is refused naming what differs; keys are per application (an
//! application's uid and id share them); a bad header is refused and a bad body is not stored;
//! concurrent identical requests create one message; the quoted and bare forms of a key are one
//! key.

use reqwest::{Method, Response};
use serde_json::{json, Value};
use vow_core::AppId;
use vow_store::{MessageFilter, Order, Seek};

use crate::helpers::{TestApp, TOKEN};

const PROBLEM: &str = "application/problem+json";

/// POSTs `body` as a message of `app_id` with `Idempotency-Key: key`.
async fn send(app: &TestApp, app_id: &str, key: &str, body: &Value) -> Response {
    post(&app.client, &app.base, app_id, key, body).await
}

/// [`send`] without the whole [`TestApp`] (which cannot cross tasks).
async fn post(
    client: &reqwest::Client,
    base: &str,
    app_id: &str,
    key: &str,
    body: &Value,
) -> Response {
    client
        .request(Method::POST, format!("{base}/api/v1/app/{app_id}/msg"))
        .bearer_auth(TOKEN)
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .unwrap()
}

fn header<'a>(r: &'a Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).map(|v| v.to_str().unwrap())
}

/// Status, headers' `content-type`, and the JSON body.
async fn parts(r: Response) -> (u16, String, Value) {
    let status = r.status().as_u16();
    let ct = header(&r, "content-type").unwrap_or_default().to_owned();
    let body = r.json().await.unwrap();
    (status, ct, body)
}

/// The ids of an application's stored messages.
async fn stored(app: &TestApp, app_id: &str) -> Vec<String> {
    let seek = Seek::for_iterator(None, Order::Descending, 1000);
    let rows = app
        .store
        .list_messages(
            AppId::parse(app_id).unwrap(),
            &MessageFilter::default(),
            &seek,
        )
        .await
        .unwrap();
    rows.into_iter().map(|m| m.id.to_string()).collect()
}

fn message(amount: i64) -> Value {
    json!({"eventType": "invoice.paid", "payload": {"amount": amount, "currency": "EUR"}})
}

async fn the_same_key_and_body_replay_the_first_response(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    for url in ["https://a.example/hook", "https://b.example/hook"] {
        app.create_endpoint(&app_id, json!({ "url": url })).await;
    }
    let first = send(&app, &app_id, "order-1", &message(10)).await;
    assert_eq!(first.status(), 202);
    assert_eq!(header(&first, "idempotent-replayed"), None);
    let expires = header(&first, "idempotency-expires").unwrap().to_owned();
    assert!(expires.ends_with(" GMT"), "{expires}");
    let first_body = first.bytes().await.unwrap();

    // The same body with its keys in another order is the same request.
    let reordered =
        json!({"payload": {"currency": "EUR", "amount": 10}, "eventType": "invoice.paid"});
    let second = send(&app, &app_id, "order-1", &reordered).await;
    assert_eq!(second.status(), 202);
    assert_eq!(header(&second, "idempotent-replayed"), Some("true"));
    assert_eq!(
        header(&second, "idempotency-expires"),
        Some(expires.as_str())
    );
    assert_eq!(header(&second, "content-type"), Some("application/json"));
    assert_eq!(second.bytes().await.unwrap(), first_body);

    let metrics = app.get_text("/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("vow_idempotency_replays_total ")),
        "replays are counted"
    );
    let id = serde_json::from_slice::<Value>(&first_body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(stored(&app, &app_id).await, vec![id.clone()]);
    assert_eq!(app.deliveries_of(&app_id, &id).await.len(), 2);
}

async fn the_same_key_with_another_body_is_refused_naming_the_difference(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({ "url": "https://a.example/hook" }))
        .await;
    let (status, _, first) = parts(send(&app, &app_id, "order-2", &message(10)).await).await;
    assert_eq!(status, 202);
    let (status, ct, problem) = parts(send(&app, &app_id, "order-2", &message(99)).await).await;
    assert_eq!((status, ct.as_str()), (422, PROBLEM), "{problem}");
    assert_eq!(problem["type"], "urn:vow:problem:idempotency-key-reused");
    assert_eq!(problem["differences"], json!(["/payload/amount"]));
    assert!(
        !problem.to_string().contains("99"),
        "values are never shown"
    );
    assert_eq!(
        stored(&app, &app_id).await,
        vec![first["id"].as_str().unwrap()]
    );
}

async fn another_application_with_the_same_key_gets_its_own_message(app: TestApp) {
    let (a, b) = (app.create_app("A").await, app.create_app("B").await);
    let (_, _, from_a) = parts(send(&app, &a, "shared-key", &message(1)).await).await;
    let r = send(&app, &b, "shared-key", &message(1)).await;
    assert_eq!(header(&r, "idempotent-replayed"), None);
    let (status, _, from_b) = parts(r).await;
    assert_eq!(status, 202);
    assert_ne!(from_a["id"], from_b["id"]);
    assert_eq!(stored(&app, &a).await, vec![from_a["id"].as_str().unwrap()]);
    assert_eq!(stored(&app, &b).await, vec![from_b["id"].as_str().unwrap()]);
}

async fn an_applications_uid_and_id_share_keys(app: TestApp) {
    let (status, created) = app
        .post("/api/v1/app", json!({"name": "Shop", "uid": "shop"}))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let (_, _, first) = parts(send(&app, "shop", "order-3", &message(5)).await).await;
    let again = send(&app, id, "order-3", &message(5)).await;
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    let (status, _, second) = parts(again).await;
    assert_eq!((status, &second["id"]), (202, &first["id"]));
    assert_eq!(stored(&app, id).await.len(), 1);
}

async fn an_invalid_key_is_a_400_problem_and_writes_nothing(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    let long = "k".repeat(256);
    for key in ["has space", long.as_str(), "\"unclosed"] {
        let (status, ct, problem) = parts(send(&app, &app_id, key, &message(1)).await).await;
        assert_eq!((status, ct.as_str()), (400, PROBLEM), "{problem}");
        assert_eq!(problem["type"], "urn:vow:problem:idempotency-key-invalid");
        assert!(
            !problem.to_string().contains(key),
            "the key is never echoed"
        );
    }
    assert!(stored(&app, &app_id).await.is_empty());
}

async fn a_bad_body_is_not_stored_under_its_key(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    let bad = json!({"eventType": "invoice.paid", "payload": [1]});
    let r = send(&app, &app_id, "order-5", &bad).await;
    assert_eq!(r.status(), 422);
    let (status, _, out) = parts(send(&app, &app_id, "order-5", &message(1)).await).await;
    assert_eq!(status, 202, "{out}");
    assert_eq!(
        stored(&app, &app_id).await,
        vec![out["id"].as_str().unwrap()]
    );
}

async fn concurrent_identical_requests_create_one_message(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    app.create_endpoint(&app_id, json!({ "url": "https://a.example/hook" }))
        .await;
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(50));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (client, base) = (app.client.clone(), app.base.clone());
            let (app_id, barrier) = (app_id.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let r = post(&client, &base, &app_id, "burst", &message(7)).await;
                let retry_after = header(&r, "retry-after").map(str::to_owned);
                let (status, _, body) = parts(r).await;
                (status, retry_after, body)
            })
        })
        .collect();
    let (mut accepted, mut in_progress, mut ids) = (0, 0, Vec::new());
    for task in tasks {
        let (status, retry_after, body) = task.await.unwrap();
        match status {
            202 => {
                accepted += 1;
                ids.push(body["id"].as_str().unwrap().to_owned());
            }
            409 => {
                in_progress += 1;
                assert_eq!(body["type"], "urn:vow:problem:idempotency-key-in-progress");
                let secs: u64 = retry_after.expect("409 has Retry-After").parse().unwrap();
                assert!((1..=30).contains(&secs));
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(accepted + in_progress, 50);
    assert!(accepted >= 1, "the owner's answer is 202");
    ids.dedup();
    assert_eq!(ids.len(), 1, "every 202 is the one message");
    assert_eq!(stored(&app, &app_id).await, ids);
    assert_eq!(app.deliveries_of(&app_id, &ids[0]).await.len(), 1);
    eprintln!("{accepted} × 202, {in_progress} × 409");
}

async fn the_quoted_and_bare_forms_of_a_key_are_one_key(app: TestApp) {
    let app_id = app.create_app("Shop").await;
    let (_, _, first) = parts(send(&app, &app_id, "\"order-4\"", &message(3)).await).await;
    let again = send(&app, &app_id, "order-4", &message(3)).await;
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    let (_, _, second) = parts(again).await;
    assert_eq!(first["id"], second["id"]);
    assert_eq!(stored(&app, &app_id).await.len(), 1);
}

/// A create refused for a business reason (404: no such application; 409: the eventId is taken)
/// is final: the retry with the key replays it at once instead of waiting out a lease, and still
/// writes nothing.
async fn a_business_refusal_is_stored_and_replayed(app: TestApp) {
    let missing = "app_01M8MW11JHMYKJBQ612TX2PDVR";
    let first = send(&app, missing, "k-404", &message(1)).await;
    assert_eq!(first.status(), 404);
    assert_eq!(header(&first, "idempotent-replayed"), None);
    let first_body = first.bytes().await.unwrap();
    let again = send(&app, missing, "k-404", &message(1)).await;
    assert_eq!(again.status(), 404, "replayed, not 409 in progress");
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(again.bytes().await.unwrap(), first_body);

    let app_id = app.create_app("Shop").await;
    let taken = json!({"eventType": "invoice.paid", "eventId": "evt-1", "payload": {}});
    let (status, body) = app
        .post(&format!("/api/v1/app/{app_id}/msg"), taken.clone())
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, _, conflict) = parts(send(&app, &app_id, "k-409", &taken).await).await;
    assert_eq!((status, conflict["code"].as_str()), (409, Some("conflict")));
    let again = send(&app, &app_id, "k-409", &taken).await;
    assert_eq!(again.status(), 409);
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(
        stored(&app, &app_id).await.len(),
        1,
        "only the first message"
    );
}

/// With `require_idempotency_key = "message.create"`, a create without a key is a 400 problem
/// that writes nothing; with a key it goes through.
async fn a_route_that_requires_a_key_refuses_a_request_without_one(app: TestApp) {
    let config = crate::helpers::test_config(&[("require_idempotency_key", "message.create")]);
    let app = TestApp::spawn_with(app.backend, config).await;
    let app_id = app.create_app("Shop").await;
    let resp = app
        .request(Method::POST, &format!("/api/v1/app/{app_id}/msg"))
        .json(&message(5))
        .send()
        .await
        .unwrap();
    let (status, ct, problem) = parts(resp).await;
    assert_eq!((status, ct.as_str()), (400, PROBLEM), "{problem}");
    assert_eq!(problem["type"], "urn:vow:problem:idempotency-key-missing");
    assert!(stored(&app, &app_id).await.is_empty(), "nothing written");
    assert_eq!(send(&app, &app_id, "k-1", &message(5)).await.status(), 202);
    assert_eq!(stored(&app, &app_id).await.len(), 1);
}

/// A request that finds its key in progress answers 409 at once, or with `Prefer: wait=N`
/// waits for the first request's outcome and replays it (409 when N runs out first).
async fn prefer_wait_replays_the_outcome_of_the_request_in_flight(app: TestApp) {
    use vow_store::idempotency::{Begun, Fingerprint, Scope, Settings, StoredResponse};
    let app_id = app.create_app("Shop").await;
    let body = message(8);
    let raw = serde_json::to_vec(&body).unwrap();
    let route = "/api/v1/app/{app_id}/msg";
    // Another request holds the key: begun through the store, as the handler does.
    let scope = Scope {
        principal: "admin".into(),
        application: Some(app_id.clone()),
        method: "POST".into(),
        route: route.into(),
        key: vow_idempotency::IdempotencyKey::parse("w-1").unwrap(),
    };
    let fp = Fingerprint::of("POST", route, &raw);
    let canonical = vow_idempotency::fingerprint::canonical(&body);
    let begun = app
        .store
        .begin_idempotent(
            &scope,
            &fp,
            &canonical,
            chrono::Utc::now(),
            &Settings::default(),
        )
        .await
        .unwrap();
    let Begun::Owner(token) = begun else {
        panic!("{begun:?}")
    };
    let waiting = |secs: u64| {
        app.request(Method::POST, &format!("/api/v1/app/{app_id}/msg"))
            .header("idempotency-key", "w-1")
            .header("prefer", format!("respond-async, wait={secs}"))
            .json(&body)
            .send()
    };
    assert_eq!(send(&app, &app_id, "w-1", &body).await.status(), 409);
    let started = std::time::Instant::now();
    assert_eq!(waiting(1).await.unwrap().status(), 409, "nobody finished");
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));

    let store = app.store.clone();
    let finish = tokio::spawn(async move {
        // The first request finishes 300 ms into the second one's wait: the pause is the
        // scenario under test (the waiter replays an outcome that arrives while it waits).
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let response = StoredResponse {
            status: 202,
            headers: vec![("content-type".into(), "application/json".into())],
            body: br#"{"id":"msg_from_the_first_request"}"#.to_vec(),
            resource: None,
        };
        store
            .complete_idempotent(
                &scope,
                &token,
                response,
                chrono::Utc::now(),
                &Settings::default(),
            )
            .await
            .unwrap();
    });
    let started = std::time::Instant::now();
    let replay = waiting(10).await.unwrap();
    let waited = started.elapsed();
    finish.await.unwrap();
    assert_eq!(replay.status(), 202);
    assert_eq!(header(&replay, "idempotent-replayed"), Some("true"));
    assert_eq!(
        replay.json::<Value>().await.unwrap()["id"],
        "msg_from_the_first_request"
    );
    assert!(
        waited >= std::time::Duration::from_millis(250)
            && waited < std::time::Duration::from_secs(5),
        "{waited:?}"
    );
    assert!(
        stored(&app, &app_id).await.is_empty(),
        "the waiter wrote nothing"
    );
}

on_both_stores!(
    prefer_wait_replays_the_outcome_of_the_request_in_flight,
    a_route_that_requires_a_key_refuses_a_request_without_one,
    a_business_refusal_is_stored_and_replayed,
    the_same_key_and_body_replay_the_first_response,
    the_same_key_with_another_body_is_refused_naming_the_difference,
    another_application_with_the_same_key_gets_its_own_message,
    an_applications_uid_and_id_share_keys,
    an_invalid_key_is_a_400_problem_and_writes_nothing,
    a_bad_body_is_not_stored_under_its_key,
    concurrent_identical_requests_create_one_message,
    the_quoted_and_bare_forms_of_a_key_are_one_key,
);
