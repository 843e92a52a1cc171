//! The OpenAPI document (`GET /api/v1/openapi.json`) and the API reference page (`GET /docs`):
//! every operation the document names is routed; real responses validate against the schemas
//! it declares for them (and carry no field it does not declare); the page shows an operation
//! with its request schema's fields in a real headless Chromium.

use reqwest::Method;
use serde_json::{json, Value};

use crate::console::Browser;
use crate::helpers::TestApp;
use crate::receiver::Receiver;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

async fn spec(app: &TestApp) -> Value {
    // Unauthenticated: no bearer token.
    let resp = reqwest::get(format!("{}/api/v1/openapi.json", app.base))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.expect("the document is JSON")
}

/// `{app_id}` and the like filled with a name no row has.
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|seg| match seg.strip_prefix('{') {
            Some(_) => "missing",
            None => seg,
        })
        .collect::<Vec<_>>()
        .join("/")
}

async fn every_documented_operation_is_routed(app: TestApp) {
    let spec = spec(&app).await;
    assert!(
        spec["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        spec["openapi"]
    );
    let mut operations = 0;
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in METHODS.into_iter().filter(|m| item.get(*m).is_some()) {
            operations += 1;
            let op = &item[method];
            assert!(
                op["operationId"].is_string(),
                "{method} {path} has an operationId"
            );
            let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let resp = app.request(m, &concrete(path)).send().await.unwrap();
            let status = resp.status().as_u16();
            let declared = op["responses"].get(status.to_string()).is_some();
            let body: Value = if status == 200 && path.ends_with("/stream") {
                Value::Null // a stream of server-sent events: the head was enough
            } else {
                resp.json().await.unwrap_or(Value::Null)
            };
            assert_ne!(status, 405, "{method} {path}: method not allowed");
            assert_ne!(
                body["detail"], "no such route",
                "{method} {path} is not routed"
            );
            assert!(
                declared,
                "{method} {path} answered {status}, which it does not declare"
            );
        }
    }
    // The management API, idempotency, sources, pull mode, ingest, auth, health, metrics.
    assert!(operations >= 78, "only {operations} operations");
    for path in [
        "/api/v1/app/{app_id}/msg",
        "/api/v1/idempotency-key/{key}",
        "/api/v1/source/{source_id}/event/claim",
        "/in/{source_id}",
        "/api/v1/auth/app-portal-access/{app_id}",
        "/api/v1/health",
        "/health/ready",
    ] {
        assert!(spec["paths"].get(path).is_some(), "{path} is documented");
    }
    let create = &spec["paths"]["/api/v1/app"]["post"];
    assert_eq!(create["operationId"], "v1.application.create");
    assert_eq!(create["security"][0]["HTTPBearer"], json!([]));
    assert!(spec["paths"]["/in/{source_id}"]["post"]["security"].is_null());
}

/// Checks `body` against what the document declares for `method path` answering `status`.
fn conforms(spec: &Value, method: &str, path: &str, status: u16, body: &Value) {
    let response = &spec["paths"][path][method]["responses"][status.to_string()];
    let response = match response["$ref"].as_str() {
        Some(r) => &spec["components"]["responses"][r.rsplit('/').next().unwrap()],
        None => response,
    };
    let schema = &response["content"]["application/json"]["schema"];
    assert!(
        schema.is_object(),
        "{method} {path} declares a JSON body for {status}"
    );
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "allOf": [schema],
        "components": spec["components"],
    });
    let validator = jsonschema::draft202012::new(&root).expect("the schema compiles");
    let errors: Vec<String> = validator.iter_errors(body).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{method} {path} {status}: {errors:?}\n{body}"
    );
    let mut undeclared = Vec::new();
    undeclared_fields(spec, schema, body, "", &mut undeclared);
    assert!(
        undeclared.is_empty(),
        "{method} {path}: undeclared {undeclared:?}"
    );
}

