//! Svix's attempted destinations (`/msg/{msg_id}/endpoint`), attempted messages
//! (`/endpoint/{endpoint_id}/msg`) and send-example, against real receivers: each status is
//! checked against the stored delivery, and send-example against the requests received.

use std::str::FromStr;

use chrono::Utc;
use serde_json::{json, Value};
use vow_core::{AppId, MessageId};
use vow_store::{MessageFilter, Seek};

use crate::delivery::{send, setup};
use crate::helpers::{delivery_config, TestApp};
use crate::receiver::Receiver;

/// The message's stored deliveries, as `(endpoint id, next_attempt_at)`.
async fn deliveries(app: &TestApp, app_id: &str, msg: &str) -> Vec<(String, String)> {
    let (app_id, msg) = (
        AppId::from_str(app_id).unwrap(),
        MessageId::from_str(msg).unwrap(),
    );
    let rows = app.store.list_deliveries(app_id, msg).await.unwrap();
    rows.iter()
        .map(|d| (d.endpoint_id.to_string(), d.next_attempt_at.to_rfc3339()))
        .collect()
}

fn ids(page: &Value) -> Vec<&str> {
    let data = page["data"].as_array().unwrap();
    data.iter().map(|r| r["id"].as_str().unwrap()).collect()
}

async fn attempted_destinations_show_each_endpoints_delivery_status(app: TestApp) {
    let ok = Receiver::start(&[]).await;
    let failing = Receiver::start(&[500]).await;
    let s = setup(&app, &ok.url, json!({"description": "primary"})).await;
    let a = &s.app_id;
    let second = app.create_endpoint(a, json!({"url": failing.url})).await;
    let filtered = json!({"url": ok.url, "eventTypes": ["other.type"]});
    app.create_endpoint(a, filtered).await;
    let raw = r#"{"eventType":"a.b","eventId":"evt-1","payload":{"n":1}}"#;
    let msg = send(&app, a, raw).await;
    let config = delivery_config("1m", &[]);
    assert_eq!(app.drain_at(&config, Utc::now()).await, 2);
    assert_eq!((ok.received().len(), failing.received().len()), (1, 1));

    let (status, page) = app
        .get(&format!("/api/v1/app/{a}/msg/evt-1/endpoint"))
        .await;
    assert_eq!(status, 200, "{page}");
    let mut expected = vec![s.endpoint.as_str(), second.as_str()];
    expected.sort();
    assert_eq!(ids(&page), expected, "the two destinations, by endpoint id");
    assert_eq!(page["done"], true);
    let row = |id: &str| {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .cloned()
    };
    let delivered = row(&s.endpoint).unwrap();
    assert_eq!(delivered["status"], 0);
    assert_eq!(delivered["statusText"], "success");
    assert_eq!(delivered["nextAttempt"], Value::Null);
    assert_eq!(delivered["url"], ok.url);
    assert_eq!(delivered["description"], "primary");
    assert_eq!(delivered["disabled"], false);
    assert_eq!(delivered["version"], 1);
    assert!(delivered["createdAt"].is_string() && delivered["updatedAt"].is_string());
    let retrying = row(&second).unwrap();
    assert_eq!(
        (retrying["status"].clone(), retrying["statusText"].clone()),
        (json!(1), json!("pending"))
    );
    let stored = deliveries(&app, a, &msg).await;
    let next = &stored.iter().find(|(ep, _)| *ep == second).unwrap().1;
    let listed = chrono::DateTime::parse_from_rfc3339(retrying["nextAttempt"].as_str().unwrap());
    assert_eq!(
        listed.unwrap().to_rfc3339(),
        *next,
        "nextAttempt is the stored due time"
    );

    // Pages of one, forward and back.
    let path = format!("/api/v1/app/{a}/msg/{msg}/endpoint?limit=1");
    let (_, p1) = app.get(&path).await;
    assert_eq!(
        (ids(&p1), p1["done"].clone()),
        (vec![expected[0]], json!(false))
    );
    let (_, p2) = app
        .get(&format!(
            "{path}&iterator={}",
            p1["iterator"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        (ids(&p2), p2["done"].clone()),
        (vec![expected[1]], json!(true))
    );
    let back = p2["prevIterator"].as_str().unwrap();
    let (_, p0) = app.get(&format!("{path}&iterator={back}")).await;
    assert_eq!(ids(&p0), vec![expected[0]]);

    // Scoped to the message's application.
    let other = app.create_app("Other").await;
    let (status, body) = app
        .get(&format!("/api/v1/app/{other}/msg/{msg}/endpoint"))
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (404, json!("not_found")),
        "{body}"
    );
    let (status, body) = app
        .get(&format!("/api/v1/app/{a}/msg/{second}/endpoint"))
        .await;
    assert_eq!(status, 422, "an endpoint id is no message id: {body}");
    assert_eq!(body["detail"][0]["loc"], json!(["path", "msg_id"]));
}

async fn attempted_messages_list_an_endpoints_messages_with_filters(app: TestApp) {
    let receiver = Receiver::start(&[200, 500]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let (a, ep) = (&s.app_id, &s.endpoint);
    let invoices = json!({"url": receiver.url, "eventTypes": ["invoice.paid"]});
    let invoices = app.create_endpoint(a, invoices).await;
    let config = delivery_config("1m", &[]);
    let delivered = send(&app, a, r#"{"eventType":"a.b","payload":{"n":1}}"#).await;
    assert_eq!(app.drain_at(&config, Utc::now()).await, 1);
    let retrying = send(&app, a, r#"{"eventType":"c.d","payload":{"n":2}}"#).await;
    assert_eq!(app.drain_at(&config, Utc::now()).await, 1);
    let raw = r#"{"eventType":"a.b","channels":["eu"],"payload":{"n":3}}"#;
    let waiting = send(&app, a, raw).await;
    assert_eq!(receiver.received().len(), 2);

    let app = &app;
    let list = |query: &str| {
        let path = format!("/api/v1/app/{a}/endpoint/{ep}/msg?{query}");
        async move { app.get(&path).await }
    };
    let (status, all) = list("").await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(
        ids(&all),
        vec![&waiting, &retrying, &delivered],
        "newest first"
    );
    let texts: Vec<&str> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["statusText"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["pending", "pending", "success"]);
    assert_eq!(all["data"][2]["payload"], json!({"n": 1}));
    assert_eq!(all["data"][2]["eventType"], "a.b");
    assert_eq!(all["data"][0]["channels"], json!(["eu"]));
    assert!(all["data"][0]["nextAttempt"].is_string());
    assert!(all["data"][0]["timestamp"].is_string());

    assert_eq!(ids(&list("status=0").await.1), vec![&delivered]);
    assert_eq!(ids(&list("status=1").await.1), vec![&waiting, &retrying]);
    assert!(ids(&list("status=2").await.1).is_empty());
    assert_eq!(ids(&list("event_types=c.d").await.1), vec![&retrying]);
    assert_eq!(ids(&list("channel=eu").await.1), vec![&waiting]);
    let (_, bare) = list("with_content=false&limit=1").await;
    assert_eq!(bare["data"][0]["payload"], json!({}));
    assert_eq!(bare["done"], false);
    let (status, body) = list("status=7").await;
    assert_eq!(
        (status, body["detail"][0]["loc"].clone()),
        (422, json!(["query", "status"]))
    );

    // Only what went to that endpoint, and only through the endpoint's application.
    let (_, none) = app
        .get(&format!("/api/v1/app/{a}/endpoint/{invoices}/msg"))
        .await;
    assert!(ids(&none).is_empty(), "{none}");
    let other = app.create_app("Other").await;
    let (status, _) = app
        .get(&format!("/api/v1/app/{other}/endpoint/{ep}/msg"))
        .await;
    assert_eq!(status, 404);
}

async fn send_example_delivers_to_that_endpoint_only(app: TestApp) {
    let target = Receiver::start(&[]).await;
    let bystander = Receiver::start(&[]).await;
    let s = setup(&app, &target.url, json!({})).await;
    let a = &s.app_id;
    app.create_endpoint(a, json!({"url": bystander.url})).await;
    let schemas = json!({"1": {"type": "object", "examples": [{"first": 1}, {"second": 2}]}});
    let (status, _) = app
        .post(
            "/api/v1/event-type",
            json!({"name": "invoice.paid", "description": "Paid", "schemas": schemas}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, _) = app
        .post(
            "/api/v1/event-type",
            json!({"name": "user.created", "description": "New"}),
        )
        .await;
    assert_eq!(status, 201);

    let path = format!("/api/v1/app/{a}/endpoint/{}/send-example", s.endpoint);
    let (status, out) = app
        .post(
            &path,
            json!({"eventType": "invoice.paid", "exampleIndex": 1}),
        )
        .await;
    assert_eq!(status, 202, "{out}");
    assert_eq!(
        (out["eventType"].clone(), out["payload"].clone()),
        (json!("invoice.paid"), json!({"second": 2}))
    );
    let msg = out["id"].as_str().unwrap();
    let stored = deliveries(&app, a, msg).await;
    assert_eq!(stored.len(), 1, "not fanned out");
    assert_eq!(stored[0].0, s.endpoint);
    let (status, out) = app
        .post(
            &path,
            json!({"eventType": "user.created", "exampleIndex": 3}),
        )
        .await;
    assert_eq!(status, 202, "{out}");
    assert_eq!(
        out["payload"],
        json!({"type": "user.created", "data": {"example": true}})
    );

    let config = delivery_config("1m", &[]);
    assert_eq!(app.drain_at(&config, Utc::now()).await, 2);
    let got = target.received();
    assert_eq!(got.len(), 2);
    assert!(got.iter().any(|r| &r.body[..] == br#"{"second":2}"#));
    assert!(bystander.received().is_empty());

    // Errors write nothing.
    let cases = [
        (
            json!({"eventType": "no.such"}),
            404,
            r#"Event type \"no.such\" not found"#,
        ),
        (
            json!({"eventType": "invoice.paid", "exampleIndex": 2}),
            422,
            "has 2 schema example(s)",
        ),
        (
            json!({"eventType": "not a name!"}),
            422,
            r#"["body","eventType"]"#,
        ),
    ];
    for (body, expected, says) in cases {
        let (status, out) = app.post(&path, body.clone()).await;
        assert_eq!(status, expected, "{body} → {out}");
        assert!(out.to_string().contains(says), "{out} names the problem");
    }
    let other = app.create_app("Other").await;
    let foreign = format!("/api/v1/app/{other}/endpoint/{}/send-example", s.endpoint);
    let (status, _) = app
        .post(&foreign, json!({"eventType": "user.created"}))
        .await;
    assert_eq!(status, 404);
    let seek = Seek::for_iterator(None, vow_store::Order::Descending, 100);
    let app_id = AppId::from_str(a).unwrap();
    let none = MessageFilter::default();
    let stored = app.store.list_messages(app_id, &none, &seek).await.unwrap();
    assert_eq!(stored.len(), 2, "only the two examples were stored");
}

on_both_stores!(
    attempted_destinations_show_each_endpoints_delivery_status,
    attempted_messages_list_an_endpoints_messages_with_filters,
    send_example_delivers_to_that_endpoint_only,
);
