//! ed25519 endpoints (`whsk_` secrets, as Svix takes them): deliveries carry `v1a` signatures
//! that `ring` verifies with the public key alone; a rotation overlap signs with both keys,
//! each in its own version; the `timestamped` seed style repeats `v1=` for each secret; a
//! malformed key, or a seed style with an ed25519 key, is a 422 naming the field and changes
//! nothing. An inbound source's destination with a `whsk_` secret is signed by the same code.

use chrono::Utc;
use serde_json::{json, Value};
use vow_store::DeliveryStatus;

use crate::delivery::{delivery_status, send, setup, Setup};
use crate::helpers::{delivery_config, TestApp};
use crate::inbound::support::{github_delivery, GITHUB_SECRET};
use crate::receiver::{
    ed25519_signature_ok, seed_timestamped_ok, signature_versions, standard_signature_ok, Receiver,
};

/// Svix's published ed25519 key (its public key is `whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=`).
const KEY: &str =
    "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
/// Another key: seed 0..31 and its public key.
const OTHER_KEY: &str =
    "whsk_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8DoQe/884Qvh1w3RjnS8CZZ+TWMJulDV8d3IZkElUxuA==";
/// The same key as `KEY`, given as its 32-byte seed alone.
const KEY_SEED_ONLY: &str = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbc=";

fn endpoint_path(s: &Setup) -> String {
    format!("/api/v1/app/{}/endpoint/{}", s.app_id, s.endpoint)
}

async fn current_secret(app: &TestApp, s: &Setup) -> String {
    let (status, body) = app.get(&format!("{}/secret", endpoint_path(s))).await;
    assert_eq!(status, 200, "{body}");
    body["key"].as_str().unwrap().to_string()
}

async fn rotate(app: &TestApp, s: &Setup, body: Value) -> (u16, Value) {
    app.post(&format!("{}/secret/rotate", endpoint_path(s)), body)
        .await
}

