//! The API `vow listen` uses (`/api/v1/app/{app}/listen...`, `/api/v1/source/{source}/listen...`):
//! what a relay endpoint or destination is made of, what is refused with which status, and who
//! may listen where. The relaying itself is tested end to end with real processes in
//! `cli_listen` and `cli_listen_source`.

use chrono::{Duration, Utc};
use reqwest::Method;
use serde_json::{json, Value};
use vow_core::{DestinationId, SourceId};
use vow_store::relay::RelayTarget;

use crate::helpers::{into_parts, TestApp};

on_both_stores!(
    a_relay_endpoint_is_an_ordinary_endpoint_with_the_filters_asked_for,
    bad_filters_are_refused_naming_the_field,
    only_a_relay_endpoint_can_be_listened_on,
    a_portal_token_listens_on_its_own_application_only,
    results_for_no_waiting_attempt_are_counted_as_unmatched,
    a_source_listen_adds_a_relay_destination_kept_through_edits,
    source_listen_refusals_name_the_problem_and_write_nothing,
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

/// A GitHub source with `destinations` (URLs); its id.
async fn source_with(app: &TestApp, destinations: &[String]) -> String {
    let destinations: Vec<Value> = destinations.iter().map(|u| json!({"url": u})).collect();
    let body = json!({"scheme": "github", "secrets": ["s3cret"], "destinations": destinations});
    let (status, out) = app.post("/api/v1/source", body).await;
    assert_eq!(status, 201, "{out}");
    out["id"].as_str().unwrap().to_owned()
}

/// The source's destinations, as read back.
async fn destinations(app: &TestApp, source: &str) -> Vec<Value> {
    let (status, out) = app.get(&format!("/api/v1/source/{source}")).await;
    assert_eq!(status, 200, "{out}");
    out["destinations"].as_array().unwrap().clone()
}

/// Every relay target recorded (taken out of the store: call it last).
async fn recorded_targets(app: &TestApp) -> Vec<RelayTarget> {
    let later = Utc::now() + Duration::days(1);
    app.stores()
        .store
        .take_stale_relays(later, 1000)
        .await
        .unwrap()
}

async fn a_source_listen_adds_a_relay_destination_kept_through_edits(app: TestApp) {
    let source = source_with(&app, &["https://example.com/hook".into()]).await;
    let (status, out) = app
        .post(&format!("/api/v1/source/{source}/listen"), json!({}))
        .await;
    assert_eq!(status, 201, "{out}");
    let dst = out["destinationId"].as_str().unwrap().to_owned();
    assert!(out.get("endpointId").is_none(), "{out}");
    let stream = format!("/api/v1/source/{source}/listen/{dst}");
    assert_eq!(out["stream"], stream.as_str());
    assert_eq!(out["results"], format!("{stream}/result").as_str());
    let listed = destinations(&app, &source).await;
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1]["id"], dst.as_str());
    assert_eq!(listed[1]["url"], "relay://listen");
    // The secret answered is the one vow signs the destination's forwards with.
    let (_, secrets) = app.get(&format!("/api/v1/source/{source}/secret")).await;
    let relay_secret = &secrets["destinations"][1];
    assert_eq!(relay_secret["id"], dst.as_str());
    assert_eq!(relay_secret["secret"], out["secret"]);
    // An edit of the source keeps it, relay URL and all.
    let (status, patched) = app
        .patch(
            &format!("/api/v1/source/{source}"),
            json!({"description": "renamed"}),
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(destinations(&app, &source).await, listed);
    // No destination is made a relay destination by hand.
    let mut put =
        json!({"scheme": "github", "secrets": ["s3cret"], "destinations": listed.clone()});
    put["destinations"]
        .as_array_mut()
        .unwrap()
        .push(json!({"url": "relay://listen"}));
    let (status, out) = app.put(&format!("/api/v1/source/{source}"), put).await;
    assert_eq!(status, 422, "{out}");
    assert!(out.to_string().contains("destinations"), "{out}");
    assert_eq!(destinations(&app, &source).await, listed, "nothing written");
    // Ctrl-C's DELETE removes it, and only it; once.
    let (status, _) = app.delete(&stream).await;
    assert_eq!(status, 204);
    assert_eq!(destinations(&app, &source).await, listed[..1]);
    let (status, _) = app.delete(&stream).await;
    assert_eq!(status, 404);
    // It was recorded as seen, for the expiry.
    let expected = RelayTarget::Destination {
        source: SourceId::parse(&source).unwrap(),
        id: DestinationId::parse(&dst).unwrap(),
    };
    assert_eq!(recorded_targets(&app).await, vec![expected]);
}

async fn source_listen_refusals_name_the_problem_and_write_nothing(app: TestApp) {
    let (status, out) = app.post("/api/v1/source/nope/listen", json!({})).await;
    assert_eq!(status, 422, "{out}");
    assert!(out.to_string().contains("source_id"), "{out}");
    let missing = SourceId::new();
    let (status, _) = app
        .post(&format!("/api/v1/source/{missing}/listen"), json!({}))
        .await;
    assert_eq!(status, 404);
    // A source with the most destinations it may have: 409, and nothing added or recorded.
    let full: Vec<String> = (0..20)
        .map(|i| format!("https://example.com/{i}"))
        .collect();
    let source = source_with(&app, &full).await;
    let (status, out) = app
        .post(&format!("/api/v1/source/{source}/listen"), json!({}))
        .await;
    assert_eq!(status, 409, "{out}");
    assert!(
        out["detail"].as_str().unwrap().contains("20 destinations"),
        "{out}"
    );
    let listed = destinations(&app, &source).await;
    assert_eq!(listed.len(), 20);
    // Only a relay destination of this source can be listened on.
    let ordinary = listed[0]["id"].as_str().unwrap();
    let (status, out) = app
        .get(&format!("/api/v1/source/{source}/listen/{ordinary}"))
        .await;
    assert_eq!(status, 409, "{out}");
    assert!(out["detail"]
        .as_str()
        .unwrap()
        .contains("not a relay destination"));
    let other = source_with(&app, &[]).await;
    let (_, theirs) = app
        .post(&format!("/api/v1/source/{other}/listen"), json!({}))
        .await;
    let theirs = theirs["destinationId"].as_str().unwrap();
    let (status, _) = app
        .get(&format!("/api/v1/source/{source}/listen/{theirs}"))
        .await;
    assert_eq!(status, 404, "another source's destination");
    let (status, out) = app
        .get(&format!("/api/v1/source/{source}/listen/ep_nope"))
        .await;
    assert_eq!(status, 422, "{out}");
    assert!(out.to_string().contains("destination_id"), "{out}");
    let results = format!("/api/v1/source/{other}/listen/{theirs}/result");
    let (status, out) = app
        .post(
            &results,
            json!([{"id": 1, "ms": 1, "outcome": "response", "status": 1000}]),
        )
        .await;
    assert_eq!(status, 422, "{out}");
    // An application's portal token reaches no source.
    let app_id = app.create_app("shop").await;
    let token = portal_token(&app, &app_id, false).await;
    let (status, _) = as_token(
        &app,
        &token,
        Method::POST,
        &format!("/api/v1/source/{other}/listen"),
    )
    .await;
    assert!(matches!(status, 401 | 403), "{status}");
    assert_eq!(destinations(&app, &other).await.len(), 1);
    // Only the one relay destination made was recorded.
    let recorded = recorded_targets(&app).await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
}
