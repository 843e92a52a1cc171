//! The attempt lists (`/attempt/msg/{id}`, `/attempt/endpoint/{id}`) filter as Svix's do: by
//! class of answer, by the message's event type and channel; `with_content=false` leaves the
//! response bodies out; `expanded_statuses` (sent by Svix's SDKs) is accepted; what vow does
//! not support (`with_msg`, `tag`) is refused by name.

use chrono::{Duration, Utc};
use serde_json::{json, Value};

use crate::delivery::{send, setup};
use crate::helpers::{delivery_config, TestApp};
use crate::receiver::Receiver;

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

/// The page's attempts as `(msgId, responseStatusCode, response)`, sorted.
fn attempts(page: &Value) -> Vec<(String, i64, String)> {
    let data = page["data"].as_array().expect("a page");
    sorted(
        data.iter()
            .map(|a| {
                let msg = a["msgId"].as_str().unwrap().to_string();
                let status = a["responseStatusCode"].as_i64().unwrap();
                (msg, status, a["response"].as_str().unwrap().to_string())
            })
            .collect(),
    )
}

async fn attempt_lists_filter_by_answer_class_event_type_and_channel(app: TestApp) {
    let receiver = Receiver::start(&[500, 500]).await;
    receiver.answer_body("thanks");
    let s = setup(&app, &receiver.url, json!({})).await;
    let a = &s.app_id;
    let billing = r#"{"eventType":"invoice.paid","channels":["billing"],"payload":{"n":1}}"#;
    let invoice = send(&app, a, billing).await;
    let user = send(&app, a, r#"{"eventType":"user.created","payload":{"n":2}}"#).await;
    let config = delivery_config("1m", &[]);
    assert_eq!(app.drain_at(&config, Utc::now()).await, 2);
    assert_eq!(
        app.drain_at(&config, Utc::now() + Duration::hours(1)).await,
        2
    );
    assert_eq!(receiver.received().len(), 4);

    let by_endpoint = format!("/api/v1/app/{a}/attempt/endpoint/{}", s.endpoint);
    let list = |query: &str| {
        let path = format!("{by_endpoint}?{query}");
        let app = &app;
        async move {
            let (status, page) = app.get(&path).await;
            assert_eq!(status, 200, "{path}: {page}");
            attempts(&page)
        }
    };
    let row = |msg: &str, status: i64| (msg.to_string(), status, "thanks".to_string());
    let all = sorted(vec![
        row(&invoice, 500),
        row(&invoice, 200),
        row(&user, 500),
        row(&user, 200),
    ]);
    assert_eq!(list("").await, all, "everything, bodies included");
    assert_eq!(
        list("status_code_class=500").await,
        sorted(vec![row(&invoice, 500), row(&user, 500)])
    );
    assert_eq!(
        list("status_code_class=200&event_types=invoice.paid").await,
        vec![row(&invoice, 200)]
    );
    assert_eq!(
        list("status_code_class=0").await,
        vec![],
        "every attempt got an answer"
    );
    assert_eq!(list("status_code_class=400").await, vec![]);
    assert_eq!(
        list("channel=billing").await,
        vec![row(&invoice, 200), row(&invoice, 500)]
    );
    assert_eq!(list("event_types=user.created,invoice.paid").await, all);
    assert_eq!(list("event_types=no.such.type").await, vec![]);
    let bare: Vec<_> = all
        .iter()
        .map(|(m, c, _)| (m.clone(), *c, String::new()))
        .collect();
    assert_eq!(
        list("with_content=false&expanded_statuses=true").await,
        bare,
        "no bodies without content; expanded_statuses changes nothing"
    );

    let (status, page) = app
        .get(&format!(
            "/api/v1/app/{a}/attempt/msg/{user}?status_code_class=500"
        ))
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(attempts(&page), vec![row(&user, 500)]);
    let (status, page) = app
        .get(&format!(
            "/api/v1/app/{a}/attempt/msg/{user}?channel=billing"
        ))
        .await;
    assert_eq!((status, attempts(&page)), (200, vec![]), "{page}");

    for (query, field) in [
        ("status_code_class=250", "status_code_class"),
        ("channel=no%20spaces", "channel"),
        ("event_types=bad%20type", "event_types"),
        ("expanded_statuses=maybe", "expanded_statuses"),
        ("with_msg=true", "with_msg"),
        ("tag=x", "tag"),
    ] {
        let (status, body) = app.get(&format!("{by_endpoint}?{query}")).await;
        assert_eq!(status, 422, "{query}: {body}");
        let loc = body["detail"][0]["loc"].as_array().unwrap();
        assert_eq!(loc[0], "query", "{query}: {body}");
        assert_eq!(loc[1], field, "{query}: {body}");
    }
}

on_both_stores!(attempt_lists_filter_by_answer_class_event_type_and_channel);
