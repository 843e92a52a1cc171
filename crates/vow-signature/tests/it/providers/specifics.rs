//! What is particular to each provider: rotation encodings, alternative
//! header names, what exactly is signed, and the order of checks.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use vow_signature::provider::{
    verify, Encoding, Error, HeaderFn, HmacConfig, Request, Scheme, DEFAULT_TOLERANCE_SECS,
};

use super::vectors::{twilio, TWILIO_FORM, TWILIO_URL};
use super::{b64_256, hex256, Delivery, NOW};

const URL: &str = "https://vow.example/in/src_1";
const BODY: &str = r#"{"id":"evt_1"}"#;

#[test]
fn stripe_accepts_any_of_several_v1_entries_and_ignores_v0() {
    let good = hex256("whsec_new", format!("{NOW}.{BODY}").as_bytes());
    let old = hex256("whsec_old", format!("{NOW}.{BODY}").as_bytes());
    let header = format!("t={NOW},v1={old},v1={good},v0={}", "0".repeat(64));
    let d = Delivery::new(&[("stripe-signature", &header)], BODY, URL);
    assert!(d.verify(&Scheme::Stripe, &["whsec_new"], NOW).is_ok());
    assert!(d.verify(&Scheme::Stripe, &["whsec_old"], NOW).is_ok());
    let only_v0 = format!("t={NOW},v0={good}");
    let d = Delivery::new(&[("stripe-signature", &only_v0)], BODY, URL);
    assert_eq!(
        d.verify(&Scheme::Stripe, &["whsec_new"], NOW)
            .unwrap_err()
            .status(),
        400
    );
}

#[test]
fn stripe_keys_the_hmac_with_the_whsec_text_not_its_base64_decoding() {
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let decoded = STANDARD.decode(&secret[6..]).unwrap();
    let sig = hex::encode(super::mac::<hmac::Hmac<sha2::Sha256>>(
        &decoded,
        format!("{NOW}.{BODY}").as_bytes(),
    ));
    let d = Delivery::new(
        &[("stripe-signature", &format!("t={NOW},v1={sig}"))],
        BODY,
        URL,
    );
    assert_eq!(
        d.verify(&Scheme::Stripe, &[secret], NOW),
        Err(Error::NoMatchingSignature)
    );
}

#[test]
fn paddle_accepts_any_h1_while_a_secret_rotates() {
    let content = format!("{NOW}:{BODY}");
    let header = format!(
        "ts={NOW};h1={};h1={}",
        hex256("pdl_ntfset_old", content.as_bytes()),
        hex256("pdl_ntfset_new", content.as_bytes())
    );
    let d = Delivery::new(&[("Paddle-Signature", &header)], BODY, URL);
    for secret in ["pdl_ntfset_old", "pdl_ntfset_new"] {
        assert!(
            d.verify(&Scheme::Paddle, &[secret], NOW).is_ok(),
            "{secret}"
        );
    }
    assert!(d
        .verify(&Scheme::Paddle, &["pdl_ntfset_other"], NOW)
        .is_err());
}

#[test]
fn shopify_accepts_the_events_preview_header_name() {
    let sig = b64_256("shpss_secret", BODY.as_bytes());
    let d = Delivery::new(&[("Shopify-Hmac-Sha256", &sig)], BODY, URL);
    assert!(d.verify(&Scheme::Shopify, &["shpss_secret"], NOW).is_ok());
}

#[test]
fn slack_reports_a_malformed_signature_before_a_stale_timestamp() {
    let d = Delivery::new(
        &[
            ("X-Slack-Signature", "v0=zz"),
            ("X-Slack-Request-Timestamp", "1"),
        ],
        BODY,
        URL,
    );
    assert_eq!(
        d.verify(&Scheme::Slack, &["s"], NOW).unwrap_err().status(),
        400
    );
}

