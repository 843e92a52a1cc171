//! Applications: CRUD, uid lookups, PUT upsert, PATCH semantics, pagination, conflicts.

use serde_json::json;
use vow_store::{AppKey, Order, Seek};

use crate::helpers::TestApp;

async fn count_apps(app: &TestApp) -> usize {
    let seek = Seek::for_iterator(None, Order::Ascending, 1000);
    app.store.list_applications(&seek).await.unwrap().len()
}

async fn an_application_is_created_read_and_found_by_uid(app: TestApp) {
    let (status, created) = app
        .post(
            "/api/v1/app",
            json!({"name": "Acme", "uid": "acme", "throttleRate": 10, "metadata": {"tier": "gold"}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    assert!(id.starts_with("app_"));
    assert_eq!(created["name"], "Acme");
    assert_eq!(created["uid"], "acme");
    assert_eq!(created["throttleRate"], 10);
    assert_eq!(created["metadata"], json!({"tier": "gold"}));
    assert!(created["createdAt"].is_string() && created["updatedAt"].is_string());

    let (_, by_id) = app.get(&format!("/api/v1/app/{id}")).await;
    let (_, by_uid) = app.get("/api/v1/app/acme").await;
    assert_eq!(by_id, created);
    assert_eq!(by_uid, created);

    let stored = app
        .store
        .get_application(&AppKey::Uid("acme".into()))
        .await
        .unwrap()
        .expect("the row is stored");
    assert_eq!(stored.id.to_string(), id);
    assert_eq!(stored.fields.name, "Acme");
}

async fn a_taken_uid_is_a_conflict_and_writes_nothing(app: TestApp) {
    app.post("/api/v1/app", json!({"name": "A", "uid": "same"}))
        .await;
    let (status, body) = app
        .post("/api/v1/app", json!({"name": "B", "uid": "same"}))
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "conflict");
    assert_eq!(count_apps(&app).await, 1);

    let (status, existing) = app
        .post(
            "/api/v1/app?get_if_exists=true",
            json!({"name": "B", "uid": "same"}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(existing["name"], "A");
    assert_eq!(count_apps(&app).await, 1);
}

async fn put_creates_with_the_path_uid_then_updates(app: TestApp) {
    let (status, created) = app
        .put("/api/v1/app/my-app", json!({"name": "First"}))
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["uid"], "my-app");
    let (status, updated) = app
        .put("/api/v1/app/my-app", json!({"name": "Second"}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(updated["id"], created["id"]);
    assert_eq!(updated["name"], "Second");
    assert_eq!(count_apps(&app).await, 1);
}

async fn patch_changes_only_what_it_names_and_null_clears(app: TestApp) {
    let (_, created) = app
        .post(
            "/api/v1/app",
            json!({"name": "A", "uid": "u1", "throttleRate": 5, "metadata": {"k": "v"}}),
        )
        .await;
    let id = created["id"].as_str().unwrap();
    let (status, patched) = app
        .patch(&format!("/api/v1/app/{id}"), json!({"name": "B"}))
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["name"], "B");
    assert_eq!(patched["uid"], "u1");
    assert_eq!(patched["throttleRate"], 5);
    assert_eq!(patched["metadata"], json!({"k": "v"}));

    let (_, cleared) = app
        .patch(
            &format!("/api/v1/app/{id}"),
            json!({"uid": null, "throttleRate": null}),
        )
        .await;
    assert!(cleared["uid"].is_null());
    assert!(cleared["throttleRate"].is_null());
    let (status, _) = app.get("/api/v1/app/u1").await;
    assert_eq!(status, 404);
}

async fn delete_removes_the_application(app: TestApp) {
    let id = app.create_app("Gone").await;
    let (status, body) = app.delete(&format!("/api/v1/app/{id}")).await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = app.get(&format!("/api/v1/app/{id}")).await;
    assert_eq!(status, 404);
    assert_eq!(body["code"], "not_found");
    assert_eq!(count_apps(&app).await, 0);
    let (status, _) = app.delete(&format!("/api/v1/app/{id}")).await;
    assert_eq!(status, 404);
}

async fn listing_pages_forward_and_back_without_gaps(app: TestApp) {
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(app.create_app(&format!("app {i}")).await);
    }
    let (_, p1) = app.get("/api/v1/app?limit=2").await;
    assert_eq!(p1["done"], false);
    let (_, p2) = app
        .get(&format!(
            "/api/v1/app?limit=2&iterator={}",
            p1["iterator"].as_str().unwrap()
        ))
        .await;
    let (_, p3) = app
        .get(&format!(
            "/api/v1/app?limit=2&iterator={}",
            p2["iterator"].as_str().unwrap()
        ))
        .await;
    assert_eq!(p3["done"], true);
    let seen: Vec<String> = [&p1, &p2, &p3]
        .iter()
        .flat_map(|p| p["data"].as_array().unwrap().iter())
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(seen, ids, "ascending by id, no gaps, no repeats");

    let (_, back) = app
        .get(&format!(
            "/api/v1/app?limit=2&iterator={}",
            p3["prevIterator"].as_str().unwrap()
        ))
        .await;
    assert_eq!(back["data"], p2["data"]);

    let (_, desc) = app.get("/api/v1/app?limit=2&order=descending").await;
    assert_eq!(desc["data"][0]["id"], ids[4].as_str());
}

on_both_stores!(
    an_application_is_created_read_and_found_by_uid,
    a_taken_uid_is_a_conflict_and_writes_nothing,
    put_creates_with_the_path_uid_then_updates,
    patch_changes_only_what_it_names_and_null_clears,
    delete_removes_the_application,
    listing_pages_forward_and_back_without_gaps,
);
