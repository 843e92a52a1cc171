//! Delivery end to end: a message posted through the API reaches a real receiver, signed over
//! the exact bytes, retried and dead-lettered by the policy, with attempts recorded. Workers are
//! drained deterministically (`drain_at`), moving the clock forward to reach retries.

use std::str::FromStr;

use chrono::{Duration, SubsecRound, Utc};
use serde_json::json;
use vow_core::{AppId, MessageId};
use vow_store::queue::{AttemptFilter, ClaimRequest, EndpointRoom, NewAttempt};
use vow_store::{DeliveryStatus, MessageKey, Order, Seek};

use crate::helpers::{delivery_config, eventually, Backend, TestApp};
use crate::receiver::{seed_sha256_ok, standard_signature_ok, Receiver};

/// How often and how long tests here poll for what they wait on.
const TICK: std::time::Duration = std::time::Duration::from_millis(50);
const LIMIT: std::time::Duration = std::time::Duration::from_secs(15);

pub(crate) struct Setup {
    pub(crate) app_id: String,
    pub(crate) endpoint: String,
    pub(crate) secret: String,
}

/// An application with one endpoint to `url` (plus the `extra` endpoint fields).
pub(crate) async fn setup(app: &TestApp, url: &str, extra: serde_json::Value) -> Setup {
    let app_id = app.create_app("Sender").await;
    let mut body = json!({ "url": url });
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let endpoint = app.create_endpoint(&app_id, body).await;
    let (_, secret) = app
        .get(&format!("/api/v1/app/{app_id}/endpoint/{endpoint}/secret"))
        .await;
    Setup {
        app_id,
        endpoint,
        secret: secret["key"].as_str().unwrap().to_string(),
    }
}

/// Posts a raw message body; returns the message id.
pub(crate) async fn send(app: &TestApp, app_id: &str, raw: &str) -> String {
    let resp = app
        .request(reqwest::Method::POST, &format!("/api/v1/app/{app_id}/msg"))
        .header("content-type", "application/json")
        .body(raw.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let body: serde_json::Value = resp.json().await.unwrap();
    body["id"].as_str().unwrap().to_string()
}

/// The status, attempt count and dead-letter reason of the message's only delivery.
pub(crate) async fn delivery_status(
    app: &TestApp,
    app_id: &str,
    msg: &str,
) -> (DeliveryStatus, u32, Option<String>) {
    let app_id = AppId::from_str(app_id).unwrap();
    let msg = MessageId::from_str(msg).unwrap();
    let d = app.store.list_deliveries(app_id, msg).await.unwrap();
    assert_eq!(d.len(), 1);
    (d[0].status, d[0].attempts, d[0].dead_letter_reason.clone())
}

/// The stored attempts of a message, oldest first.
pub(crate) async fn attempts(app: &TestApp, app_id: &str, msg: &str) -> Vec<NewAttempt> {
    let filter = AttemptFilter {
        msg_id: Some(MessageId::from_str(msg).unwrap()),
        ..Default::default()
    };
    let seek = Seek::for_iterator(None, Order::Ascending, 100);
    let attempts = app
        .queue
        .list_attempts(AppId::from_str(app_id).unwrap(), &filter, &seek)
        .await
        .unwrap();
    attempts.into_iter().map(|a| a.attempt).collect()
}

async fn attempt_statuses(app: &TestApp, app_id: &str, msg: &str) -> Vec<Option<u16>> {
    let attempts = attempts(app, app_id, msg).await;
    attempts.iter().map(|a| a.response_status).collect()
}

async fn a_message_is_delivered_once_signed_over_the_exact_bytes(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({"headers": {"X-Tenant": "42"}})).await;
    let raw = r#"{"eventType":"invoice.paid","payload":{ "z": 1,  "a" : [true, null] }}"#;
    let msg = send(&app, &s.app_id, raw).await;
    let config = delivery_config("1s", &[]);

    assert_eq!(app.drain_at(&config, Utc::now()).await, 1);
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(&r.body[..], br#"{ "z": 1,  "a" : [true, null] }"#);
    assert_eq!(r.header("webhook-id"), msg);
    assert_eq!(r.header("svix-id"), msg);
    assert_eq!(r.header("content-type"), "application/json");
    assert_eq!(r.header("x-tenant"), "42");
    assert!(
        standard_signature_ok(r, &s.secret),
        "signature verifies independently"
    );
    assert!(!standard_signature_ok(
        r,
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    ));

    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::Delivered
    );
    assert_eq!(
        attempt_statuses(&app, &s.app_id, &msg).await,
        vec![Some(200)]
    );
    // Nothing is due any more.
    assert_eq!(
        app.drain_at(&config, Utc::now() + Duration::days(2)).await,
        0
    );
    assert_eq!(receiver.received().len(), 1);
}