#[test]
fn square_signs_the_notification_url_so_another_url_fails() {
    let sig = b64_256("key", format!("{URL}{BODY}").as_bytes());
    let d = Delivery::new(&[("x-square-hmacsha256-signature", &sig)], BODY, URL);
    assert!(d.verify(&Scheme::Square, &["key"], NOW).is_ok());
    let elsewhere = Delivery {
        url: format!("{URL}/other"),
        ..d
    };
    assert_eq!(
        elsewhere.verify(&Scheme::Square, &["key"], NOW),
        Err(Error::NoMatchingSignature)
    );
}

const WHPK: &str = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";
const V1A_SIG: &str =
    "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==";

fn svix(sig: &str) -> Delivery {
    Delivery::new(
        &[
            ("svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
            ("svix-timestamp", "1614265330"),
            ("svix-signature", sig),
        ],
        r#"{"test": 2432232314}"#,
        URL,
    )
}

#[test]
fn standard_webhooks_reads_svix_header_names_and_verifies_v1a_with_a_public_key() {
    let v = svix(V1A_SIG).verify(&Scheme::StandardWebhooks, &[WHPK], 1_614_265_330);
    assert_eq!(
        v.unwrap().id.as_deref(),
        Some("msg_p5jXN8AQM9LWM0D4loKWxJek")
    );
    let symmetric = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let both = format!("{V1A_SIG} v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    let rotated = svix(&both).verify(&Scheme::StandardWebhooks, &[WHPK, symmetric], 1_614_265_330);
    assert!(rotated.is_ok());
}

#[test]
fn standard_webhooks_treats_an_unusable_secret_as_a_misconfiguration() {
    let whsk = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbc=";
    let err = svix(V1A_SIG)
        .verify(&Scheme::StandardWebhooks, &[whsk], 1_614_265_330)
        .unwrap_err();
    assert_eq!((err.status(), err.reason()), (500, "invalid_key"));
}

#[test]
fn twilio_accepts_the_url_with_any_port_removed_or_the_default_one_added() {
    // The port cases of twilio-python's tests/unit/test_request_validator.py.
    let https_1234 = TWILIO_URL.replace(".com", ".com:1234");
    assert_eq!(
        twilio(&https_1234, "RSOYDt4T1cUTdK1PDd93/VVr8B8=", TWILIO_FORM),
        Ok(())
    );
    let http_1234 = https_1234.replace("https", "http");
    assert_eq!(
        twilio(&http_1234, "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=", TWILIO_FORM),
        Ok(())
    );
    let http = TWILIO_URL.replace("https", "http");
    assert_eq!(
        twilio(&http, "0ZXoZLH/DfblKGATFgpif+LLRf4=", TWILIO_FORM),
        Ok(())
    );
    assert_eq!(
        twilio(
            "https://mycompany.com/other.php",
            "RSOYDt4T1cUTdK1PDd93/VVr8B8=",
            TWILIO_FORM
        ),
        Err(Error::NoMatchingSignature)
    );
}

#[test]
fn twilio_reports_an_unreadable_body_hash_as_a_bad_request() {
    let url = format!("{TWILIO_URL}&bodySHA256=abc");
    let err = twilio(&url, "a9nBmqA0ju/hNViExpshrM61xv4=", "{}").unwrap_err();
    assert_eq!((err.status(), err.reason()), (400, "malformed_url"));
}

#[test]
fn twilio_signs_a_json_body_only_through_its_hash() {
    // Without `bodySHA256` in the URL, a JSON body is read as form params.
    let body = r#"{"property": "value", "boolean": true}"#;
    assert_eq!(
        twilio(TWILIO_URL, "a9nBmqA0ju/hNViExpshrM61xv4=", body),
        Err(Error::NoMatchingSignature)
    );
}

#[test]
fn linear_rejects_a_signed_body_without_webhook_timestamp_as_a_bad_request() {
    let body = r#"{"action":"create"}"#;
    let d = Delivery::new(
        &[("linear-signature", &hex256("lin_wh", body.as_bytes()))],
        body,
        URL,
    );
    let err = d.verify(&Scheme::Linear, &["lin_wh"], NOW).unwrap_err();
    assert_eq!((err.status(), err.reason()), (400, "malformed_body"));
    // The MAC is checked first: an unsigned body is never parsed.
    let forged = Delivery::new(&[("linear-signature", &"0".repeat(64))], body, URL);
    assert_eq!(
        forged.verify(&Scheme::Linear, &["lin_wh"], NOW),
        Err(Error::NoMatchingSignature)
    );
}

#[test]
fn linear_reads_webhook_timestamp_in_milliseconds() {
    let body = format!(r#"{{"webhookTimestamp":{}999}}"#, NOW - 1);
    let d = Delivery::new(
        &[("linear-signature", &hex256("lin_wh", body.as_bytes()))],
        body,
        URL,
    );
    assert_eq!(
        d.verify(&Scheme::Linear, &["lin_wh"], NOW)
            .unwrap()
            .timestamp,
        Some(NOW - 1)
    );
}

#[test]
fn discord_rejects_a_deliberately_invalid_signature_and_an_unusable_public_key() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let public = hex::encode(key.verifying_key().to_bytes());
    let ts = NOW.to_string();
    let d = Delivery::new(
        &[
            ("x-signature-ed25519", &"ab".repeat(64)),
            ("x-signature-timestamp", &ts),
        ],
        BODY,
        URL,
    );
    let err = d.verify(&Scheme::Discord, &[&public], NOW).unwrap_err();
    assert_eq!(err.status(), 401);
    let err = d.verify(&Scheme::Discord, &["whsec_abc"], NOW).unwrap_err();
    assert_eq!((err.status(), err.reason()), (500, "invalid_key"));
}

#[test]
fn generic_hmac_returns_the_id_and_honours_its_own_tolerance() {
    let config = HmacConfig::new("X-Sig")
        .with_template("{id}:{timestamp}:{url}:{body}".parse().unwrap())
        .with_timestamp_header("X-Ts")
        .with_id_header("X-Id")
        .with_tolerance_secs(5);
    let ts = NOW - 5;
    let sig = hex256("k", format!("evt_7:{ts}:{URL}:{BODY}").as_bytes());
    let d = Delivery::new(
        &[
            ("x-sig", &sig),
            ("x-ts", &ts.to_string()),
            ("x-id", "evt_7"),
        ],
        BODY,
        URL,
    );
    let scheme = Scheme::Hmac(config);
    let verified = d.verify(&scheme, &["k"], NOW).unwrap();
    assert_eq!(
        (verified.timestamp, verified.id.as_deref()),
        (Some(ts), Some("evt_7"))
    );
    let err = d.verify(&scheme, &["k"], NOW + 1).unwrap_err();
    assert!(
        matches!(
            err,
            Error::TimestampTooOld {
                tolerance_secs: 5,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn generic_hmac_defaults_to_hex_sha256_of_the_body_and_demands_its_prefix() {
    let config = HmacConfig::new("X-Sig").with_prefix("v1=");
    assert_eq!(config.encoding(), Encoding::Hex);
    let sig = hex256("k", BODY.as_bytes());
    let scheme = Scheme::Hmac(config);
    let good = Delivery::new(&[("x-sig", &format!("v1={sig}"))], BODY, URL);
    assert!(good.verify(&scheme, &["k"], NOW).is_ok());
    let bare = Delivery::new(&[("x-sig", &sig)], BODY, URL);
    assert_eq!(bare.verify(&scheme, &["k"], NOW).unwrap_err().status(), 400);
}

#[test]
fn a_lookup_closure_serves_as_the_headers() {
    let sig = format!("sha256={}", hex256("s", BODY.as_bytes()));
    let lookup =
        HeaderFn::new(|name: &str| (name == "x-hub-signature-256").then_some(sig.as_bytes()));
    let request = Request::new(&lookup, BODY.as_bytes(), URL);
    let verified = verify(
        &Scheme::GitHub,
        &["s".to_owned()],
        &request,
        NOW,
        DEFAULT_TOLERANCE_SECS,
    );
    assert!(verified.is_ok());
}