/// Sends one message, delivers it and returns what the receiver got, after checking the
/// delivery row says it succeeded.
async fn deliver_one(app: &TestApp, s: &Setup, receiver: &Receiver, n: usize) -> Vec<String> {
    let msg = send(app, &s.app_id, r#"{"eventType":"a.b","payload":{"n":1}}"#).await;
    app.drain_at(&delivery_config("1m", &[]), Utc::now()).await;
    let got = receiver.wait_for(n).await;
    assert_eq!(got.len(), n, "exactly one request per message");
    let r = &got[n - 1];
    assert_eq!(r.header("webhook-id"), msg);
    assert_eq!(r.header("svix-signature"), r.header("webhook-signature"));
    let (status, attempts, _) = delivery_status(app, &s.app_id, &msg).await;
    assert_eq!((status, attempts), (DeliveryStatus::Delivered, 1));
    signature_versions(r)
}

async fn an_ed25519_endpoint_delivers_v1a_that_its_public_key_verifies(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({ "secret": KEY_SEED_ONLY })).await;
    assert_eq!(
        s.secret, KEY,
        "stored and answered as seed ‖ public key, as Svix does"
    );
    let versions = deliver_one(&app, &s, &receiver, 1).await;
    assert_eq!(versions, ["v1a"]);
    let r = &receiver.received()[0];
    assert!(ed25519_signature_ok(r, KEY));
    assert!(!ed25519_signature_ok(r, OTHER_KEY));

    // The customer's signing-secret page (the portal's, the console's too) shows the public key.
    let (status, access) = app
        .post(
            &format!("/api/v1/auth/app-portal-access/{}", s.app_id),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{access}");
    let token = access["token"].as_str().unwrap();
    let page = app
        .get_text(&format!("/portal/{token}/endpoint/{}/secret", s.endpoint))
        .await;
    assert!(
        page.contains("whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="),
        "{page}"
    );
}

async fn a_rotation_overlap_signs_with_the_old_and_the_new_key_each_in_its_version(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let s = setup(&app, &receiver.url, json!({})).await;
    assert!(s.secret.starts_with("whsec_"));
    let (status, body) = rotate(&app, &s, json!({ "key": KEY })).await;
    assert_eq!((status, body["key"].as_str()), (200, Some(KEY)));
    assert_eq!(deliver_one(&app, &s, &receiver, 1).await, ["v1a", "v1"]);
    let r = &receiver.received()[0];
    assert!(ed25519_signature_ok(r, KEY), "the new ed25519 key signs");
    assert!(
        standard_signature_ok(r, &s.secret),
        "the old shared secret still signs"
    );

    // Rotating without a key keeps the endpoint on ed25519: a new `whsk_` key.
    let (status, _) = rotate(&app, &s, json!({})).await;
    assert_eq!(status, 200);
    let fresh = current_secret(&app, &s).await;
    assert!(
        fresh.starts_with("whsk_") && fresh != KEY,
        "a new ed25519 key"
    );
    assert_eq!(
        deliver_one(&app, &s, &receiver, 2).await,
        ["v1a", "v1a", "v1"]
    );
    let r = &receiver.received()[1];
    for key in [fresh.as_str(), KEY] {
        assert!(ed25519_signature_ok(r, key));
    }
    assert!(standard_signature_ok(r, &s.secret));
}

async fn the_timestamped_style_repeats_v1_for_each_secret_of_a_rotation(app: TestApp) {
    let receiver = Receiver::start(&[]).await;
    let s = setup(
        &app,
        &receiver.url,
        json!({"signatureStyle": "timestamped"}),
    )
    .await;
    let (status, _) = rotate(&app, &s, json!({})).await;
    assert_eq!(status, 200);
    let new = current_secret(&app, &s).await;
    assert!(new.starts_with("whsec_") && new != s.secret);
    send(&app, &s.app_id, r#"{"eventType":"a.b","payload":{}}"#).await;
    app.drain_at(&delivery_config("1m", &[]), Utc::now()).await;
    let r = &receiver.wait_for(1).await[0];
    assert_eq!(r.header("x-signature").matches(",v1=").count(), 2);
    assert!(seed_timestamped_ok(r, &new));
    assert!(seed_timestamped_ok(r, &s.secret));
    assert!(!seed_timestamped_ok(
        r,
        "whsec_not_a_secret_of_this_endpoint"
    ));
}

async fn a_destination_with_an_ed25519_key_gets_forwarded_events_signed_v1a(app: TestApp) {
    let destination = Receiver::start(&[]).await;
    let (status, out) = app
        .post(
            "/api/v1/source",
            json!({"scheme": "github", "secrets": [GITHUB_SECRET],
                   "destinations": [{"url": destination.url, "secret": KEY_SEED_ONLY}]}),
        )
        .await;
    assert_eq!(status, 201, "{out}");
    let source = vow_core::SourceId::parse(out["id"].as_str().unwrap()).unwrap();
    let (status, secrets) = app.get(&format!("/api/v1/source/{source}/secret")).await;
    assert_eq!(status, 200, "{secrets}");
    assert!(secrets.to_string().contains(KEY), "stored whole: {secrets}");
    let body = br#"{"ref":"refs/heads/main"}"#;
    let (status, event) = github_delivery(&app, source, Some("d-ed"), body).await;
    assert_eq!(status, 200, "{event}");
    let forwarded = app
        .forward_at(&delivery_config("1s", &[]), Utc::now())
        .await;
    assert_eq!(forwarded, 1);
    let got = destination.wait_for(1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].body[..], &body[..]);
    assert_eq!(got[0].header("webhook-id"), event["id"].as_str().unwrap());
    assert_eq!(signature_versions(&got[0]), ["v1a"]);
    assert!(ed25519_signature_ok(&got[0], KEY));
}

/// The 422's `loc` paths.
fn problem_locs(body: &Value) -> Vec<String> {
    body["detail"]
        .as_array()
        .unwrap_or_else(|| panic!("not a validation problem: {body}"))
        .iter()
        .map(|d| {
            let loc: Vec<&str> = d["loc"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect();
            loc.join(".")
        })
        .collect()
}

async fn malformed_keys_and_a_seed_style_with_ed25519_are_422s_that_change_nothing(app: TestApp) {
    let app_id = app.create_app("Refusals").await;
    let endpoints = format!("/api/v1/app/{app_id}/endpoint");
    let mismatched = KEY.replace("RqSKJp4", "RqSKJp5");
    for (body, why) in [
        (
            json!({"url": "https://example.com/h", "secret": "whsk_AAAA"}),
            "decodes to 3 bytes",
        ),
        (
            json!({"url": "https://example.com/h", "secret": mismatched}),
            "does not match",
        ),
        (
            json!({"url": "https://example.com/h", "secret": KEY, "signatureStyle": "timestamped"}),
            "signatureStyle `standard-webhooks`",
        ),
    ] {
        let (status, problem) = app.post(&endpoints, body).await;
        assert_eq!(status, 422, "{problem}");
        assert_eq!(problem_locs(&problem), ["body.secret"]);
        assert!(problem.to_string().contains(why), "{problem}");
        assert!(
            !problem.to_string().contains("RqSKJp"),
            "the key is not echoed"
        );
    }
    let (_, listed) = app.get(&endpoints).await;
    assert_eq!(
        listed["data"].as_array().unwrap().len(),
        0,
        "nothing stored"
    );

    // A seed-style endpoint refuses an ed25519 rotation; an ed25519 one refuses a seed style.
    let seed = Setup {
        app_id: app_id.clone(),
        endpoint: app
            .create_endpoint(
                &app_id,
                json!({"url": "https://example.com/s", "signatureStyle": "sha256"}),
            )
            .await,
        secret: String::new(),
    };
    let before = current_secret(&app, &seed).await;
    for key in ["whsk_AAAA", KEY] {
        let (status, problem) = rotate(&app, &seed, json!({ "key": key })).await;
        assert_eq!(status, 422, "{problem}");
        assert_eq!(problem_locs(&problem), ["body.key"]);
    }
    assert_eq!(current_secret(&app, &seed).await, before, "not rotated");

    let ed = Setup {
        app_id: app_id.clone(),
        endpoint: app
            .create_endpoint(
                &app_id,
                json!({"url": "https://example.com/e", "secret": KEY}),
            )
            .await,
        secret: KEY.into(),
    };
    let (status, problem) = app
        .patch(
            &endpoint_path(&ed),
            json!({"signatureStyle": "timestamped"}),
        )
        .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem_locs(&problem), ["body.signatureStyle"]);
    let (status, problem) = app
        .put(
            &endpoint_path(&ed),
            json!({"url": "https://example.com/e", "signatureStyle": "sha256"}),
        )
        .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem_locs(&problem), ["body.signatureStyle"]);
    let (_, stored) = app.get(&endpoint_path(&ed)).await;
    assert_eq!(stored["signatureStyle"], "standard-webhooks", "{stored}");
    assert_eq!(current_secret(&app, &ed).await, KEY);
}

on_both_stores!(
    an_ed25519_endpoint_delivers_v1a_that_its_public_key_verifies,
    a_rotation_overlap_signs_with_the_old_and_the_new_key_each_in_its_version,
    the_timestamped_style_repeats_v1_for_each_secret_of_a_rotation,
    a_destination_with_an_ed25519_key_gets_forwarded_events_signed_v1a,
    malformed_keys_and_a_seed_style_with_ed25519_are_422s_that_change_nothing,
);
