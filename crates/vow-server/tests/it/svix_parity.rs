//! Svix parity, checked against the live server: vow's generated spec
//! (`GET /api/v1/openapi.json`) is compared with Svix's (`tests/data/svix-openapi.json`, the
//! open-source server's, MIT), operation by operation and field by field, and the result is
//! `docs/svix-compatibility.md`.
//!
//! For each Svix operation: vow implements it (same method and path template) or not. For each
//! request field (body properties and query parameters) of an implemented one: vow's spec
//! declares it (honoured), or a live request carrying it is a 422 naming it (refused). A field
//! that is neither fails the test: vow never drops a Svix field silently. A field no Svix
//! version has is refused the same way on every implemented operation with a body.
//!
//! The document is regenerated on every run and compared with the committed one; run with
//! `VOW_WRITE_DOCS=1` to rewrite it after a change.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::TestApp;

const SVIX: &str = include_str!("../data/svix-openapi.json");
const DOC: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/svix-compatibility.md"
);

/// What vow does with one Svix request field.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    /// vow's spec declares it on the same operation.
    Honoured,
    /// A request carrying it is a 422 that names it.
    Refused,
}

/// One Svix operation and what vow does with it and its fields.
struct Operation {
    method: String,
    path: String,
    id: String,
    /// `None`: vow does not implement it.
    fields: Option<BTreeMap<String, Field>>,
}

/// A `$ref` resolved within `spec` (one level; Svix's and vow's request schemas are refs to
/// components or inline objects).
fn resolve<'a>(spec: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap();
            &spec["components"]["schemas"][name]
        }
        None => schema,
    }
}

/// The property names of a schema, through refs and `allOf`/`oneOf`/`anyOf` (an optional body
/// is `oneOf` null and its schema).
fn properties(spec: &Value, schema: &Value) -> BTreeSet<String> {
    let schema = resolve(spec, schema);
    let mut names: BTreeSet<String> = schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for combined in ["allOf", "oneOf", "anyOf"] {
        for part in schema[combined].as_array().into_iter().flatten() {
            names.extend(properties(spec, part));
        }
    }
    names
}

/// The JSON request body schema of an operation, if it takes one.
fn body_schema(op: &Value) -> Option<&Value> {
    op["requestBody"]["content"]["application/json"]
        .get("schema")
        .filter(|s| !s.is_null())
}

