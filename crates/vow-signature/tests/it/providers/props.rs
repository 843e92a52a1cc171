//! `provider::verify` never panics, whatever the headers, body, URL, clock
//! and tolerance.

use proptest::prelude::*;
use vow_signature::provider::{verify, HmacConfig, Request, Scheme};

/// Every header name any scheme reads, so arbitrary values reach the parsers.
const NAMES: [&str; 22] = [
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "stripe-signature",
    "x-hub-signature-256",
    "x-shopify-hmac-sha256",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "x-square-hmacsha256-signature",
    "paddle-signature",
    "linear-signature",
    "x-twilio-signature",
    "x-signature-ed25519",
    "x-signature-timestamp",
    "x-signature",
    "x-sig",
    "x-ts",
    "x-id",
    "shopify-hmac-sha256",
];

fn schemes() -> Vec<Scheme> {
    let generic = HmacConfig::new("x-sig")
        .with_template("{id}.{timestamp}.{url}.{body}".parse().unwrap())
        .with_timestamp_header("x-ts")
        .with_id_header("x-id");
    let mut all = Scheme::NAMED.to_vec();
    all.push(Scheme::Hmac(generic));
    all
}

fn secrets_for(scheme: &Scheme) -> Vec<String> {
    match scheme {
        Scheme::StandardWebhooks => vec!["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()],
        Scheme::Discord => {
            vec!["d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a".into()]
        }
        _ => vec!["s".into(), "t".into()],
    }
}

proptest! {
    #[test]
    fn verify_never_panics_on_arbitrary_headers_bodies_and_urls(
        values in proptest::collection::vec(
            (0..NAMES.len(), proptest::collection::vec(any::<u8>(), 0..160)), 0..8),
        text_values in proptest::collection::vec((0..NAMES.len(), "[ -~]{0,100}"), 0..4),
        body in proptest::collection::vec(any::<u8>(), 0..256),
        url in ".{0,80}",
        now in any::<u64>(),
        tolerance in any::<u64>(),
    ) {
        let mut headers: Vec<(&str, Vec<u8>)> =
            values.into_iter().map(|(i, v)| (NAMES[i], v)).collect();
        headers.extend(text_values.into_iter().map(|(i, v)| (NAMES[i], v.into_bytes())));
        let request = Request::new(&headers[..], &body, &url);
        for scheme in schemes() {
            let _ = verify(&scheme, &secrets_for(&scheme), &request, now, tolerance);
        }
    }

    #[test]
    fn verify_never_panics_on_structured_near_miss_headers(
        ts in any::<u64>(),
        hexish in "[0-9a-fA-F]{0,130}",
        b64ish in "[A-Za-z0-9+/=]{0,90}",
        body in "[ -~]{0,64}",
        now in any::<u64>(),
    ) {
        let ts = ts.to_string();
        let pairs = [
            ("stripe-signature", format!("t={ts},v1={hexish},v1={hexish}")),
            ("paddle-signature", format!("ts={ts};h1={hexish}")),
            ("x-signature", format!("t={ts},v1={hexish}")),
            ("x-hub-signature-256", format!("sha256={hexish}")),
            ("x-slack-signature", format!("v0={hexish}")),
            ("x-slack-request-timestamp", ts.clone()),
            ("x-signature-ed25519", hexish.clone()),
            ("x-signature-timestamp", ts.clone()),
            ("x-twilio-signature", b64ish.clone()),
            ("x-shopify-hmac-sha256", b64ish.clone()),
            ("x-square-hmacsha256-signature", b64ish.clone()),
            ("linear-signature", hexish.clone()),
            ("webhook-id", "msg_1".to_owned()),
            ("webhook-timestamp", ts.clone()),
            ("webhook-signature", format!("v1,{b64ish} v1a,{b64ish}")),
        ];
        let url = format!("https://h:{ts}/p?bodySHA256={hexish}");
        let request = Request::new(&pairs[..], body.as_bytes(), &url);
        for scheme in schemes() {
            let _ = verify(&scheme, &secrets_for(&scheme), &request, now, 300);
        }
    }
}