async fn a_failing_endpoint_is_retried_with_the_same_webhook_id(app: TestApp) {
    let receiver = Receiver::start(&[500, 503]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{"n":1}}"#).await;
    let config = delivery_config("1m,1m,1m", &[]);
    let t0 = Utc::now();
    assert_eq!(app.drain_at(&config, t0).await, 1);
    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::Pending
    );
    assert_eq!(
        app.drain_at(&config, t0 + Duration::seconds(5)).await,
        0,
        "not due yet"
    );
    assert_eq!(app.drain_at(&config, t0 + Duration::minutes(2)).await, 1);
    assert_eq!(app.drain_at(&config, t0 + Duration::minutes(4)).await, 1);
    let got = receiver.received();
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|r| r.header("webhook-id") == msg));
    assert!(got.iter().all(|r| standard_signature_ok(r, &s.secret)));
    assert_ne!(
        got[0].header("webhook-timestamp"),
        got[2].header("webhook-timestamp")
    );
    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::Delivered
    );
    assert_eq!(
        attempt_statuses(&app, &s.app_id, &msg).await,
        vec![Some(500), Some(503), Some(200)]
    );
}

async fn a_client_error_gets_two_more_attempts_then_dead_letters(app: TestApp) {
    let receiver = Receiver::start(&[400, 404, 422, 400, 400]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    let config = delivery_config("1m,1m,1m,1m,1m,1m", &[]);
    let t0 = Utc::now();
    for i in 0..6 {
        app.drain_at(&config, t0 + Duration::minutes(3 * i)).await;
    }
    assert_eq!(receiver.received().len(), 3);
    let (status, attempts, reason) = delivery_status(&app, &s.app_id, &msg).await;
    assert_eq!(status, DeliveryStatus::DeadLettered);
    assert_eq!(attempts, 3);
    assert!(reason.unwrap().contains("422"));
    let (_, ep) = app
        .get(&format!("/api/v1/app/{}/endpoint/{}", s.app_id, s.endpoint))
        .await;
    assert_eq!(ep["disabled"], false, "one dead letter does not disable");
}

async fn gone_dead_letters_and_disables_the_endpoint_at_once(app: TestApp) {
    let receiver = Receiver::start(&[410]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    let config = delivery_config("1m,1m", &[]);
    app.drain_at(&config, Utc::now()).await;
    assert_eq!(
        delivery_status(&app, &s.app_id, &msg).await.0,
        DeliveryStatus::DeadLettered
    );
    let (_, ep) = app
        .get(&format!("/api/v1/app/{}/endpoint/{}", s.app_id, s.endpoint))
        .await;
    assert_eq!(ep["disabled"], true);
    // Later messages are kept, held, and not attempted.
    let later = send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    assert_eq!(
        app.drain_at(&config, Utc::now() + Duration::hours(1)).await,
        0
    );
    assert_eq!(
        delivery_status(&app, &s.app_id, &later).await.0,
        DeliveryStatus::Held
    );
    assert_eq!(receiver.received().len(), 1);
}

async fn three_dead_letters_in_a_row_disable_the_endpoint(app: TestApp) {
    let receiver = Receiver::start(&[500; 10]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let config = delivery_config("none", &[]);
    let mut msgs = Vec::new();
    for _ in 0..3 {
        msgs.push(send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await);
        let (_, ep) = app
            .get(&format!("/api/v1/app/{}/endpoint/{}", s.app_id, s.endpoint))
            .await;
        assert_eq!(ep["disabled"], false);
        app.drain_at(&config, Utc::now()).await;
    }
    for m in &msgs {
        assert_eq!(
            delivery_status(&app, &s.app_id, m).await.0,
            DeliveryStatus::DeadLettered
        );
    }
    let (_, ep) = app
        .get(&format!("/api/v1/app/{}/endpoint/{}", s.app_id, s.endpoint))
        .await;
    assert_eq!(ep["disabled"], true);
}

async fn a_private_destination_is_refused_without_the_allow_list(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    let config = delivery_config("1m", &[("allowed_subnets", "")]);
    app.drain_at(&config, Utc::now()).await;
    assert!(
        receiver.received().is_empty(),
        "nothing reached the loopback receiver"
    );
    let (status, _, reason) = delivery_status(&app, &s.app_id, &msg).await;
    assert_eq!(status, DeliveryStatus::DeadLettered);
    assert!(reason.is_some());
    let filter = AttemptFilter::default();
    let seek = Seek::for_iterator(None, Order::Ascending, 10);
    let attempts = app
        .queue
        .list_attempts(AppId::from_str(&s.app_id).unwrap(), &filter, &seek)
        .await
        .unwrap();
    assert!(
        attempts[0]
            .attempt
            .error
            .as_deref()
            .unwrap()
            .contains("loopback"),
        "{:?}",
        attempts[0].attempt.error
    );
}

async fn the_seed_000_style_verifies_with_the_seed_receivers_own_check(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let secret = "whsec_ZGVtb19zZWNyZXRfZGVtb19zZWNyZXRfZGVtbw==";
    let s = setup(
        &app,
        &receiver.url,
        json!({"signatureStyle": "sha256", "secret": secret}),
    )
    .await;
    let msg = send(
        &app,
        &s.app_id,
        r#"{"eventType":"job.completed","payload":{"jobId":"job_1"}}"#,
    )
    .await;
    app.drain_at(&delivery_config("1m", &[]), Utc::now()).await;
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].header("x-delivery-id"), msg);
    assert!(seed_sha256_ok(&got[0], &s.secret));
}

async fn during_a_rotation_both_secrets_sign(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let (status, _) = app
        .post(
            &format!(
                "/api/v1/app/{}/endpoint/{}/secret/rotate",
                s.app_id, s.endpoint
            ),
            json!({}),
        )
        .await;
    assert!(status == 200 || status == 204);
    let (_, new) = app
        .get(&format!(
            "/api/v1/app/{}/endpoint/{}/secret",
            s.app_id, s.endpoint
        ))
        .await;
    send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    app.drain_at(&delivery_config("1m", &[]), Utc::now()).await;
    let r = &receiver.wait_for(1).await[0];
    assert!(
        standard_signature_ok(r, &s.secret),
        "old secret still verifies"
    );
    assert!(standard_signature_ok(r, new["key"].as_str().unwrap()));
}

async fn the_background_worker_delivers_as_soon_as_a_message_is_accepted(app: TestApp) {
    let app = TestApp::spawn_with(app.backend, delivery_config("1m", &[])).await;
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].header("webhook-id"), msg);
    let key = MessageKey::Id(MessageId::from_str(&msg).unwrap());
    assert!(app
        .store
        .get_message(AppId::from_str(&s.app_id).unwrap(), &key)
        .await
        .unwrap()
        .is_some());
}