/// The query parameter names of an operation (path-level parameters included).
fn query_params(spec: &Value, path_item: &Value, op: &Value) -> BTreeSet<String> {
    let params = path_item["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(op["parameters"].as_array().into_iter().flatten());
    params
        .map(|p| resolve(spec, p))
        .filter(|p| p["in"] == "query")
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect()
}

/// The smallest valid body of each Svix request schema, so a refused field is the only fault.
fn minimal_body(schema_name: &str) -> Value {
    let since = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    match schema_name {
        "ApplicationIn" => json!({"name": "parity"}),
        "EndpointIn" | "EndpointUpdate" => json!({"url": "https://example.com/parity"}),
        "EndpointHeadersIn" | "EndpointHeadersPatchIn" => json!({"headers": {}}),
        "RecoverIn" => json!({"since": since}),
        "EventExampleIn" => json!({"eventType": "parity.event"}),
        "MessageIn" => json!({"eventType": "parity.event", "payload": {}}),
        "EventTypeIn" => json!({"name": "parity.other", "description": "d"}),
        "EventTypeUpdate" => json!({"description": "d"}),
        "ApplicationPatch"
        | "EndpointPatch"
        | "EventTypePatch"
        | "EndpointSecretRotateIn"
        | "AppPortalAccessIn" => json!({}),
        other => panic!("the parity test needs a minimal body for Svix's {other}"),
    }
}

/// The ids a path template's parameters take.
struct Fixture {
    ids: BTreeMap<&'static str, String>,
}

impl Fixture {
    async fn create(app: &TestApp) -> Fixture {
        let (status, _) = app
            .post(
                "/api/v1/event-type",
                json!({"name": "parity.event", "description": "parity"}),
            )
            .await;
        assert_eq!(status, 201);
        let app_id = app.create_app("Parity").await;
        let endpoint = app
            .create_endpoint(&app_id, json!({"url": "https://example.com/parity"}))
            .await;
        let (status, msg) = app
            .post(
                &format!("/api/v1/app/{app_id}/msg"),
                json!({"eventType": "parity.event", "payload": {}}),
            )
            .await;
        assert_eq!(status, 202, "{msg}");
        let ids = BTreeMap::from([
            ("app_id", app_id),
            ("endpoint_id", endpoint),
            ("msg_id", msg["id"].as_str().unwrap().to_string()),
            ("event_type_name", "parity.event".to_string()),
            (
                "attempt_id",
                "atmpt_2VjKmPV0TBnUSmFbGFtRbA3B5Uq".to_string(),
            ),
        ]);
        Fixture { ids }
    }

    fn path(&self, template: &str) -> String {
        let mut path = template.to_string();
        for (name, id) in &self.ids {
            path = path.replace(&format!("{{{name}}}"), id);
        }
        assert!(!path.contains('{'), "no fixture id for {template}");
        path
    }
}

/// Whether a 422 answer names `field` at `place` (`body` or `query`).
fn names(answer: &Value, place: &str, field: &str) -> bool {
    answer["detail"].as_array().is_some_and(|items| {
        items.iter().any(|i| {
            i["loc"].as_array().is_some_and(|loc| {
                loc.first() == Some(&json!(place)) && loc.iter().any(|s| s == field)
            })
        })
    })
}

/// Sends `op` with `field` set (in the body on top of the minimal one, or in the query) and
/// says whether vow refused it with a 422 naming it.
async fn refuses(
    app: &TestApp,
    fixture: &Fixture,
    method: &str,
    template: &str,
    body: Option<(&str, &Value)>,
    field: (&str, &str),
) -> bool {
    let (place, name) = field;
    let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
    let mut path = fixture.path(template);
    let mut payload = body.map(|(schema, _)| minimal_body(schema));
    match place {
        "body" => {
            let sample = body.map_or(json!("x"), |(_, example)| example.clone());
            payload.as_mut().unwrap()[name] = if sample.is_null() { json!("x") } else { sample };
        }
        _ => path = format!("{path}?{name}=x"),
    }
    let (status, answer) = app.call(method, &path, payload).await;
    status == 422 && names(&answer, place, name)
}

async fn vow_honours_or_refuses_every_svix_field(app: TestApp) {
    let svix: Value = serde_json::from_str(SVIX).unwrap();
    let (status, vow) = app.get("/api/v1/openapi.json").await;
    assert_eq!(status, 200);
    let fixture = Fixture::create(&app).await;
    let mut operations = Vec::new();
    let mut silent = Vec::new();
    for (template, item) in svix["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !matches!(method.as_str(), "get" | "post" | "put" | "patch" | "delete") {
                continue;
            }
            let id = op["operationId"].as_str().unwrap_or_default().to_string();
            let Some(ours) = vow["paths"][template].get(method.as_str()) else {
                operations.push(Operation {
                    method: method.clone(),
                    path: template.clone(),
                    id,
                    fields: None,
                });
                continue;
            };
            let ours_item = &vow["paths"][template];
            let mut fields = BTreeMap::new();
            let svix_body = body_schema(op);
            let schema_name = svix_body
                .and_then(|s| s["$ref"].as_str())
                .map(|r| r.rsplit('/').next().unwrap().to_string());
            let declared_body = body_schema(ours)
                .map(|s| properties(&vow, s))
                .unwrap_or_default();
            if let (Some(schema), Some(name)) = (svix_body, schema_name.as_deref()) {
                let svix_props = resolve(&svix, schema)["properties"].clone();
                for field in properties(&svix, schema) {
                    let verdict = if declared_body.contains(&field) {
                        Field::Honoured
                    } else {
                        let example = &svix_props[&field]["example"];
                        let body = Some((name, example));
                        match refuses(&app, &fixture, method, template, body, ("body", &field))
                            .await
                        {
                            true => Field::Refused,
                            false => {
                                silent.push(format!("{method} {template} body.{field}"));
                                continue;
                            }
                        }
                    };
                    fields.insert(field, verdict);
                }
                // A field no Svix version has is refused too.
                let null = Value::Null;
                let body = Some((name, &null));
                let bogus = ("body", "notASvixField");
                assert!(
                    refuses(&app, &fixture, method, template, body, bogus).await,
                    "{method} {template} drops an unknown body field silently"
                );
            }
            let declared_query = query_params(&vow, ours_item, ours);
            for param in query_params(&svix, item, op) {
                let verdict = if declared_query.contains(&param) {
                    Field::Honoured
                } else {
                    let body = schema_name.as_deref().map(|n| (n, &Value::Null));
                    if refuses(&app, &fixture, method, template, body, ("query", &param)).await {
                        Field::Refused
                    } else {
                        silent.push(format!("{method} {template} query {param}"));
                        continue;
                    }
                };
                fields.insert(format!("?{param}"), verdict);
            }
            operations.push(Operation {
                method: method.clone(),
                path: template.clone(),
                id,
                fields: Some(fields),
            });
        }
    }
    assert!(
        silent.is_empty(),
        "Svix fields vow neither declares nor refuses (dropped silently): {silent:#?}"
    );
    let doc = document(&operations);
    if std::env::var_os("VOW_WRITE_DOCS").is_some() {
        std::fs::write(DOC, &doc).unwrap();
    }
    let committed = std::fs::read_to_string(DOC).unwrap_or_default();
    assert!(
        committed == doc,
        "docs/svix-compatibility.md is stale: run this test with VOW_WRITE_DOCS=1"
    );
}