/// Fields of `value` that its schema's `properties` do not name.
fn undeclared_fields(spec: &Value, schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap();
        return undeclared_fields(spec, &spec["components"]["schemas"][name], value, at, out);
    }
    if let (Some(props), Some(obj)) = (schema["properties"].as_object(), value.as_object()) {
        for (k, v) in obj {
            match props.get(k) {
                Some(p) => undeclared_fields(spec, p, v, &format!("{at}.{k}"), out),
                None => out.push(format!("{at}.{k}")),
            }
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
        for v in list {
            undeclared_fields(spec, items, v, &format!("{at}[]"), out);
        }
    }
}

async fn real_responses_match_the_document(app: TestApp) {
    let spec = spec(&app).await;
    let receiver = Receiver::start(&[200]).await;
    let (status, created) = app
        .post(
            "/api/v1/app",
            json!({"name": "Shop", "uid": "shop", "metadata": {"k": "v"}}),
        )
        .await;
    conforms(&spec, "post", "/api/v1/app", status, &created);
    let (status, got) = app.get("/api/v1/app/shop").await;
    conforms(&spec, "get", "/api/v1/app/{app_id}", status, &got);
    let body = json!({"url": receiver.url, "description": "orders"});
    let (status, endpoint) = app.post("/api/v1/app/shop/endpoint", body).await;
    conforms(
        &spec,
        "post",
        "/api/v1/app/{app_id}/endpoint",
        status,
        &endpoint,
    );
    let msg = json!({"eventType": "order.paid", "payload": {"id": 7}});
    let (status, sent) = app.post("/api/v1/app/shop/msg", msg).await;
    assert_eq!(status, 202);
    conforms(&spec, "post", "/api/v1/app/{app_id}/msg", status, &sent);
    let (status, list) = app.get("/api/v1/app/shop/msg").await;
    conforms(&spec, "get", "/api/v1/app/{app_id}/msg", status, &list);
    assert_eq!(list["data"][0]["id"], sent["id"], "the message is stored");
    let (status, endpoints) = app.get("/api/v1/app/shop/endpoint").await;
    conforms(
        &spec,
        "get",
        "/api/v1/app/{app_id}/endpoint",
        status,
        &endpoints,
    );
    assert_eq!(endpoints["data"].as_array().unwrap().len(), 1);
    // Problems: a 404 and a 422, in the shapes declared for every operation.
    let (status, missing) = app.get("/api/v1/app/nobody").await;
    assert_eq!(status, 404);
    conforms(&spec, "get", "/api/v1/app/{app_id}", status, &missing);
    let (status, invalid) = app.post("/api/v1/app", json!({"name": ""})).await;
    assert_eq!(status, 422);
    conforms(&spec, "post", "/api/v1/app", status, &invalid);
    // The stored rows behind the answers.
    let app_id = created["id"].as_str().unwrap();
    let msg_id = sent["id"].as_str().unwrap();
    assert_eq!(app.deliveries_of(app_id, msg_id).await.len(), 1);
}

async fn the_reference_page_shows_an_operation_and_its_request_schema(app: TestApp) {
    let browser = Browser::start().await;
    browser
        .client
        .goto(&format!("{}/docs", app.base))
        .await
        .unwrap();
    let op = browser.text("#v1-message-create").await;
    assert!(op.contains("POST"), "{op}");
    assert!(op.contains("/api/v1/app/{app_id}/msg"), "{op}");
    assert!(op.contains("MessageIn"), "{op}");
    let fields = browser.text("#v1-message-create table.fields").await;
    for field in ["eventType", "payload", "channels"] {
        assert!(fields.contains(field), "{field} in {fields}");
    }
    browser
        .client
        .execute(
            "document.getElementById('v1-message-create').scrollIntoView(); return null;",
            vec![],
        )
        .await
        .unwrap();
    browser.screenshot("api-reference").await;
    // The filter hides the operations it does not match.
    let search = browser
        .client
        .find(fantoccini::Locator::Css("#search"))
        .await
        .unwrap();
    search.send_keys("event-type").await.unwrap();
    let hidden = browser
        .client
        .execute(
            "return document.getElementById('v1-message-create').classList.contains('hidden');",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(hidden, json!(true));
}

on_both_stores!(
    every_documented_operation_is_routed,
    real_responses_match_the_document,
    the_reference_page_shows_an_operation_and_its_request_schema,
);
