//! Endpoints: every field round-trips, secrets (generated, given, rotated with a grace period),
//! URL and uid rules, PUT upsert, PATCH, custom headers with redaction, tenant isolation between
//! applications, and pagination.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use vow_core::{AppId, EndpointId};
use vow_store::{Endpoint, EndpointKey, EndpointSecret, Order, Seek};

use crate::helpers::TestApp;

/// A valid secret body (24 random bytes, base64), as a client may send it.
const KEY_A: &str = "C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const KEY_B: &str = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn ids(app: &str, ep: &str) -> (AppId, EndpointId) {
    (AppId::parse(app).unwrap(), EndpointId::parse(ep).unwrap())
}

async fn stored(app: &TestApp, app_id: &str, ep: &str) -> Option<Endpoint> {
    let (a, e) = ids(app_id, ep);
    app.store
        .get_endpoint(a, &EndpointKey::Id(e))
        .await
        .unwrap()
}

async fn stored_all(app: &TestApp, app_id: &str) -> Vec<Endpoint> {
    let seek = Seek::for_iterator(None, Order::Ascending, 1000);
    let a = AppId::parse(app_id).unwrap();
    app.store.list_endpoints(a, &seek).await.unwrap()
}

async fn secrets_at(
    app: &TestApp,
    app_id: &str,
    ep: &str,
    at: DateTime<Utc>,
) -> Vec<EndpointSecret> {
    let (a, e) = ids(app_id, ep);
    app.store.endpoint_secrets(a, e, at).await.unwrap()
}

async fn current_secret(app: &TestApp, app_id: &str, ep: &str) -> String {
    let (status, body) = app
        .get(&format!("/api/v1/app/{app_id}/endpoint/{ep}/secret"))
        .await;
    assert_eq!(status, 200, "{body}");
    body["key"].as_str().unwrap().to_string()
}

fn full_endpoint() -> Value {
    json!({
        "url": "https://hooks.example.com/in",
        "uid": "billing-hook",
        "description": "Billing",
        "disabled": true,
        "eventTypes": ["invoice.paid", "invoice.voided"],
        "channels": ["project_1", "group-2"],
        "throttleRate": 25,
        "metadata": {"team": "billing"},
        "headers": {"X-Tenant": "42"},
    })
}

async fn an_endpoint_with_every_field_round_trips(app: TestApp) {
    let app_id = app.create_app("A").await;
    let (status, created) = app
        .post(&format!("/api/v1/app/{app_id}/endpoint"), full_endpoint())
        .await;
    assert_eq!(status, 201, "{created}");
    let ep = created["id"].as_str().unwrap();
    assert!(ep.starts_with("ep_"));
    assert_eq!(created["url"], "https://hooks.example.com/in");
    assert_eq!(created["uid"], "billing-hook");
    assert_eq!(created["description"], "Billing");
    assert_eq!(created["disabled"], true);
    assert_eq!(
        created["eventTypes"],
        json!(["invoice.paid", "invoice.voided"])
    );
    assert_eq!(created["channels"], json!(["project_1", "group-2"]));
    assert_eq!(created["throttleRate"], 25);
    assert_eq!(created["metadata"], json!({"team": "billing"}));
    assert!(created["createdAt"].is_string() && created["updatedAt"].is_string());
    assert!(
        created.get("secret").is_none(),
        "the secret is not part of EndpointOut"
    );

    let (_, by_id) = app
        .get(&format!("/api/v1/app/{app_id}/endpoint/{ep}"))
        .await;
    let (_, by_uid) = app
        .get(&format!("/api/v1/app/{app_id}/endpoint/billing-hook"))
        .await;
    assert_eq!(by_id, created);
    assert_eq!(by_uid, created);

    let row = stored(&app, &app_id, ep).await.expect("the row is stored");
    let f = &row.fields;
    assert_eq!(f.url, "https://hooks.example.com/in");
    assert_eq!(f.uid.as_deref(), Some("billing-hook"));
    assert_eq!(f.description, "Billing");
    assert!(f.disabled);
    assert_eq!(
        f.event_types,
        Some(vec!["invoice.paid".into(), "invoice.voided".into()])
    );
    assert_eq!(f.channels, Some(vec!["project_1".into(), "group-2".into()]));
    assert_eq!(f.throttle_rate, Some(25));
    assert_eq!(f.metadata.get("team").map(String::as_str), Some("billing"));
    assert_eq!(f.headers.get("X-Tenant").map(String::as_str), Some("42"));
}

