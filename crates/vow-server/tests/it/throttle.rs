//! An endpoint's throttle (`throttleRate`, alias `rateLimit`): the alias in the API, and the
//! pace a real receiver sees, from one server (both stores) and from two `vow serve` nodes
//! sharing one PostgreSQL database, which together keep the endpoint's rate.

use std::collections::HashSet;
use std::str::FromStr;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use vow_core::{AppId, EndpointId};
use vow_store::EndpointKey;

use crate::child::{database, Vow};
use crate::cli_listen::{call, create_app, send_raw, OPERATOR};
use crate::delivery::{send, setup};
use crate::helpers::{delivery_config, eventually, TestApp};
use crate::receiver::{Received, Receiver};

on_both_stores!(
    rate_limit_is_taken_as_the_throttle_rate_and_returned_under_both_names,
    a_rate_limit_that_differs_from_the_throttle_rate_is_a_422_naming_both,
);

/// The endpoint's stored throttle, read from the store.
async fn stored_rate(app: &TestApp, app_id: &str, endpoint: &str) -> Option<u16> {
    let key = EndpointKey::Id(EndpointId::from_str(endpoint).unwrap());
    app.store
        .get_endpoint(AppId::from_str(app_id).unwrap(), &key)
        .await
        .unwrap()
        .expect("the endpoint is stored")
        .fields
        .throttle_rate
}

/// Both names of the throttle in an `EndpointOut`.
fn both_names(out: &Value) -> (Value, Value) {
    (out["throttleRate"].clone(), out["rateLimit"].clone())
}

