//! What operators do through the API, end to end: resend one message, replay an endpoint's
//! failed deliveries (dry run, filters, spacing), recover since a time, read stats, and expunge
//! content. Each test checks the stored rows and what the receiver got, on both stores.

use std::str::FromStr;

use chrono::{Duration, Utc};
use serde_json::json;
use vow_core::{AppId, MessageId, ReplayId};
use vow_store::DeliveryStatus;

use crate::delivery::{delivery_status, send, setup, Setup};
use crate::helpers::{delivery_config, TestApp};
use crate::receiver::{standard_signature_ok, Receiver};

const EVENT: &str = r#"{"eventType":"a.b","payload":{"n":1}}"#;

/// The message's attempts through the API, oldest first: (triggerType, responseStatusCode).
async fn api_attempts(app: &TestApp, s: &Setup, msg: &str) -> Vec<(u64, u64)> {
    let (status, body) = app
        .get(&format!(
            "/api/v1/app/{}/attempt/msg/{msg}?order=ascending",
            s.app_id
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["triggerType"].as_u64().unwrap(),
                a["responseStatusCode"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Dead-letters one message per status in `statuses` (schedule "none": one attempt each).
async fn dead_letters(app: &TestApp, s: &Setup, statuses: &[u16]) -> Vec<String> {
    let config = delivery_config("none", &[]);
    let mut msgs = Vec::new();
    for _ in statuses {
        msgs.push(send(app, &s.app_id, EVENT).await);
        app.drain_at(&config, Utc::now()).await;
    }
    for m in &msgs {
        let (status, ..) = delivery_status(app, &s.app_id, m).await;
        assert_eq!(status, DeliveryStatus::DeadLettered);
    }
    msgs
}

async fn resend_delivers_again_signed_and_records_a_manual_attempt(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = send(&app, &s.app_id, EVENT).await;
    let config = delivery_config("1m", &[]);
    assert_eq!(app.drain_at(&config, Utc::now()).await, 1);

    let path = format!(
        "/api/v1/app/{}/msg/{msg}/endpoint/{}/resend",
        s.app_id, s.endpoint
    );
    let (status, body) = app.post(&path, json!({})).await;
    assert_eq!((status, body), (202, json!({})), "Svix's EmptyResponse");
    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::Pending
    );
    assert_eq!(app.drain_at(&config, Utc::now()).await, 1);

    let got = receiver.received();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|r| r.header("webhook-id") == msg));
    assert!(got.iter().all(|r| standard_signature_ok(r, &s.secret)));
    assert_eq!(got[0].body, got[1].body, "the same bytes");
    assert_eq!(
        api_attempts(&app, &s, &msg).await,
        vec![(0, 200), (1, 200)],
        "scheduled, then manual"
    );
    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::Delivered
    );
}