async fn a_generated_secret_is_a_whsec_key_and_get_secret_returns_it(app: TestApp) {
    let app_id = app.create_app("A").await;
    let ep = app
        .create_endpoint(&app_id, json!({"url": "https://example.com/h"}))
        .await;
    let key = current_secret(&app, &app_id, &ep).await;
    assert!(key.starts_with("whsec_"), "{key}");
    let body = key.trim_start_matches("whsec_");
    assert!(
        (32..=100).contains(&body.len()),
        "the spec's `{{32,100}}` base64 characters: {key}"
    );

    let secrets = secrets_at(&app, &app_id, &ep, Utc::now()).await;
    assert_eq!(secrets.len(), 1);
    assert_eq!(secrets[0].key, key);
    assert_eq!(secrets[0].valid_until, None);

    let other = app
        .create_endpoint(&app_id, json!({"url": "https://example.com/h2"}))
        .await;
    assert_ne!(
        current_secret(&app, &app_id, &other).await,
        key,
        "each endpoint gets its own"
    );
}

async fn a_client_given_secret_is_accepted_and_normalised(app: TestApp) {
    let app_id = app.create_app("A").await;
    let prefixed = app
        .create_endpoint(
            &app_id,
            json!({"url": "https://example.com/a", "secret": format!("whsec_{KEY_A}")}),
        )
        .await;
    assert_eq!(
        current_secret(&app, &app_id, &prefixed).await,
        format!("whsec_{KEY_A}")
    );

    let bare = app
        .create_endpoint(
            &app_id,
            json!({"url": "https://example.com/b", "secret": KEY_B}),
        )
        .await;
    assert_eq!(
        current_secret(&app, &app_id, &bare).await,
        format!("whsec_{KEY_B}")
    );
    let secrets = secrets_at(&app, &app_id, &bare, Utc::now()).await;
    assert_eq!(
        secrets[0].key,
        format!("whsec_{KEY_B}"),
        "stored normalised"
    );

    for bad in [
        "whsec_tooshort",
        "not base64 at all but long enough to pass 32",
        "whsec_",
    ] {
        let (status, body) = app
            .post(
                &format!("/api/v1/app/{app_id}/endpoint"),
                json!({"url": "https://example.com/c", "secret": bad}),
            )
            .await;
        assert_eq!(status, 422, "{bad:?}: {body}");
        assert_eq!(body["detail"][0]["loc"], json!(["body", "secret"]));
    }
    assert_eq!(stored_all(&app, &app_id).await.len(), 2);
}

async fn a_url_that_is_not_http_or_https_is_refused_and_nothing_is_stored(app: TestApp) {
    let app_id = app.create_app("A").await;
    for bad in ["ftp://example.com/x", "file:///etc/passwd", "not a url", ""] {
        let (status, body) = app
            .post(
                &format!("/api/v1/app/{app_id}/endpoint"),
                json!({"url": bad}),
            )
            .await;
        assert_eq!(status, 422, "{bad:?}: {body}");
        assert_eq!(body["detail"][0]["loc"], json!(["body", "url"]), "{bad:?}");
    }
    let (status, body) = app
        .post(
            &format!("/api/v1/app/{app_id}/endpoint"),
            json!({"description": "no url"}),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["loc"], json!(["body", "url"]));
    assert!(stored_all(&app, &app_id).await.is_empty());
}

