//! Event types: create, validation, conflicts, archive vs expunge, revival, PUT upsert, PATCH,
//! and what the list shows (archived ones, schemas).

use serde_json::{json, Value};
use vow_store::{EventType, Order, Seek};

use crate::helpers::TestApp;

/// Every stored event type, archived ones included, ordered by name.
async fn stored(app: &TestApp) -> Vec<EventType> {
    let seek = Seek::for_iterator(None, Order::Ascending, 1000);
    app.store.list_event_types(&seek, true).await.unwrap()
}

fn names(list: &Value) -> Vec<&str> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

fn schemas() -> Value {
    json!({"1": {"type": "object", "properties": {"invoiceId": {"type": "string"}}, "required": ["invoiceId"]}})
}

async fn an_event_type_is_created_with_all_its_fields(app: TestApp) {
    let (status, created) = app
        .post(
            "/api/v1/event-type",
            json!({
                "name": "invoice.paid",
                "description": "An invoice was paid",
                "deprecated": true,
                "featureFlag": "beta-billing",
                "schemas": schemas(),
            }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "invoice.paid");
    assert_eq!(created["description"], "An invoice was paid");
    assert_eq!(created["archived"], false);
    assert_eq!(created["deprecated"], true);
    assert_eq!(created["featureFlag"], "beta-billing");
    assert_eq!(created["schemas"], schemas());
    assert!(created["createdAt"].is_string() && created["updatedAt"].is_string());

    let (status, fetched) = app.get("/api/v1/event-type/invoice.paid").await;
    assert_eq!(status, 200);
    assert_eq!(fetched, created);

    let row = app
        .store
        .get_event_type("invoice.paid")
        .await
        .unwrap()
        .expect("the row is stored");
    assert_eq!(row.description, "An invoice was paid");
    assert!(!row.archived);
    assert!(row.deprecated);
    assert_eq!(row.feature_flag.as_deref(), Some("beta-billing"));
    assert_eq!(row.schemas, Some(schemas()));
}

async fn invalid_names_are_refused_by_field_and_store_nothing(app: TestApp) {
    for bad in ["a..b", "has space", ".lead", "trail.", ""] {
        let (status, body) = app
            .post(
                "/api/v1/event-type",
                json!({"name": bad, "description": "x"}),
            )
            .await;
        assert_eq!(status, 422, "{bad:?}: {body}");
        assert_eq!(body["detail"][0]["loc"], json!(["body", "name"]), "{bad:?}");
    }
    let (status, body) = app
        .post("/api/v1/event-type", json!({"name": "ok.name"}))
        .await;
    assert_eq!(status, 422, "description is required: {body}");
    assert_eq!(body["detail"][0]["loc"], json!(["body", "description"]));
    assert!(stored(&app).await.is_empty());
}

async fn a_duplicate_active_name_is_a_conflict_and_changes_nothing(app: TestApp) {
    let (status, _) = app
        .post(
            "/api/v1/event-type",
            json!({"name": "user.signup", "description": "first"}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, body) = app
        .post(
            "/api/v1/event-type",
            json!({"name": "user.signup", "description": "second"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "conflict");
    let rows = stored(&app).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].description, "first");
}

async fn the_list_hides_archived_event_types_unless_asked(app: TestApp) {
    for name in ["a.one", "b.two", "c.three"] {
        app.post(
            "/api/v1/event-type",
            json!({"name": name, "description": name}),
        )
        .await;
    }
    let (status, _) = app
        .patch("/api/v1/event-type/b.two", json!({"archived": true}))
        .await;
    assert_eq!(status, 200);

    let (status, list) = app.get("/api/v1/event-type").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(names(&list), ["a.one", "c.three"]);
    assert_eq!(list["done"], true);

    let (_, all) = app.get("/api/v1/event-type?include_archived=true").await;
    assert_eq!(names(&all), ["a.one", "b.two", "c.three"]);
    assert_eq!(all["data"][1]["archived"], true);

    let (_, page) = app
        .get("/api/v1/event-type?include_archived=true&limit=2")
        .await;
    assert_eq!(names(&page), ["a.one", "b.two"]);
    assert_eq!(page["done"], false);
    let (_, rest) = app
        .get(&format!(
            "/api/v1/event-type?include_archived=true&limit=2&iterator={}",
            page["iterator"].as_str().unwrap()
        ))
        .await;
    assert_eq!(names(&rest), ["c.three"]);
    assert_eq!(rest["done"], true);
}

async fn delete_archives_and_expunge_removes_the_row(app: TestApp) {
    app.post(
        "/api/v1/event-type",
        json!({"name": "to.archive", "description": "a"}),
    )
    .await;
    app.post(
        "/api/v1/event-type",
        json!({"name": "to.expunge", "description": "e"}),
    )
    .await;

    let (status, body) = app.delete("/api/v1/event-type/to.archive").await;
    assert_eq!(status, 204, "{body}");
    let row = app.store.get_event_type("to.archive").await.unwrap();
    assert!(row.expect("an archived row is kept").archived);
    let (status, fetched) = app.get("/api/v1/event-type/to.archive").await;
    assert_eq!(status, 200, "an archived event type can still be read");
    assert_eq!(fetched["archived"], true);

    let (status, body) = app
        .delete("/api/v1/event-type/to.expunge?expunge=true")
        .await;
    assert_eq!(status, 204, "{body}");
    assert!(app
        .store
        .get_event_type("to.expunge")
        .await
        .unwrap()
        .is_none());
    let (status, body) = app.get("/api/v1/event-type/to.expunge").await;
    assert_eq!(status, 404);
    assert_eq!(body["code"], "not_found");

    let (status, _) = app.delete("/api/v1/event-type/never.was").await;
    assert_eq!(status, 404);
    assert_eq!(stored(&app).await.len(), 1);
}

async fn creating_over_an_archived_name_revives_it(app: TestApp) {
    let (_, first) = app
        .post(
            "/api/v1/event-type",
            json!({"name": "order.placed", "description": "old"}),
        )
        .await;
    app.delete("/api/v1/event-type/order.placed").await;

    let (status, revived) = app
        .post(
            "/api/v1/event-type",
            json!({"name": "order.placed", "description": "new"}),
        )
        .await;
    assert_eq!(status, 201, "{revived}");
    assert_eq!(revived["archived"], false);
    assert_eq!(revived["description"], "new");
    assert_eq!(
        revived["createdAt"], first["createdAt"],
        "it is the same event type"
    );

    let rows = stored(&app).await;
    assert_eq!(rows.len(), 1);
    assert!(!rows[0].archived);
    assert_eq!(rows[0].description, "new");
    let (_, list) = app.get("/api/v1/event-type").await;
    assert_eq!(names(&list), ["order.placed"]);
}

async fn put_creates_the_event_type_then_updates_it(app: TestApp) {
    let (status, created) = app
        .put(
            "/api/v1/event-type/ticket.closed",
            json!({"description": "one"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "ticket.closed");
    let (status, updated) = app
        .put(
            "/api/v1/event-type/ticket.closed",
            json!({"description": "two", "deprecated": true}),
        )
        .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["description"], "two");
    assert_eq!(updated["deprecated"], true);
    assert_eq!(updated["createdAt"], created["createdAt"]);

    let rows = stored(&app).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].description, "two");
    assert!(rows[0].deprecated);

    let (status, body) = app
        .put("/api/v1/event-type/bad..name", json!({"description": "x"}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["detail"][0]["loc"], json!(["path", "event_type_name"]));
    assert_eq!(stored(&app).await.len(), 1);
}

async fn patch_changes_only_what_it_names_and_null_clears(app: TestApp) {
    app.post(
        "/api/v1/event-type",
        json!({
            "name": "user.deleted",
            "description": "before",
            "featureFlag": "flag-1",
            "schemas": schemas(),
        }),
    )
    .await;
    let (status, patched) = app
        .patch(
            "/api/v1/event-type/user.deleted",
            json!({"description": "after"}),
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["description"], "after");
    assert_eq!(patched["featureFlag"], "flag-1");
    assert_eq!(patched["schemas"], schemas());

    let (status, cleared) = app
        .patch(
            "/api/v1/event-type/user.deleted",
            json!({"featureFlag": null, "schemas": null, "deprecated": true}),
        )
        .await;
    assert_eq!(status, 200, "{cleared}");
    assert!(cleared["featureFlag"].is_null());
    assert!(cleared["schemas"].is_null());
    assert_eq!(cleared["description"], "after");

    let row = app
        .store
        .get_event_type("user.deleted")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.description, "after");
    assert!(row.deprecated);
    assert_eq!(row.feature_flag, None);
    assert_eq!(row.schemas, None);

    let (status, _) = app
        .patch("/api/v1/event-type/not.there", json!({"description": "x"}))
        .await;
    assert_eq!(status, 404);
    assert_eq!(stored(&app).await.len(), 1);
}

async fn with_content_decides_whether_the_list_carries_schemas(app: TestApp) {
    app.post(
        "/api/v1/event-type",
        json!({"name": "with.schema", "description": "s", "schemas": schemas()}),
    )
    .await;
    let (_, bare) = app.get("/api/v1/event-type").await;
    assert_eq!(names(&bare), ["with.schema"]);
    assert!(
        bare["data"][0].get("schemas").is_none_or(Value::is_null),
        "{bare}"
    );

    let (_, full) = app.get("/api/v1/event-type?with_content=true").await;
    assert_eq!(full["data"][0]["schemas"], schemas());

    let row = app
        .store
        .get_event_type("with.schema")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        row.schemas,
        Some(schemas()),
        "listing without content keeps the stored schemas"
    );
}

on_both_stores!(
    an_event_type_is_created_with_all_its_fields,
    invalid_names_are_refused_by_field_and_store_nothing,
    a_duplicate_active_name_is_a_conflict_and_changes_nothing,
    the_list_hides_archived_event_types_unless_asked,
    delete_archives_and_expunge_removes_the_row,
    creating_over_an_archived_name_revives_it,
    put_creates_the_event_type_then_updates_it,
    patch_changes_only_what_it_names_and_null_clears,
    with_content_decides_whether_the_list_carries_schemas,
);
