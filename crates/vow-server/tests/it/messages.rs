//! Messages: acceptance, the payload kept byte-for-byte, fan-out to delivery rows, eventId
//! idempotency, lookups, listing with filters, validation, creating the application on the fly,
//! and isolation between applications.

use chrono::{DateTime, Duration, Utc};
use reqwest::Method;
use serde_json::{json, Value};
use vow_core::{AppId, MessageId};
use vow_store::{AppKey, DeliveryStatus, Message, MessageFilter, MessageKey, Order, Seek};

use crate::helpers::{into_parts, test_config, TestApp};

async fn stored_messages(app: &TestApp, app_id: &str) -> Vec<Message> {
    let seek = Seek::for_iterator(None, Order::Descending, 1000);
    let a = AppId::parse(app_id).unwrap();
    app.store
        .list_messages(a, &MessageFilter::default(), &seek)
        .await
        .unwrap()
}

async fn count_apps(app: &TestApp) -> usize {
    let seek = Seek::for_iterator(None, Order::Ascending, 1000);
    app.store.list_applications(&seek).await.unwrap().len()
}

/// `(endpoint id, status)` of every delivery row of a message, sorted by endpoint id.
async fn deliveries(app: &TestApp, app_id: &str, msg: &str) -> Vec<(String, DeliveryStatus)> {
    let rows = app.deliveries_of(app_id, msg).await;
    for d in &rows {
        assert_eq!(d.attempts, 0);
        assert_eq!(d.msg_id.to_string(), msg);
        assert_eq!(d.app_id.to_string(), app_id);
    }
    sorted(
        rows.into_iter()
            .map(|d| (d.endpoint_id.to_string(), d.status))
            .collect(),
    )
}