async fn a_uid_is_unique_within_an_application_but_not_across_them(app: TestApp) {
    let a = app.create_app("A").await;
    let b = app.create_app("B").await;
    app.create_endpoint(&a, json!({"url": "https://example.com/1", "uid": "main"}))
        .await;
    let (status, body) = app
        .post(
            &format!("/api/v1/app/{a}/endpoint"),
            json!({"url": "https://example.com/2", "uid": "main"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "conflict");
    assert_eq!(stored_all(&app, &a).await.len(), 1);

    let in_b = app
        .create_endpoint(&b, json!({"url": "https://example.com/3", "uid": "main"}))
        .await;
    let (_, got) = app.get(&format!("/api/v1/app/{b}/endpoint/main")).await;
    assert_eq!(got["id"], in_b.as_str());
    let (_, got_a) = app.get(&format!("/api/v1/app/{a}/endpoint/main")).await;
    assert_ne!(got_a["id"], in_b.as_str());

    let second = app
        .create_endpoint(&a, json!({"url": "https://example.com/4", "uid": "other"}))
        .await;
    let (status, _) = app
        .patch(
            &format!("/api/v1/app/{a}/endpoint/{second}"),
            json!({"uid": "main"}),
        )
        .await;
    assert_eq!(status, 409, "renaming onto a taken uid conflicts too");
    let row = stored(&app, &a, &second).await.unwrap();
    assert_eq!(row.fields.uid.as_deref(), Some("other"));
}

async fn put_creates_with_the_path_uid_then_replaces_the_fields(app: TestApp) {
    let app_id = app.create_app("A").await;
    let path = format!("/api/v1/app/{app_id}/endpoint/orders-hook");
    let (status, created) = app
        .put(
            &path,
            json!({"url": "https://example.com/1", "description": "one", "eventTypes": ["a.b"]}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["uid"], "orders-hook");
    let id = created["id"].as_str().unwrap();
    let key = current_secret(&app, &app_id, id).await;
    assert!(key.starts_with("whsec_"));
    app.put(
        &format!("/api/v1/app/{app_id}/endpoint/{id}/headers"),
        json!({"headers": {"X-Keep": "me"}}),
    )
    .await;

    let (status, updated) = app
        .put(
            &path,
            json!({"url": "https://example.com/2", "description": "two"}),
        )
        .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["id"], id);
    assert_eq!(updated["url"], "https://example.com/2");
    assert!(
        updated["eventTypes"].is_null(),
        "PUT replaces: an omitted filter is cleared"
    );

    let rows = stored_all(&app, &app_id).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].fields.description, "two");
    assert_eq!(rows[0].fields.event_types, None);
    assert_eq!(
        rows[0].fields.headers.get("X-Keep").map(String::as_str),
        Some("me")
    );
    assert_eq!(
        current_secret(&app, &app_id, id).await,
        key,
        "PUT keeps the secret"
    );

    let missing = EndpointId::new();
    let (status, _) = app
        .put(
            &format!("/api/v1/app/{app_id}/endpoint/{missing}"),
            json!({"url": "https://example.com/3"}),
        )
        .await;
    assert_eq!(status, 404, "PUT with an unknown id does not create");
    assert_eq!(stored_all(&app, &app_id).await.len(), 1);
}

async fn patch_keeps_absent_fields_and_null_clears_filters_and_uid(app: TestApp) {
    let app_id = app.create_app("A").await;
    let (_, created) = app
        .post(&format!("/api/v1/app/{app_id}/endpoint"), full_endpoint())
        .await;
    let id = created["id"].as_str().unwrap();
    let path = format!("/api/v1/app/{app_id}/endpoint/{id}");

    let (status, patched) = app.patch(&path, json!({"description": "renamed"})).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["description"], "renamed");
    for field in [
        "url",
        "uid",
        "disabled",
        "eventTypes",
        "channels",
        "throttleRate",
        "metadata",
    ] {
        assert_eq!(patched[field], created[field], "{field} is kept");
    }

    let (status, cleared) = app
        .patch(
            &path,
            json!({"eventTypes": null, "channels": null, "uid": null, "disabled": false}),
        )
        .await;
    assert_eq!(status, 200, "{cleared}");
    assert!(cleared["eventTypes"].is_null());
    assert!(cleared["channels"].is_null());
    assert!(cleared["uid"].is_null());
    assert_eq!(cleared["disabled"], false);
    assert_eq!(cleared["throttleRate"], 25);

    let row = stored(&app, &app_id, id).await.unwrap();
    assert_eq!(row.fields.event_types, None);
    assert_eq!(row.fields.channels, None);
    assert_eq!(row.fields.uid, None);
    assert!(!row.fields.disabled);
    assert_eq!(row.fields.description, "renamed");
    assert_eq!(
        row.fields.headers.get("X-Tenant").map(String::as_str),
        Some("42")
    );
    let (status, _) = app
        .get(&format!("/api/v1/app/{app_id}/endpoint/billing-hook"))
        .await;
    assert_eq!(status, 404, "the cleared uid no longer names it");

    let (status, body) = app.patch(&path, json!({"url": "gopher://x"})).await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["loc"], json!(["body", "url"]));
    assert_eq!(stored(&app, &app_id, id).await.unwrap(), row);
}