async fn resend_through_another_application_is_not_found_and_changes_nothing(app: TestApp) {
    let receiver = Receiver::start(&[500]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = dead_letters(&app, &s, &[500]).await.remove(0);
    let other = app.create_app("Other").await;
    let (status, body) = app
        .post(
            &format!(
                "/api/v1/app/{other}/msg/{msg}/endpoint/{}/resend",
                s.endpoint
            ),
            json!({}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = app
        .post(
            &format!("/api/v1/app/{other}/endpoint/{}/replay", s.endpoint),
            json!({}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = app
        .get(&format!(
            "/api/v1/app/{other}/endpoint/{}/stats",
            s.endpoint
        ))
        .await;
    assert_eq!(status, 404);
    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::DeadLettered,
        "untouched"
    );
    app.drain_at(
        &delivery_config("none", &[]),
        Utc::now() + Duration::hours(1),
    )
    .await;
    assert_eq!(receiver.received().len(), 1, "nothing sent again");
}

async fn replay_counts_in_a_dry_run_then_requeues_the_filtered_failures_spaced_out(app: TestApp) {
    let receiver = Receiver::start(&[500, 503]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msgs = dead_letters(&app, &s, &[500, 503]).await;
    let replay = format!("/api/v1/app/{}/endpoint/{}/replay", s.app_id, s.endpoint);

    let (status, body) = app
        .post(&replay, json!({"dryRun": true, "lastStatusCode": 503}))
        .await;
    assert_eq!((status, body), (200, json!({"count": 1, "dryRun": true})));
    let (_, body) = app.post(&replay, json!({"dryRun": true})).await;
    assert_eq!(body["count"], 2);
    for m in &msgs {
        let (status, ..) = delivery_status(&app, &s.app_id, m).await;
        assert_eq!(
            status,
            DeliveryStatus::DeadLettered,
            "a dry run writes nothing"
        );
    }
    let (_, body) = app
        .post(&replay, json!({"eventTypes": ["other.type"]}))
        .await;
    assert_eq!(body["count"], 0, "the event type filter");
    let (status, body) = app
        .post(&replay, json!({"eventTypes": ["not a name!"]}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["detail"][0]["loc"], json!(["body", "eventTypes", "0"]));

    let (status, body) = app.post(&replay, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["count"], &body["dryRun"]),
        (&json!(2), &json!(false))
    );
    let replay_id = body["id"].as_str().unwrap().to_string();
    assert!(replay_id.starts_with("rpl_"), "{body}");
    let stats = format!(
        "/api/v1/app/{}/endpoint/{}/stats?replay_id={replay_id}",
        s.app_id, s.endpoint
    );
    let (_, counts) = app.get(&stats).await;
    assert_eq!(
        (&counts["pending"], &counts["success"]),
        (&json!(2), &json!(0))
    );
    let app_id = AppId::from_str(&s.app_id).unwrap();
    let mut due = Vec::new();
    for m in &msgs {
        let d = app
            .store
            .list_deliveries(app_id, MessageId::from_str(m).unwrap())
            .await
            .unwrap()
            .remove(0);
        assert_eq!(
            (d.status, d.attempts, d.manual),
            (DeliveryStatus::Pending, 0, true)
        );
        due.push(d.next_attempt_at);
    }
    assert!(
        due[1] - due[0] >= Duration::milliseconds(20),
        "replays are spaced out: {due:?}"
    );
    let (_, body) = app.post(&replay, json!({})).await;
    assert_eq!(
        body["count"], 0,
        "pending deliveries are not replayed twice"
    );

    app.drain_at(
        &delivery_config("none", &[]),
        Utc::now() + Duration::seconds(1),
    )
    .await;
    assert_eq!(receiver.received().len(), 4);
    for m in &msgs {
        let (status, ..) = delivery_status(&app, &s.app_id, m).await;
        assert_eq!(status, DeliveryStatus::Delivered);
        let manual: Vec<u64> = api_attempts(&app, &s, m)
            .await
            .iter()
            .map(|a| a.0)
            .collect();
        assert_eq!(manual, vec![0, 1]);
    }
    let (_, counts) = app.get(&stats).await;
    assert_eq!(
        (&counts["pending"], &counts["success"]),
        (&json!(0), &json!(2))
    );
    // The console's (here: the portal's) progress page counts the same replay's deliveries.
    let (_, portal) = app
        .post(
            &format!("/api/v1/auth/app-portal-access/{}", s.app_id),
            json!({}),
        )
        .await;
    let page = format!(
        "/portal/{}/endpoint/{}/replay?requeued=2&replay=",
        portal["token"].as_str().unwrap(),
        s.endpoint
    );
    let html = app.get_text(&format!("{page}{replay_id}")).await;
    assert!(html.contains(r#"id="delivered">2<"#), "{html}");
    let html = app.get_text(&format!("{page}{}", ReplayId::new())).await;
    assert!(
        html.contains(r#"id="delivered">0<"#),
        "another replay's: {html}"
    );
    let (_, body) = app.post(&replay, json!({})).await;
    assert_eq!(body["count"], 0, "nothing failed any more");
    let (status, body) = app.get(&format!("{stats}x")).await;
    assert_eq!(status, 422, "not a replay id: {body}");
}

async fn recover_requeues_what_failed_since_a_time(app: TestApp) {
    let receiver = Receiver::start(&[500]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = dead_letters(&app, &s, &[500]).await.remove(0);
    let path = format!("/api/v1/app/{}/endpoint/{}/recover", s.app_id, s.endpoint);

    let later = (Utc::now() + Duration::hours(1)).to_rfc3339();
    let (status, _) = app.post(&path, json!({ "since": later })).await;
    assert_eq!(status, 202);
    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::DeadLettered,
        "failed before `since`: not recovered"
    );

    let earlier = (Utc::now() - Duration::hours(1)).to_rfc3339();
    let (status, body) = app.post(&path, json!({ "since": earlier })).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "finished");
    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::Pending
    );
    let (status, body) = app.post(&path, json!({})).await;
    assert_eq!(status, 422, "since is required: {body}");

    app.drain_at(
        &delivery_config("none", &[]),
        Utc::now() + Duration::seconds(1),
    )
    .await;
    assert_eq!(receiver.received().len(), 2);
    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::Delivered
    );
}

async fn stats_count_the_endpoint_s_deliveries_by_state(app: TestApp) {
    let receiver = Receiver::start(&[500]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    dead_letters(&app, &s, &[500]).await;
    send(&app, &s.app_id, EVENT).await;
    app.drain_at(&delivery_config("none", &[]), Utc::now())
        .await;
    send(&app, &s.app_id, EVENT).await; // not attempted yet
    let (status, body) = app
        .get(&format!(
            "/api/v1/app/{}/endpoint/{}/stats",
            s.app_id, s.endpoint
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"success": 1, "pending": 1, "sending": 0, "fail": 1, "canceled": 0})
    );
}

async fn expunging_content_removes_the_payload_and_the_attempt_responses(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = send(&app, &s.app_id, EVENT).await;
    app.drain_at(&delivery_config("1m", &[]), Utc::now()).await;
    let (status, _) = app
        .delete(&format!("/api/v1/app/{}/msg/{msg}/content", s.app_id))
        .await;
    assert_eq!(status, 204);
    let stored = app
        .store
        .get_message(
            AppId::from_str(&s.app_id).unwrap(),
            &vow_store::MessageKey::Id(MessageId::from_str(&msg).unwrap()),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.payload, None, "the payload is gone from the store");
    let (_, attempts) = app
        .get(&format!("/api/v1/app/{}/attempt/msg/{msg}", s.app_id))
        .await;
    assert_eq!(attempts["data"][0]["response"], "");
    // A resend after the payload is gone cannot send it: dead-lettered, nothing sent.
    let resend = format!(
        "/api/v1/app/{}/msg/{msg}/endpoint/{}/resend",
        s.app_id, s.endpoint
    );
    assert_eq!(app.post(&resend, json!({})).await.0, 202);
    app.drain_at(&delivery_config("1m", &[]), Utc::now()).await;
    assert_eq!(receiver.received().len(), 1);
    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::DeadLettered
    );
}

/// The value of a counter without labels in `/metrics`, 0 when it was never recorded.
async fn counter(app: &TestApp, name: &str) -> f64 {
    sample(&scrape(app).await, name, &[])
}

async fn metrics_count_dead_letters_and_disabled_endpoints_behind_the_admin_token(app: TestApp) {
    let unauthenticated = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), 401);
    // Counters are per process and tests run in parallel: compare with a reading taken before.
    let dead_before = counter(&app, "vow_deliveries_dead_lettered_total").await;
    let disabled_before = counter(&app, "vow_endpoints_disabled_total").await;
    let messages_before = counter(&app, "vow_messages_created_total").await;
    let receiver = Receiver::start(&[410]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    dead_letters(&app, &s, &[410]).await;
    assert!(counter(&app, "vow_deliveries_dead_lettered_total").await >= dead_before + 1.0);
    assert!(counter(&app, "vow_endpoints_disabled_total").await >= disabled_before + 1.0);
    assert!(counter(&app, "vow_messages_created_total").await >= messages_before + 1.0);
}

/// The sum of the samples of `name` whose labels include every pair of `labels`, 0 when there
/// is none.
pub(crate) fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labelled, value) = rest.rsplit_once(' ')?;
            let all = labels
                .iter()
                .all(|(k, v)| labelled.contains(&format!("{k}=\"{v}\"")));
            (labelled.is_empty() || labelled.starts_with('{')).then_some(())?;
            all.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

pub(crate) async fn scrape(app: &TestApp) -> String {
    let resp = app
        .request(reqwest::Method::GET, "/metrics")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

async fn metrics_time_requests_attempts_and_deliveries_and_gauge_the_backlog(app: TestApp) {
    const ROUTE: &[(&str, &str)] = &[
        ("method", "POST"),
        ("route", "/api/v1/app/{app_id}/msg"),
        ("status", "202"),
    ];
    const DELIVERED: &[(&str, &str)] = &[("outcome", "delivered")];
    // Histograms are per process and tests run in parallel: compare with a reading before.
    let before = scrape(&app).await;
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    send(&app, &s.app_id, EVENT).await;
    // The message waits: the backlog gauge (read from this store at the scrape) sees it.
    crate::helpers::eventually(
        "the due backlog gauge",
        std::time::Duration::from_millis(10),
        std::time::Duration::from_secs(5),
        || async {
            let text = scrape(&app).await;
            (sample(&text, "vow_deliveries_due", &[]) >= 1.0
                && text.contains("\nvow_deliveries_oldest_due_seconds "))
            .then_some(())
        },
    )
    .await;
    app.drain_at(&delivery_config("1m", &[]), Utc::now()).await;
    assert_eq!(receiver.received().len(), 1);
    let after = scrape(&app).await;
    let grew = |name: &str, labels: &[(&str, &str)]| {
        sample(&after, name, labels) - sample(&before, name, labels)
    };
    assert!(
        grew("vow_http_request_seconds_count", ROUTE) >= 1.0,
        "{after}"
    );
    assert!(grew("vow_delivery_attempt_seconds_count", DELIVERED) >= 1.0);
    assert!(grew("vow_delivery_end_to_end_seconds_count", &[]) >= 1.0);
    // Histograms with buckets, not summaries.
    let bucket = [ROUTE, &[("le", "+Inf")]].concat();
    assert!(grew("vow_http_request_seconds_bucket", &bucket) >= 1.0);
    assert!(
        after.contains("vow_delivery_end_to_end_seconds_bucket{le=\"86400\"}"),
        "{after}"
    );
    assert!(
        after.contains("vow_delivery_attempt_seconds_bucket{outcome=\"delivered\",le=\"0.001\"}")
    );
}

on_both_stores!(
    metrics_time_requests_attempts_and_deliveries_and_gauge_the_backlog,
    metrics_count_dead_letters_and_disabled_endpoints_behind_the_admin_token,
    resend_delivers_again_signed_and_records_a_manual_attempt,
    resend_through_another_application_is_not_found_and_changes_nothing,
    replay_counts_in_a_dry_run_then_requeues_the_filtered_failures_spaced_out,
    recover_requeues_what_failed_since_a_time,
    stats_count_the_endpoint_s_deliveries_by_state,
    expunging_content_removes_the_payload_and_the_attempt_responses,
);
