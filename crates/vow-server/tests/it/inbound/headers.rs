//! Which provider headers an inbound event keeps (issue 13, defect 9), on both stores: ids are
//! kept, in storage and in the forwarded request, even when their name says "token" (Twilio's
//! `I-Twilio-Idempotency-Token`, vow's own event id for Twilio); credentials and signatures
//! are stripped from both.

use base64::Engine as _;
use chrono::Utc;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha1::Sha1;
use vow_core::InboundEventId;

use super::support::*;
use crate::helpers::{delivery_config, into_parts, TestApp};
use crate::receiver::Receiver;

on_both_stores!(a_twilio_event_keeps_its_idempotency_token_and_loses_its_credentials,);

const TWILIO_AUTH_TOKEN: &str = "12345";

/// Twilio: `X-Twilio-Signature: <base64 HMAC-SHA1(auth token, url ‖ sorted name ‖ value)>`.
fn twilio_signature(url: &str, params: &[(&str, &str)]) -> String {
    let mut sorted = params.to_vec();
    sorted.sort_unstable();
    let mut mac = Hmac::<Sha1>::new_from_slice(TWILIO_AUTH_TOKEN.as_bytes()).unwrap();
    mac.update(url.as_bytes());
    for (name, value) in sorted {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

async fn a_twilio_event_keeps_its_idempotency_token_and_loses_its_credentials(app: TestApp) {
    let config = delivery_config("1m", &[]);
    let destination = Receiver::start(&[]).await;
    let body = json!({"scheme": "twilio", "secrets": [TWILIO_AUTH_TOKEN],
        "destinations": [{"url": destination.url}]});
    let (source, _) = create_source(&app, body).await;
    let url = format!("{}/in/{source}", app.base);
    let form = "CallSid=CA1&From=%2B15551234567";
    let signature = twilio_signature(&url, &[("CallSid", "CA1"), ("From", "+15551234567")]);
    let response = app
        .client
        .post(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-twilio-signature", &signature)
        .header("i-twilio-idempotency-token", "idem-1")
        .header("authorization", "Basic c2VjcmV0")
        .header("cookie", "session=s3cr3t")
        .header("x-api-key", "k3y")
        .body(form)
        .send()
        .await
        .unwrap();
    let (status, out) = into_parts(response).await;
    assert_eq!(
        (status, out["outcome"].as_str()),
        (200, Some("received")),
        "{out}"
    );
    let id = InboundEventId::parse(out["id"].as_str().unwrap()).unwrap();

    let stored = stored_event(&app, source, id).await;
    assert_eq!(stored.event.event_id.as_deref(), Some("idem-1"));
    let content = stored.content.expect("content is kept");
    let names: Vec<&str> = content.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        content
            .headers
            .contains(&("i-twilio-idempotency-token".into(), "idem-1".into())),
        "the id is stored: {names:?}"
    );
    for stripped in ["x-twilio-signature", "authorization", "cookie", "x-api-key"] {
        assert!(
            !names.contains(&stripped),
            "{stripped} is stored: {names:?}"
        );
    }

    assert_eq!(app.forward_at(&config, Utc::now()).await, 1);
    let got = destination.received();
    assert_eq!(got.len(), 1, "forwarded once");
    let forwarded = &got[0];
    assert_eq!(forwarded.header("i-twilio-idempotency-token"), "idem-1");
    for stripped in ["x-twilio-signature", "authorization", "cookie", "x-api-key"] {
        assert!(
            forwarded.headers.get(stripped).is_none(),
            "{stripped} is forwarded: {:?}",
            forwarded.headers
        );
    }
    assert_eq!(&forwarded.body[..], form.as_bytes(), "the exact bytes");
}