/// `rows` sorted by endpoint id, to compare with [`deliveries`].
fn sorted(mut rows: Vec<(String, DeliveryStatus)>) -> Vec<(String, DeliveryStatus)> {
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

/// The `timestamp` of message `id` in a list response, ready for a query string.
fn stamp(list: &Value, id: &str) -> String {
    let item = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap();
    item["timestamp"].as_str().unwrap().replace('+', "%2B")
}

/// Sends a message and returns its id.
async fn send(app: &TestApp, app_id: &str, body: Value) -> String {
    let (status, out) = app.post(&format!("/api/v1/app/{app_id}/msg"), body).await;
    assert_eq!(status, 202, "{out}");
    out["id"].as_str().unwrap().to_string()
}

fn ids_of(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

async fn a_message_is_accepted_with_its_id_type_payload_and_timestamp(app: TestApp) {
    let app_id = app.create_app("A").await;
    let payload = json!({"email": "test@example.com", "n": 7, "tags": ["x"]});
    let (status, out) = app
        .post(
            &format!("/api/v1/app/{app_id}/msg"),
            json!({"eventType": "user.signup", "payload": payload, "eventId": "evt-1", "channels": ["project_1"]}),
        )
        .await;
    assert_eq!(status, 202, "{out}");
    let id = out["id"].as_str().unwrap();
    assert!(id.starts_with("msg_"), "{id}");
    assert_eq!(out["eventType"], "user.signup");
    assert_eq!(out["payload"], payload);
    assert_eq!(out["eventId"], "evt-1");
    assert_eq!(out["channels"], json!(["project_1"]));
    let timestamp: DateTime<Utc> = out["timestamp"].as_str().unwrap().parse().unwrap();
    assert!((Utc::now() - timestamp).num_seconds().abs() < 60);

    let a = AppId::parse(&app_id).unwrap();
    let row = app
        .store
        .get_message(a, &MessageKey::Id(MessageId::parse(id).unwrap()))
        .await
        .unwrap()
        .expect("the message is stored");
    assert_eq!(row.event_type, "user.signup");
    assert_eq!(row.event_id.as_deref(), Some("evt-1"));
    assert_eq!(row.channels, Some(vec!["project_1".to_string()]));
    assert_eq!(row.created_at, timestamp);
    let stored: Value = serde_json::from_str(row.payload.as_deref().unwrap()).unwrap();
    assert_eq!(stored, payload);
    let retention = row.payload_expires_at - row.created_at;
    let default_days = test_config(&[]).payload_retention_days;
    assert_eq!(
        retention,
        Duration::days(default_days.into()),
        "the configured default"
    );
}

async fn the_payload_is_stored_and_returned_byte_for_byte_as_sent(app: TestApp) {
    let app_id = app.create_app("A").await;
    let payload = "{ \"zeta\" : 1,\n  \"alpha\":[1, 2 ,3.50],\t\"nested\":{\"y\":true , \"x\":null},\"s\":\"caf\\u00e9 \u{1F600}\", \"big\": 12345678901234567890 }";
    let raw = format!("{{\"payload\" :\n {payload} ,  \"eventType\" : \"raw.test\"}}");
    let resp = app
        .request(Method::POST, &format!("/api/v1/app/{app_id}/msg"))
        .header("content-type", "application/json")
        .body(raw)
        .send()
        .await
        .unwrap();
    let (status, out) = into_parts(resp).await;
    assert_eq!(status, 202, "{out}");
    let id = out["id"].as_str().unwrap();

    let row = app
        .store
        .get_message(
            AppId::parse(&app_id).unwrap(),
            &MessageKey::Id(MessageId::parse(id).unwrap()),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.payload.as_deref(), Some(payload), "not re-serialised");

    let text = app
        .get_text(&format!("/api/v1/app/{app_id}/msg/{id}"))
        .await;
    assert!(
        text.contains(payload),
        "GET returns the payload as sent: {text}"
    );
}

async fn a_message_fans_out_to_the_matching_endpoints_and_holds_disabled_ones(app: TestApp) {
    let app_id = app.create_app("A").await;
    let other_app = app.create_app("B").await;
    let foreign = app
        .create_endpoint(&other_app, json!({"url": "https://example.com/b"}))
        .await;
    let all = app
        .create_endpoint(&app_id, json!({"url": "https://example.com/all"}))
        .await;
    let typed = app
        .create_endpoint(
            &app_id,
            json!({"url": "https://example.com/typed", "eventTypes": ["invoice.paid"]}),
        )
        .await;
    let channel = app
        .create_endpoint(
            &app_id,
            json!({"url": "https://example.com/chan", "channels": ["project_1"]}),
        )
        .await;
    let disabled = app
        .create_endpoint(
            &app_id,
            json!({"url": "https://example.com/off", "disabled": true}),
        )
        .await;
    use DeliveryStatus::{Held, Pending};

    let plain = send(
        &app,
        &app_id,
        json!({"eventType": "user.signup", "payload": {}}),
    )
    .await;
    assert_eq!(
        deliveries(&app, &app_id, &plain).await,
        sorted(vec![(all.clone(), Pending), (disabled.clone(), Held)]),
    );

    let on_channel = send(
        &app,
        &app_id,
        json!({"eventType": "user.signup", "payload": {}, "channels": ["project_1", "misc"]}),
    )
    .await;
    assert_eq!(
        deliveries(&app, &app_id, &on_channel).await,
        sorted(vec![
            (all.clone(), Pending),
            (channel.clone(), Pending),
            (disabled.clone(), Held),
        ]),
    );

    let other_channel = send(
        &app,
        &app_id,
        json!({"eventType": "user.signup", "payload": {}, "channels": ["project_2"]}),
    )
    .await;
    assert_eq!(
        deliveries(&app, &app_id, &other_channel).await,
        sorted(vec![(all.clone(), Pending), (disabled.clone(), Held)]),
    );

    let paid = send(
        &app,
        &app_id,
        json!({"eventType": "invoice.paid", "payload": {}}),
    )
    .await;
    let got = deliveries(&app, &app_id, &paid).await;
    assert_eq!(
        got,
        sorted(vec![(all, Pending), (typed, Pending), (disabled, Held)]),
    );
    assert!(
        got.iter().all(|(ep, _)| *ep != foreign),
        "never another app's endpoint"
    );
}

async fn a_repeated_event_id_is_a_conflict_and_writes_nothing_more(app: TestApp) {
    let app_id = app.create_app("A").await;
    app.create_endpoint(&app_id, json!({"url": "https://example.com/h"}))
        .await;
    let path = format!("/api/v1/app/{app_id}/msg");
    let first = send(
        &app,
        &app_id,
        json!({"eventType": "order.placed", "payload": {"n": 1}, "eventId": "order-1"}),
    )
    .await;
    let (status, body) = app
        .post(
            &path,
            json!({"eventType": "order.placed", "payload": {"n": 2}, "eventId": "order-1"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "conflict");

    let messages = stored_messages(&app, &app_id).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].id.to_string(), first);
    assert_eq!(messages[0].payload.as_deref(), Some("{\"n\":1}"));
    assert_eq!(deliveries(&app, &app_id, &first).await.len(), 1);

    let other = app.create_app("B").await;
    let in_other = send(
        &app,
        &other,
        json!({"eventType": "order.placed", "payload": {"n": 3}, "eventId": "order-1"}),
    )
    .await;
    assert_ne!(in_other, first);
    assert_eq!(stored_messages(&app, &other).await.len(), 1);
    assert_eq!(stored_messages(&app, &app_id).await.len(), 1);
}

async fn a_message_is_found_by_id_and_by_event_id_with_or_without_content(app: TestApp) {
    let app_id = app.create_app("A").await;
    let payload = json!({"k": "v"});
    let (_, created) = app
        .post(
            &format!("/api/v1/app/{app_id}/msg"),
            json!({"eventType": "a.b", "payload": payload, "eventId": "evt-42"}),
        )
        .await;
    let id = created["id"].as_str().unwrap();
    let (status, by_id) = app.get(&format!("/api/v1/app/{app_id}/msg/{id}")).await;
    assert_eq!(status, 200, "{by_id}");
    let (status, by_event) = app.get(&format!("/api/v1/app/{app_id}/msg/evt-42")).await;
    assert_eq!(status, 200, "{by_event}");
    assert_eq!(by_id, created);
    assert_eq!(by_event, created);
    assert_eq!(by_id["payload"], payload);

    let (_, bare) = app
        .get(&format!("/api/v1/app/{app_id}/msg/{id}?with_content=false"))
        .await;
    assert_eq!(bare["payload"], json!({}));
    assert_eq!(bare["id"], id);
    let (_, listed) = app
        .get(&format!("/api/v1/app/{app_id}/msg?with_content=false"))
        .await;
    assert_eq!(listed["data"][0]["payload"], json!({}));
    let (status, quiet) = app
        .post(
            &format!("/api/v1/app/{app_id}/msg?with_content=false"),
            json!({"eventType": "a.b", "payload": {"secret": 1}}),
        )
        .await;
    assert_eq!(status, 202);
    assert_eq!(quiet["payload"], json!({}));
    let stored = stored_messages(&app, &app_id).await;
    let quiet_row = stored
        .iter()
        .find(|m| m.id.to_string() == quiet["id"])
        .unwrap();
    assert_eq!(
        quiet_row.payload.as_deref(),
        Some("{\"secret\":1}"),
        "only the answer omits it"
    );

    let (status, body) = app
        .get(&format!("/api/v1/app/{app_id}/msg/no-such-event"))
        .await;
    assert_eq!(status, 404);
    assert_eq!(body["code"], "not_found");
    let (status, _) = app
        .get(&format!("/api/v1/app/{app_id}/msg/{}", MessageId::new()))
        .await;
    assert_eq!(status, 404);
}

async fn the_list_is_newest_first_and_filters_by_type_channel_and_time(app: TestApp) {
    let app_id = app.create_app("A").await;
    let m1 = send(
        &app,
        &app_id,
        json!({"eventType": "a.one", "payload": {}, "channels": ["c1"]}),
    )
    .await;
    let m2 = send(
        &app,
        &app_id,
        json!({"eventType": "b.two", "payload": {}, "channels": ["c2"]}),
    )
    .await;
    let m3 = send(&app, &app_id, json!({"eventType": "a.one", "payload": {}})).await;
    let m4 = send(
        &app,
        &app_id,
        json!({"eventType": "c.three", "payload": {}, "channels": ["c1", "c2"]}),
    )
    .await;
    let base = format!("/api/v1/app/{app_id}/msg");

    let (status, all) = app.get(&base).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(
        ids_of(&all),
        [m4.as_str(), m3.as_str(), m2.as_str(), m1.as_str()],
        "newest first"
    );
    assert_eq!(all["done"], true);

    let (_, p1) = app.get(&format!("{base}?limit=3")).await;
    assert_eq!(ids_of(&p1), [m4.as_str(), m3.as_str(), m2.as_str()]);
    assert_eq!(p1["done"], false);
    let (_, p2) = app
        .get(&format!(
            "{base}?limit=3&iterator={}",
            p1["iterator"].as_str().unwrap()
        ))
        .await;
    assert_eq!(ids_of(&p2), [m1.as_str()]);
    assert_eq!(p2["done"], true);

    let (_, typed) = app
        .get(&format!("{base}?event_types=a.one&event_types=c.three"))
        .await;
    assert_eq!(ids_of(&typed), [m4.as_str(), m3.as_str(), m1.as_str()]);
    let (_, comma) = app.get(&format!("{base}?event_types=a.one,c.three")).await;
    assert_eq!(
        ids_of(&comma),
        [m4.as_str(), m3.as_str(), m1.as_str()],
        "the Svix SDKs join the list with commas"
    );

    let (_, on_c1) = app.get(&format!("{base}?channel=c1")).await;
    assert_eq!(ids_of(&on_c1), [m4.as_str(), m1.as_str()]);
    let (_, both) = app
        .get(&format!("{base}?channel=c2&event_types=b.two"))
        .await;
    assert_eq!(ids_of(&both), [m2.as_str()]);

    let (status, before) = app
        .get(&format!("{base}?before={}", stamp(&all, &m3)))
        .await;
    assert_eq!(status, 200, "{before}");
    assert_eq!(ids_of(&before), [m2.as_str(), m1.as_str()]);
    let (_, after) = app.get(&format!("{base}?after={}", stamp(&all, &m2))).await;
    assert_eq!(ids_of(&after), [m4.as_str(), m3.as_str()]);
    let (_, window) = app
        .get(&format!(
            "{base}?after={}&before={}",
            stamp(&all, &m1),
            stamp(&all, &m4)
        ))
        .await;
    assert_eq!(ids_of(&window), [m3.as_str(), m2.as_str()]);

    let (status, body) = app.get(&format!("{base}?event_types=bad..type")).await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = app.get(&format!("{base}?before=yesterday")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["detail"][0]["loc"], json!(["query", "before"]));
}

async fn a_payload_that_is_not_an_object_is_refused_and_nothing_is_stored(app: TestApp) {
    let app_id = app.create_app("A").await;
    app.create_endpoint(&app_id, json!({"url": "https://example.com/h"}))
        .await;
    for payload in [json!([1, 2]), json!("text"), json!(3), json!(null)] {
        let (status, body) = app
            .post(
                &format!("/api/v1/app/{app_id}/msg"),
                json!({"eventType": "a.b", "payload": payload}),
            )
            .await;
        assert_eq!(status, 422, "{payload}: {body}");
        assert_eq!(
            body["detail"][0]["loc"],
            json!(["body", "payload"]),
            "{payload}"
        );
    }
    let (status, body) = app
        .post(
            &format!("/api/v1/app/{app_id}/msg"),
            json!({"eventType": "a.b"}),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["loc"], json!(["body", "payload"]));
    assert!(stored_messages(&app, &app_id).await.is_empty());
}

async fn an_invalid_event_type_is_refused_and_nothing_is_stored(app: TestApp) {
    let app_id = app.create_app("A").await;
    for bad in ["a..b", "has space", "", "x/y"] {
        let (status, body) = app
            .post(
                &format!("/api/v1/app/{app_id}/msg"),
                json!({"eventType": bad, "payload": {}}),
            )
            .await;
        assert_eq!(status, 422, "{bad:?}: {body}");
        assert_eq!(
            body["detail"][0]["loc"],
            json!(["body", "eventType"]),
            "{bad:?}"
        );
    }
    let (status, body) = app
        .post(
            &format!("/api/v1/app/{app_id}/msg"),
            json!({"eventType": "a.b", "payload": {}, "eventId": "not valid"}),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["loc"], json!(["body", "eventId"]));
    assert!(stored_messages(&app, &app_id).await.is_empty());
}

async fn a_retention_period_outside_5_to_90_days_is_refused(app: TestApp) {
    let app_id = app.create_app("A").await;
    for days in [0, 4, 91, 365, -5] {
        let (status, body) = app
            .post(
                &format!("/api/v1/app/{app_id}/msg"),
                json!({"eventType": "a.b", "payload": {}, "payloadRetentionPeriod": days}),
            )
            .await;
        assert_eq!(status, 422, "{days}: {body}");
        assert_eq!(
            body["detail"][0]["loc"],
            json!(["body", "payloadRetentionPeriod"])
        );
    }
    assert!(stored_messages(&app, &app_id).await.is_empty());

    for days in [5, 90] {
        send(
            &app,
            &app_id,
            json!({"eventType": "a.b", "payload": {}, "payloadRetentionPeriod": days}),
        )
        .await;
    }
    let mut kept: Vec<i64> = stored_messages(&app, &app_id)
        .await
        .iter()
        .map(|m| (m.payload_expires_at - m.created_at).num_days())
        .collect();
    kept.sort();
    assert_eq!(kept, [5, 90]);
}

async fn posting_to_an_unknown_app_is_a_404_unless_the_body_creates_it(app: TestApp) {
    let (status, body) = app
        .post(
            "/api/v1/app/new-customer/msg",
            json!({"eventType": "a.b", "payload": {"n": 1}}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["code"], "not_found");
    assert_eq!(count_apps(&app).await, 0);

    let (status, body) = app
        .post(
            &format!("/api/v1/app/{}/msg", AppId::new()),
            json!({"eventType": "a.b", "payload": {}, "application": {"name": "By id"}}),
        )
        .await;
    assert_eq!(status, 404, "an app cannot be created under an id: {body}");
    assert_eq!(count_apps(&app).await, 0);

    let (status, out) = app
        .post(
            "/api/v1/app/new-customer/msg",
            json!({"eventType": "a.b", "payload": {"n": 2}, "application": {"name": "New Customer"}}),
        )
        .await;
    assert_eq!(status, 202, "{out}");
    let created = app
        .store
        .get_application(&AppKey::Uid("new-customer".into()))
        .await
        .unwrap()
        .expect("the application was created");
    assert_eq!(created.fields.name, "New Customer");
    assert_eq!(count_apps(&app).await, 1);
    let messages = stored_messages(&app, &created.id.to_string()).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].id.to_string(), out["id"].as_str().unwrap());

    let (status, _) = app
        .post(
            "/api/v1/app/new-customer/msg",
            json!({"eventType": "a.b", "payload": {}, "application": {"name": "Ignored"}}),
        )
        .await;
    assert_eq!(status, 202);
    let again = app
        .store
        .get_application(&AppKey::Id(created.id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again.fields.name, "New Customer",
        "an existing application is left alone"
    );
    assert_eq!(count_apps(&app).await, 1);
    assert_eq!(
        stored_messages(&app, &created.id.to_string()).await.len(),
        2
    );
}

async fn a_message_of_one_app_is_not_visible_through_another(app: TestApp) {
    let a = app.create_app("A").await;
    let b = app.create_app("B").await;
    let msg = send(
        &app,
        &a,
        json!({"eventType": "a.b", "payload": {"private": true}, "eventId": "only-a"}),
    )
    .await;
    for key in [msg.as_str(), "only-a"] {
        let (status, body) = app.get(&format!("/api/v1/app/{b}/msg/{key}")).await;
        assert_eq!(status, 404, "{key}: {body}");
    }
    let (_, list) = app.get(&format!("/api/v1/app/{b}/msg")).await;
    assert_eq!(list["data"], json!([]));
    let (status, _) = app.get(&format!("/api/v1/app/{a}/msg/only-a")).await;
    assert_eq!(status, 200);
    assert!(stored_messages(&app, &b).await.is_empty());
}

on_both_stores!(
    a_message_is_accepted_with_its_id_type_payload_and_timestamp,
    the_payload_is_stored_and_returned_byte_for_byte_as_sent,
    a_message_fans_out_to_the_matching_endpoints_and_holds_disabled_ones,
    a_repeated_event_id_is_a_conflict_and_writes_nothing_more,
    a_message_is_found_by_id_and_by_event_id_with_or_without_content,
    the_list_is_newest_first_and_filters_by_type_channel_and_time,
    a_payload_that_is_not_an_object_is_refused_and_nothing_is_stored,
    an_invalid_event_type_is_refused_and_nothing_is_stored,
    a_retention_period_outside_5_to_90_days_is_refused,
    posting_to_an_unknown_app_is_a_404_unless_the_body_creates_it,
    a_message_of_one_app_is_not_visible_through_another,
);