/// `docs/svix-compatibility.md` from the comparison.
fn document(operations: &[Operation]) -> String {
    let implemented = operations.iter().filter(|o| o.fields.is_some()).count();
    let all_fields: Vec<&Field> = operations
        .iter()
        .filter_map(|o| o.fields.as_ref())
        .flat_map(BTreeMap::values)
        .collect();
    let honoured = all_fields
        .iter()
        .filter(|f| ***f == Field::Honoured)
        .count();
    let mut doc = String::new();
    let _ = writeln!(doc, "# Svix v1 API compatibility\n");
    let _ = writeln!(
        doc,
        "Generated by `crates/vow-server/tests/it/svix_parity.rs` from vow's own spec \
         (`GET /api/v1/openapi.json`) and the open-source Svix server's \
         (`crates/vow-server/tests/data/svix-openapi.json`), checked against a live server on \
         SQLite and on PostgreSQL. Do not edit by hand: run the test with `VOW_WRITE_DOCS=1`.\n"
    );
    let _ = writeln!(
        doc,
        "- Operations: **{implemented} of {}** Svix operations are implemented, with the same \
         method and path.",
        operations.len()
    );
    let _ = writeln!(
        doc,
        "- Request fields of those (body properties, `?query` parameters): **{honoured} \
         honoured**, {} refused with a 422 that names the field, **0 dropped silently**.",
        all_fields.len() - honoured
    );
    let _ = writeln!(
        doc,
        "- Any body field vow does not have (from a newer Svix, or misspelt) is refused the same \
         way, unless it is `null`; so is any query parameter with a value.\n\
         - Newer Svix SDKs (the Python SDK 2.9 is checked in CI, `scripts/sdk-compat.sh`) send \
         `expanded_statuses` with every attempt read: vow accepts it, and as vow never cancels \
         an attempt, both values give the same answer. Their opt-in `with_msg`, `tag` and \
         `exclude_apps_with_*` parameters are refused with a 422 that names them.\n"
    );
    let _ = writeln!(
        doc,
        "| operation | Svix operationId | vow | request fields |"
    );
    let _ = writeln!(doc, "|---|---|---|---|");
    for op in operations {
        let (status, fields) = match &op.fields {
            None => ("not implemented", String::new()),
            Some(fields) if fields.is_empty() => ("implemented", "none".to_string()),
            Some(fields) => {
                let list: Vec<String> = fields
                    .iter()
                    .map(|(name, f)| match f {
                        Field::Honoured => format!("`{name}`"),
                        Field::Refused => format!("`{name}` (refused, 422)"),
                    })
                    .collect();
                ("implemented", list.join(", "))
            }
        };
        let _ = writeln!(
            doc,
            "| `{} {}` | `{}` | {status} | {fields} |",
            op.method.to_uppercase(),
            op.path,
            op.id
        );
    }
    doc
}

on_both_stores!(vow_honours_or_refuses_every_svix_field);