async fn operational_webhooks_report_exhaustion_and_a_disabled_endpoint(app: TestApp) {
    let receiver = Receiver::start(&[410]).await;
    let ops = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    let msg = send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    let config = delivery_config("1m", &[("operational_webhook_url", &ops.url)]);
    app.drain_at(&config, Utc::now()).await;
    app.drain_at(&config, Utc::now() + Duration::seconds(1))
        .await;
    let got = ops.wait_for(2).await;
    let (_, secret) = app
        .get("/api/v1/app/vow-operational/endpoint/operational/secret")
        .await;
    let secret = secret["key"].as_str().unwrap();
    let mut types = Vec::new();
    for r in &got {
        assert!(standard_signature_ok(r, secret));
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["data"]["endpointId"], s.endpoint.as_str());
        types.push(body["type"].as_str().unwrap().to_string());
        if body["type"] == "message.attempt.exhausted" {
            assert_eq!(body["data"]["msgId"], msg.as_str());
            assert_eq!(body["data"]["lastStatusCode"], 410);
        }
    }
    types.sort();
    assert_eq!(types, ["endpoint.disabled", "message.attempt.exhausted"]);
}

/// At shutdown a delivery claimed ahead of its endpoint's one slot (PostgreSQL claims twice an
/// endpoint's slots) is given back unattempted: once the running attempt is recorded it can be
/// claimed at once, no attempt made, rather than being attempted past the shutdown or waiting for
/// its lease to run out. On SQLite, which claims only the slots, it is never claimed: the same
/// holds.
async fn at_shutdown_a_claim_waiting_for_its_slot_gives_its_lease_back(app: TestApp) {
    let backend = app.backend;
    let mut config = delivery_config("1h", &[]);
    config.delivery_max_per_endpoint = 1;
    let app = TestApp::spawn_with(backend, config).await;
    let receiver = Receiver::start(&[]).await;
    // Past the attempt timeout (1 s): the first attempt holds the slot until it times out.
    receiver.answer_after(std::time::Duration::from_millis(1500));
    let s = setup(&app, &receiver.url, json!({})).await;
    let event = r#"{"eventType":"a.b","payload":{}}"#;
    let msgs = [
        send(&app, &s.app_id, event).await,
        send(&app, &s.app_id, event).await,
    ];
    let running = receiver.wait_for(1).await[0]
        .header("webhook-id")
        .to_string();
    let waiting = msgs.iter().find(|m| **m != running).unwrap().clone();
    let (store, queue) = (app.store.clone(), app.queue.clone());
    if matches!(backend, Backend::Postgres) {
        // Both are leased: nothing falls due before a lease runs out.
        eventually("both deliveries claimed", TICK, LIMIT, || async {
            let due = queue.next_due().await.unwrap()?;
            (due > Utc::now() + Duration::seconds(10)).then_some(())
        })
        .await;
    }
    drop(app);

    let app_id = AppId::from_str(&s.app_id).unwrap();
    let attempts = |msg: String| {
        let store = store.clone();
        async move {
            let msg = MessageId::from_str(&msg).unwrap();
            store.list_deliveries(app_id, msg).await.unwrap()[0].attempts
        }
    };
    eventually("the running attempt recorded", TICK, LIMIT, || async {
        (attempts(running.clone()).await == 1).then_some(())
    })
    .await;
    let now = Utc::now().trunc_subsecs(6);
    let claimed = queue
        .claim_deliveries(&ClaimRequest {
            now,
            lease: Duration::seconds(30),
            limit: 10,
            room: EndpointRoom::unlimited(),
        })
        .await
        .unwrap();
    let ids: Vec<String> = claimed
        .iter()
        .map(|c| c.delivery.msg_id.to_string())
        .collect();
    assert_eq!(
        ids,
        [waiting.as_str()],
        "only the waiting one is claimable now"
    );
    assert_eq!(claimed[0].delivery.attempts, 0);
    assert_eq!(attempts(waiting).await, 0);
    assert_eq!(
        receiver.received().len(),
        1,
        "the waiting one was never sent"
    );
}

on_both_stores!(
    at_shutdown_a_claim_waiting_for_its_slot_gives_its_lease_back,
    operational_webhooks_report_exhaustion_and_a_disabled_endpoint,
    a_message_is_delivered_once_signed_over_the_exact_bytes,
    a_failing_endpoint_is_retried_with_the_same_webhook_id,
    a_client_error_gets_two_more_attempts_then_dead_letters,
    gone_dead_letters_and_disables_the_endpoint_at_once,
    three_dead_letters_in_a_row_disable_the_endpoint,
    a_private_destination_is_refused_without_the_allow_list,
    the_seed_000_style_verifies_with_the_seed_receivers_own_check,
    during_a_rotation_both_secrets_sign,
    the_background_worker_delivers_as_soon_as_a_message_is_accepted,
);