async fn rate_limit_is_taken_as_the_throttle_rate_and_returned_under_both_names(app: TestApp) {
    let app_id = app.create_app("Old SDK").await;
    let path = format!("/api/v1/app/{app_id}/endpoint");
    let (status, created) = app
        .post(
            &path,
            json!({"url": "https://a.example/hook", "rateLimit": 7}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(both_names(&created), (json!(7), json!(7)));
    let ep = created["id"].as_str().unwrap().to_owned();
    assert_eq!(stored_rate(&app, &app_id, &ep).await, Some(7));
    let one = format!("{path}/{ep}");
    assert_eq!(both_names(&app.get(&one).await.1), (json!(7), json!(7)));

    // PUT (EndpointUpdate) under the old name, and both names with one value.
    let (status, put) = app
        .put(
            &one,
            json!({"url": "https://a.example/hook", "rateLimit": 9}),
        )
        .await;
    assert_eq!(status, 200, "{put}");
    assert_eq!(stored_rate(&app, &app_id, &ep).await, Some(9));
    let same = json!({"url": "https://a.example/hook", "rateLimit": 4, "throttleRate": 4});
    let (status, put) = app.put(&one, same).await;
    assert_eq!((status, both_names(&put)), (200, (json!(4), json!(4))));
    assert_eq!(stored_rate(&app, &app_id, &ep).await, Some(4));

    // PATCH sets and clears it under the old name; other fields keep it.
    let (status, patched) = app.patch(&one, json!({"rateLimit": 3})).await;
    assert_eq!((status, both_names(&patched)), (200, (json!(3), json!(3))));
    let (_, described) = app.patch(&one, json!({"description": "d"})).await;
    assert_eq!(both_names(&described), (json!(3), json!(3)));
    assert_eq!(stored_rate(&app, &app_id, &ep).await, Some(3));
    let (status, cleared) = app.patch(&one, json!({"rateLimit": null})).await;
    assert_eq!(
        (status, both_names(&cleared)),
        (200, (Value::Null, Value::Null))
    );
    assert_eq!(stored_rate(&app, &app_id, &ep).await, None);
}

/// A 422 whose one problem is at `body.rateLimit` and names `throttleRate`.
fn names_both(status: u16, body: &Value) {
    assert_eq!(status, 422, "{body}");
    let detail = body["detail"].as_array().unwrap();
    assert_eq!(detail.len(), 1, "{body}");
    assert_eq!(detail[0]["loc"], json!(["body", "rateLimit"]), "{body}");
    assert!(
        detail[0]["msg"].as_str().unwrap().contains("throttleRate"),
        "{body}"
    );
}

async fn a_rate_limit_that_differs_from_the_throttle_rate_is_a_422_naming_both(app: TestApp) {
    let app_id = app.create_app("Confused SDK").await;
    let path = format!("/api/v1/app/{app_id}/endpoint");
    let both = json!({"url": "https://a.example/hook", "throttleRate": 5, "rateLimit": 6});
    let (status, body) = app.post(&path, both.clone()).await;
    names_both(status, &body);
    let (_, list) = app.get(&path).await;
    assert_eq!(list["data"], json!([]), "nothing was created");

    let ep = app
        .create_endpoint(
            &app_id,
            json!({"url": "https://a.example/hook", "throttleRate": 2}),
        )
        .await;
    let one = format!("{path}/{ep}");
    let (status, body) = app.put(&one, both).await;
    names_both(status, &body);
    let (status, body) = app
        .patch(&one, json!({"throttleRate": 5, "rateLimit": 6}))
        .await;
    names_both(status, &body);
    // Clearing under one name while setting under the other is a conflict too.
    let (status, body) = app
        .patch(&one, json!({"throttleRate": null, "rateLimit": 6}))
        .await;
    names_both(status, &body);
    assert_eq!(stored_rate(&app, &app_id, &ep).await, Some(2), "unchanged");
}

/// What a receiver saw of a throttled endpoint's arrivals.
struct Pace {
    /// Arrivals per second over the whole run: (n - 1) / (last - first).
    rate: f64,
    /// Arrivals in each whole second from the first arrival on.
    per_second: Vec<usize>,
}

impl Pace {
    fn of(received: &[Received]) -> Pace {
        let mut at: Vec<Instant> = received.iter().map(|r| r.at).collect();
        at.sort();
        let span = at[at.len() - 1] - at[0];
        let rate = (at.len() - 1) as f64 / span.as_secs_f64();
        let seconds = span.as_secs() as usize;
        let mut per_second = vec![0; seconds];
        for t in &at {
            let second = (*t - at[0]).as_secs() as usize;
            if second < seconds {
                per_second[second] += 1;
            }
        }
        Pace { rate, per_second }
    }

    /// Within 10 % of `rate` over the run; and no whole second is off by more than two
    /// arrivals (one late send moves an arrival across a second's boundary: 9 then 11).
    fn assert_keeps(&self, rate: f64) {
        assert!(
            (self.rate - rate).abs() <= rate * 0.1,
            "{:.2}/s is not within 10 % of {rate}/s (per second: {:?})",
            self.rate,
            self.per_second
        );
        let allowed = (rate as usize - 2)..=(rate as usize + 2);
        assert!(
            self.per_second.iter().all(|n| allowed.contains(n)),
            "per second: {:?}",
            self.per_second
        );
    }
}

/// The `webhook-id`s a receiver got, each once: panics on a duplicate.
fn each_once(received: &[Received]) -> HashSet<String> {
    let mut ids = HashSet::new();
    for r in received {
        assert!(
            ids.insert(r.header("webhook-id").to_owned()),
            "{} arrived twice",
            r.header("webhook-id")
        );
    }
    ids
}

mod one_node {
    use super::*;

    on_both_stores!(a_throttled_endpoint_receives_its_messages_at_its_rate);

    async fn a_throttled_endpoint_receives_its_messages_at_its_rate(app: TestApp) {
        // A server of the same backend whose delivery workers run.
        let app = TestApp::spawn_with(app.backend, delivery_config("1s", &[])).await;
        let receiver = Receiver::start(&[]).await;
        let s = setup(&app, &receiver.url, json!({"rateLimit": 10})).await;
        let mut sent = HashSet::new();
        for i in 0..30 {
            let raw = format!(r#"{{"eventType":"order.created","payload":{{"n":{i}}}}}"#);
            sent.insert(send(&app, &s.app_id, &raw).await);
        }
        let received = eventually("30 arrivals", OPERATOR, Duration::from_secs(20), || async {
            let got = receiver.received();
            (got.len() >= 30).then_some(got)
        })
        .await;
        Pace::of(&received).assert_keeps(10.0);
        assert_eq!(each_once(&received), sent);
    }
}

/// Attempts `node` made, from its own `/metrics`.
async fn attempts_by(node: &Vow) -> f64 {
    let resp = reqwest::Client::new()
        .get(format!("{}/metrics", node.base))
        .bearer_auth(crate::helpers::TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    text.lines()
        .filter(|l| l.starts_with("vow_delivery_attempts_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Two `vow serve` nodes on one PostgreSQL database, an endpoint with `rateLimit` 10/s and 100
/// messages sent through both: the receiver gets each once, at 10/s (not 20/s, as two
/// independent paces would send), and both nodes delivered some.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_one_postgres_together_keep_an_endpoints_rate() {
    let (db, _dir) = database(true).await;
    let (a, b) = (Vow::start(&db, &[]).await, Vow::start(&db, &[]).await);
    let receiver = Receiver::start(&[]).await;
    let app = create_app(&a.base).await;
    let path = format!("/api/v1/app/{app}/endpoint");
    let body = json!({"url": receiver.url, "rateLimit": 10});
    let (status, endpoint) = call(&a.base, Method::POST, &path, Some(body)).await;
    assert_eq!(status, 201, "{endpoint}");

    let mut sent = HashSet::new();
    for i in 0..100 {
        let node = if i % 2 == 0 { &a } else { &b };
        sent.insert(
            send_raw(
                &node.base,
                &app,
                "order.created",
                &format!(r#"{{"n":{i}}}"#),
            )
            .await,
        );
    }
    let received = eventually(
        "100 arrivals",
        OPERATOR,
        Duration::from_secs(40),
        || async {
            let got = receiver.received();
            (got.len() >= 100).then_some(got)
        },
    )
    .await;
    Pace::of(&received).assert_keeps(10.0);
    assert_eq!(each_once(&received), sent);

    // Every delivery is recorded as delivered, and nothing more arrives.
    let stats = format!("{path}/{}/stats", endpoint["id"].as_str().unwrap());
    eventually(
        "100 recorded deliveries",
        OPERATOR,
        Duration::from_secs(10),
        || async {
            let (_, counts) = call(&a.base, Method::GET, &stats, None).await;
            (counts["success"] == 100).then_some(())
        },
    )
    .await;
    assert_eq!(receiver.received().len(), 100);
    let (by_a, by_b) = (attempts_by(&a).await, attempts_by(&b).await);
    assert_eq!(by_a + by_b, 100.0, "one attempt each");
    assert!(
        by_a > 0.0 && by_b > 0.0,
        "both nodes delivered: {by_a} and {by_b}"
    );
}