async fn delete_removes_the_endpoint_and_its_secrets(app: TestApp) {
    let app_id = app.create_app("A").await;
    let ep = app
        .create_endpoint(&app_id, json!({"url": "https://example.com/h"}))
        .await;
    let path = format!("/api/v1/app/{app_id}/endpoint/{ep}");
    let (status, body) = app.delete(&path).await;
    assert_eq!(status, 204, "{body}");
    assert!(stored(&app, &app_id, &ep).await.is_none());
    let (a, e) = ids(&app_id, &ep);
    assert!(app.store.endpoint_secrets(a, e, Utc::now()).await.is_err());
    let (status, body) = app.get(&path).await;
    assert_eq!(status, 404);
    assert_eq!(body["code"], "not_found");
    let (status, _) = app.delete(&path).await;
    assert_eq!(status, 404);
}

/// Asserts `t` is `grace` after some instant in `[before, after]` (with a second of slack).
fn assert_about(t: DateTime<Utc>, before: DateTime<Utc>, after: DateTime<Utc>, grace: Duration) {
    let slack = Duration::seconds(1);
    assert!(
        t >= before + grace - slack && t <= after + grace + slack,
        "{t} is not {grace} after [{before}, {after}]"
    );
}

async fn rotating_keeps_the_old_secret_valid_for_the_grace_period(app: TestApp) {
    let app_id = app.create_app("A").await;
    let ep = app
        .create_endpoint(&app_id, json!({"url": "https://example.com/h"}))
        .await;
    let rotate = format!("/api/v1/app/{app_id}/endpoint/{ep}/secret/rotate");
    let first = current_secret(&app, &app_id, &ep).await;

    let before = Utc::now();
    let (status, body) = app.post(&rotate, json!({})).await;
    let after = Utc::now();
    assert_eq!(status, 200, "{body}");
    let second = current_secret(&app, &app_id, &ep).await;
    assert_ne!(second, first);
    assert!(second.starts_with("whsec_"));
    assert_eq!(
        body["key"],
        second.as_str(),
        "the response names the new key"
    );

    let secrets = secrets_at(&app, &app_id, &ep, Utc::now()).await;
    assert_eq!(secrets.len(), 2, "{secrets:?}");
    assert_eq!(secrets[0].key, second);
    assert_eq!(secrets[0].valid_until, None);
    assert_eq!(secrets[1].key, first);
    assert_about(
        secrets[1].valid_until.unwrap(),
        before,
        after,
        Duration::hours(24),
    );
    let later = secrets_at(&app, &app_id, &ep, after + Duration::hours(25)).await;
    assert_eq!(later.len(), 1, "the old key is gone after its grace period");
    assert_eq!(later[0].key, second);

    let before = Utc::now();
    let (status, _) = app.post(&rotate, json!({"gracePeriodSeconds": 3600})).await;
    let after = Utc::now();
    assert_eq!(status, 200);
    let third = current_secret(&app, &app_id, &ep).await;
    let secrets = secrets_at(&app, &app_id, &ep, Utc::now()).await;
    assert_eq!(secrets.len(), 3, "{secrets:?}");
    assert_eq!(secrets[0].key, third);
    let second_row = secrets.iter().find(|s| s.key == second).unwrap();
    assert_about(
        second_row.valid_until.unwrap(),
        before,
        after,
        Duration::hours(1),
    );
}

