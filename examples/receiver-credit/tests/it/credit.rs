//! The behaviours of `POST /webhooks/{source}`, each a function of a [`TestApp`] that `main.rs`
//! runs on both stores. Each asserts the durable rows (balances, claims, quarantine), not only
//! the answers.

use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::Barrier;

use crate::app::{now, send, TestApp, OLD_STANDARD_SECRET, STANDARD_SECRET};

const CREDIT: &str = r#"{"type":"credit","data":{"account":"a1","amount":5}}"#;
const CHANGED: &str = r#"{"type":"credit","data":{"account":"a1","amount":500}}"#;

fn status(word: &str) -> Value {
    json!({ "status": word })
}

/// Asserts that nothing at all was stored.
async fn nothing_written(app: &TestApp) {
    assert_eq!(
        app.rows().await,
        0,
        "claims, quarantine and balances are empty"
    );
}

pub async fn fifty_concurrent_deliveries_of_one_signed_event_credit_the_account_once(
    app: &TestApp,
) {
    let barrier = Arc::new(Barrier::new(50));
    let sends: Vec<_> = (0..50)
        .map(|_| {
            let (request, barrier) = (app.standard("msg_1", CREDIT), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                send(request).await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in sends {
        answers.push(task.await.unwrap());
    }
    let processed = answers.iter().filter(|a| **a == (200, status("processed")));
    let duplicates = answers.iter().filter(|a| **a == (200, status("duplicate")));
    assert_eq!(
        (processed.count(), duplicates.count()),
        (1, 49),
        "{answers:?}"
    );
    assert_eq!(app.balance("a1").await, Some(5));
    assert_eq!(app.count("receiver_claims").await, 1);
}

pub async fn a_stripe_event_redelivered_with_fresh_signatures_is_credited_once(app: &TestApp) {
    let body =
        r#"{"id":"evt_1","account":"acct_1","type":"credit","data":{"account":"a1","amount":5}}"#;
    assert_eq!(
        send(app.stripe(now(), body)).await,
        (200, status("processed"))
    );
    for retry_at in [now() - 60, now() + 30] {
        let answer = send(app.stripe(retry_at, body)).await;
        assert_eq!(answer, (200, status("duplicate")));
    }
    assert_eq!(app.balance("a1").await, Some(5));
    let scoped = "receiver_claims WHERE source = 'stripe' AND account = 'acct_1' \
                  AND event_id = 'evt_1'";
    assert_eq!(app.count(scoped).await, 1);
    assert_eq!(app.count("receiver_claims").await, 1);
}

pub async fn a_changed_payload_under_a_credited_id_is_quarantined_with_202_and_not_applied(
    app: &TestApp,
) {
    assert_eq!(
        send(app.standard("msg_1", CREDIT)).await,
        (200, status("processed"))
    );
    for _ in 0..2 {
        let answer = send(app.standard("msg_1", CHANGED)).await;
        assert_eq!(answer, (202, status("quarantined")));
    }
    assert_eq!(app.balance("a1").await, Some(5), "the balance is unchanged");
    assert_eq!(app.count("receiver_claims").await, 1);
    let kept = (
        "standard-webhooks".into(),
        "msg_1".into(),
        CHANGED.as_bytes().to_vec(),
    );
    assert_eq!(
        app.quarantined().await,
        [kept],
        "the changed payload is kept, once"
    );
    // The original payload is still a duplicate, not a conflict with the quarantine.
    assert_eq!(
        send(app.standard("msg_1", CREDIT)).await,
        (200, status("duplicate"))
    );
}

pub async fn a_bad_signature_is_401_and_writes_nothing(app: &TestApp) {
    let forged = app.standard_with(
        "msg_1",
        now(),
        CREDIT,
        "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    );
    let (code, body) = send(forged).await;
    assert_eq!((code, &body["code"]), (401, &json!("signature_mismatch")));
    // The body was tampered with after signing: the same.
    let signed = crate::app::standard_signature(STANDARD_SECRET, "msg_1", now(), CREDIT);
    let tampered = app
        .post(receiver_credit::STANDARD_WEBHOOKS, CHANGED)
        .header("webhook-id", "msg_1")
        .header("webhook-timestamp", now().to_string())
        .header("webhook-signature", &signed);
    let (code, body) = send(tampered).await;
    assert_eq!((code, &body["code"]), (401, &json!("signature_mismatch")));
    let sig = signed.trim_start_matches("v1,");
    assert!(
        !body.to_string().contains(sig),
        "the signature is not echoed: {body}"
    );
    nothing_written(app).await;
}

pub async fn a_missing_signature_header_is_400_and_writes_nothing(app: &TestApp) {
    let unsigned = app
        .post(receiver_credit::STANDARD_WEBHOOKS, CREDIT)
        .header("webhook-id", "msg_1")
        .header("webhook-timestamp", now().to_string());
    let answer = send(unsigned).await;
    let detail = "missing `webhook-signature` header";
    assert_eq!(
        answer,
        (400, json!({"code": "missing_header", "detail": detail}))
    );
    let (code, body) = send(app.post(receiver_credit::STRIPE, CREDIT)).await;
    assert_eq!(
        (code, &body["detail"]),
        (400, &json!("missing `stripe-signature` header"))
    );
    nothing_written(app).await;
}

pub async fn an_expired_timestamp_is_401_and_writes_nothing(app: &TestApp) {
    let stale = app.standard_with("msg_1", now() - 301, CREDIT, STANDARD_SECRET);
    let (code, body) = send(stale).await;
    assert_eq!((code, &body["code"]), (401, &json!("timestamp_too_old")));
    let (code, body) = send(app.stripe(now() - 301, CREDIT)).await;
    assert_eq!((code, &body["code"]), (401, &json!("timestamp_too_old")));
    let (code, _) = send(app.standard_with("msg_1", now() + 301, CREDIT, STANDARD_SECRET)).await;
    assert_eq!(code, 401, "too new is refused as well");
    nothing_written(app).await;
}

pub async fn an_event_without_an_id_is_credited_every_time(app: &TestApp) {
    for _ in 0..3 {
        assert_eq!(
            send(app.stripe(now(), CREDIT)).await,
            (200, status("processed"))
        );
    }
    assert_eq!(
        app.balance("a1").await,
        Some(15),
        "identical bodies are distinct events"
    );
    assert_eq!(app.count("receiver_claims").await, 0);
}

pub async fn a_crash_between_the_commit_and_the_response_makes_the_redelivery_a_duplicate(
    app: &TestApp,
) {
    let committed = app.app.stall_after_next_commit();
    let delivery = app.standard("msg_1", CREDIT).send();
    tokio::select! {
        answer = delivery => panic!("the stalled request answered: {answer:?}"),
        () = committed.notified() => {} // the credit committed; the answer never comes
    }
    // The provider saw no 2xx (its request was dropped), so it delivers again.
    assert_eq!(app.balance("a1").await, Some(5));
    let redelivery = app.standard_with("msg_1", now() + 10, CREDIT, STANDARD_SECRET);
    assert_eq!(send(redelivery).await, (200, status("duplicate")));
    assert_eq!(app.balance("a1").await, Some(5), "credited once");
    assert_eq!(app.count("receiver_claims").await, 1);
}

pub async fn a_failed_credit_rolls_back_its_claim_and_the_redelivery_credits_once(app: &TestApp) {
    app.app.fail_next_credits(1);
    let (code, body) = send(app.standard("msg_1", CREDIT)).await;
    assert_eq!((code, &body["code"]), (503, &json!("credit_failed")));
    nothing_written(app).await;
    assert_eq!(
        send(app.standard("msg_1", CREDIT)).await,
        (200, status("processed"))
    );
    assert_eq!(
        send(app.standard("msg_1", CREDIT)).await,
        (200, status("duplicate"))
    );
    assert_eq!(app.balance("a1").await, Some(5));
    assert_eq!(app.count("receiver_claims").await, 1);
}

pub async fn an_authentic_event_that_is_not_a_valid_credit_is_422_and_writes_nothing(
    app: &TestApp,
) {
    for body in [
        r#"{"type":"credit","data":{"account":"a1","amount":-5}}"#,
        r#"{"type":"credit","data":{"account":"a1"}}"#,
        "not json",
    ] {
        let (code, answer) = send(app.standard("msg_1", body)).await;
        assert_eq!(
            (code, &answer["code"]),
            (422, &json!("invalid_event")),
            "{body}"
        );
    }
    nothing_written(app).await;
}

pub async fn an_event_of_another_type_is_acknowledged_once_and_credits_nothing(app: &TestApp) {
    let refund = r#"{"type":"refund","data":{"account":"a1","amount":5}}"#;
    assert_eq!(
        send(app.standard("msg_1", refund)).await,
        (200, status("processed"))
    );
    assert_eq!(
        send(app.standard("msg_1", refund)).await,
        (200, status("duplicate"))
    );
    assert_eq!(app.balance("a1").await, None);
    assert_eq!(app.count("receiver_claims").await, 1);
}

pub async fn a_secret_being_rotated_out_still_verifies(app: &TestApp) {
    let old = app.standard_with("msg_1", now(), CREDIT, OLD_STANDARD_SECRET);
    assert_eq!(send(old).await, (200, status("processed")));
    let new = app.standard_with("msg_1", now(), CREDIT, STANDARD_SECRET);
    assert_eq!(send(new).await, (200, status("duplicate")));
    assert_eq!(app.balance("a1").await, Some(5));
}