async fn a_rotation_without_grace_ends_the_old_secret_at_once(app: TestApp) {
    let app_id = app.create_app("A").await;
    let ep = app
        .create_endpoint(&app_id, json!({"url": "https://example.com/h"}))
        .await;
    let (status, body) = app
        .post(
            &format!("/api/v1/app/{app_id}/endpoint/{ep}/secret/rotate"),
            json!({"gracePeriodSeconds": 0}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let current = current_secret(&app, &app_id, &ep).await;
    let secrets = secrets_at(&app, &app_id, &ep, Utc::now() + Duration::milliseconds(1)).await;
    assert_eq!(secrets.len(), 1, "{secrets:?}");
    assert_eq!(secrets[0].key, current);
}

async fn a_client_given_rotation_key_becomes_the_current_secret(app: TestApp) {
    let app_id = app.create_app("A").await;
    let ep = app
        .create_endpoint(&app_id, json!({"url": "https://example.com/h"}))
        .await;
    let rotate = format!("/api/v1/app/{app_id}/endpoint/{ep}/secret/rotate");
    let (status, body) = app.post(&rotate, json!({"key": KEY_A})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        current_secret(&app, &app_id, &ep).await,
        format!("whsec_{KEY_A}")
    );

    let (status, body) = app.post(&rotate, json!({"key": "whsec_nope"})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["detail"][0]["loc"], json!(["body", "key"]));
    let (status, body) = app
        .post(&rotate, json!({"gracePeriodSeconds": 604_801}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "gracePeriodSeconds"])
    );
    let secrets = secrets_at(&app, &app_id, &ep, Utc::now()).await;
    assert_eq!(secrets.len(), 2, "refused rotations change nothing");
    assert_eq!(secrets[0].key, format!("whsec_{KEY_A}"));
}

async fn headers_are_replaced_read_with_redaction_and_patched(app: TestApp) {
    let app_id = app.create_app("A").await;
    let ep = app
        .create_endpoint(&app_id, json!({"url": "https://example.com/h"}))
        .await;
    let path = format!("/api/v1/app/{app_id}/endpoint/{ep}/headers");

    let (status, body) = app
        .put(
            &path,
            json!({"headers": {"X-Tenant": "42", "X-Region": "eu", "Authorization": "Bearer s3cret"}}),
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let (status, got) = app.get(&path).await;
    assert_eq!(status, 200);
    assert_eq!(got["headers"], json!({"X-Tenant": "42", "X-Region": "eu"}));
    assert_eq!(got["sensitive"], json!(["Authorization"]));
    assert!(!got.to_string().contains("s3cret"), "{got}");
    let row = stored(&app, &app_id, &ep).await.unwrap();
    assert_eq!(
        row.fields.headers.get("Authorization").map(String::as_str),
        Some("Bearer s3cret"),
        "the value is stored, only hidden"
    );

    let (status, body) = app
        .patch(&path, json!({"headers": {"X-Tenant": null, "X-New": "1"}}))
        .await;
    assert_eq!(status, 204, "{body}");
    let row = stored(&app, &app_id, &ep).await.unwrap();
    let names: Vec<&str> = row.fields.headers.keys().map(String::as_str).collect();
    assert_eq!(names, ["Authorization", "X-New", "X-Region"]);
    let (_, got) = app.get(&path).await;
    assert_eq!(got["headers"], json!({"X-New": "1", "X-Region": "eu"}));

    for reserved in [
        "webhook-signature",
        "content-type",
        "Content-Type",
        "svix-id",
    ] {
        let (status, body) = app.put(&path, json!({"headers": {reserved: "x"}})).await;
        assert_eq!(status, 422, "{reserved}: {body}");
        assert_eq!(
            body["detail"][0]["loc"],
            json!(["body", "headers", reserved])
        );
        let (status, _) = app.patch(&path, json!({"headers": {reserved: "x"}})).await;
        assert_eq!(status, 422, "{reserved} (patch)");
    }
    assert_eq!(
        stored(&app, &app_id, &ep).await.unwrap(),
        row,
        "refused writes change nothing"
    );

    let (status, body) = app
        .post(
            &format!("/api/v1/app/{app_id}/endpoint"),
            json!({"url": "https://example.com/x", "headers": {"webhook-id": "x"}}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(stored_all(&app, &app_id).await.len(), 1);
}

async fn an_endpoint_cannot_be_reached_through_another_applications_path(app: TestApp) {
    let a = app.create_app("A").await;
    let b = app.create_app("B").await;
    let ep = app
        .create_endpoint(
            &a,
            json!({"url": "https://example.com/a", "uid": "a-hook", "headers": {"X-A": "1"}}),
        )
        .await;
    let before = stored(&app, &a, &ep).await.unwrap();
    let secrets_before = secrets_at(&app, &a, &ep, Utc::now()).await;

    for key in [ep.as_str(), "a-hook"] {
        let one = format!("/api/v1/app/{b}/endpoint/{key}");
        let body = json!({"url": "https://evil.example.com/"});
        let attempts = [
            ("GET", app.get(&one).await),
            ("PATCH", app.patch(&one, body.clone()).await),
            ("GET headers", app.get(&format!("{one}/headers")).await),
            (
                "PUT headers",
                app.put(&format!("{one}/headers"), json!({"headers": {"X-B": "2"}}))
                    .await,
            ),
            (
                "PATCH headers",
                app.patch(&format!("{one}/headers"), json!({"headers": {"X-A": null}}))
                    .await,
            ),
            ("GET secret", app.get(&format!("{one}/secret")).await),
            (
                "rotate",
                app.post(&format!("{one}/secret/rotate"), json!({"key": KEY_B}))
                    .await,
            ),
            ("DELETE", app.delete(&one).await),
        ];
        for (what, (status, body)) in attempts {
            assert_eq!(status, 404, "{what} {key} through B: {body}");
            assert_eq!(body["code"], "not_found", "{what} {key}");
        }
    }
    let (status, body) = app
        .put(
            &format!("/api/v1/app/{b}/endpoint/{ep}"),
            json!({"url": "https://evil.example.com/"}),
        )
        .await;
    assert_eq!(status, 404, "PUT with A's endpoint id through B: {body}");

    assert_eq!(stored(&app, &a, &ep).await.unwrap(), before);
    assert_eq!(secrets_at(&app, &a, &ep, Utc::now()).await, secrets_before);
    assert!(stored_all(&app, &b).await.is_empty());
    let (_, list_b) = app.get(&format!("/api/v1/app/{b}/endpoint")).await;
    assert_eq!(list_b["data"], json!([]));
}

async fn listing_pages_with_limit_and_iterator_and_refuses_a_foreign_iterator(app: TestApp) {
    let app_id = app.create_app("A").await;
    let other = app.create_app("B").await;
    app.create_endpoint(&other, json!({"url": "https://example.com/other"}))
        .await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            app.create_endpoint(&app_id, json!({"url": format!("https://example.com/{i}")}))
                .await,
        );
    }
    ids.sort();
    let base = format!("/api/v1/app/{app_id}/endpoint");
    let mut seen = Vec::new();
    let mut iterator: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &iterator {
            Some(it) => format!("{base}?limit=2&iterator={it}"),
            None => format!("{base}?limit=2"),
        };
        let (status, page) = app.get(&path).await;
        assert_eq!(status, 200, "{page}");
        pages += 1;
        let data = page["data"].as_array().unwrap();
        assert!(data.len() <= 2);
        seen.extend(data.iter().map(|e| e["id"].as_str().unwrap().to_string()));
        if page["done"] == true {
            break;
        }
        iterator = Some(page["iterator"].as_str().unwrap().to_string());
        assert!(pages < 10, "pagination does not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(
        seen, ids,
        "ordered by id, no gaps, no repeats, only this app's"
    );

    let (status, body) = app.get(&format!("{base}?iterator={app_id}")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["detail"][0]["loc"], json!(["query", "iterator"]));
    let (status, body) = app.get(&format!("{base}?limit=many")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["detail"][0]["loc"], json!(["query", "limit"]));
}

on_both_stores!(
    an_endpoint_with_every_field_round_trips,
    a_generated_secret_is_a_whsec_key_and_get_secret_returns_it,
    a_client_given_secret_is_accepted_and_normalised,
    a_url_that_is_not_http_or_https_is_refused_and_nothing_is_stored,
    a_uid_is_unique_within_an_application_but_not_across_them,
    put_creates_with_the_path_uid_then_replaces_the_fields,
    patch_keeps_absent_fields_and_null_clears_filters_and_uid,
    delete_removes_the_endpoint_and_its_secrets,
    rotating_keeps_the_old_secret_valid_for_the_grace_period,
    a_rotation_without_grace_ends_the_old_secret_at_once,
    a_client_given_rotation_key_becomes_the_current_secret,
    headers_are_replaced_read_with_redaction_and_patched,
    an_endpoint_cannot_be_reached_through_another_applications_path,
    listing_pages_with_limit_and_iterator_and_refuses_a_foreign_iterator,
);
