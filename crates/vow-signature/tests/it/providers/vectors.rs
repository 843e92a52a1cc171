//! Every published test vector of `shared/reference/provider-signatures.md`
//! (b), verbatim, through `provider::verify`.

use super::{Delivery, NOW};
use vow_signature::provider::{Error, Scheme};

/// Any URL, for schemes that do not sign it.
const URL: &str = "https://vow.example/in/src_1";

#[test]
fn github_docs_vector_verifies() {
    let d = Delivery::new(
        &[(
            "X-Hub-Signature-256",
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        )],
        "Hello, World!",
        URL,
    );
    let verified = d.verify(&Scheme::GitHub, &["It's a Secret to Everybody"], NOW);
    assert_eq!(verified.map(|v| (v.timestamp, v.id)), Ok((None, None)));
}

#[test]
fn octokit_vector_verifies() {
    let d = Delivery::new(
        &[(
            "x-hub-signature-256",
            "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3",
        )],
        r#"{"foo":"bar"}"#,
        URL,
    );
    assert!(d.verify(&Scheme::GitHub, &["mysecret"], NOW).is_ok());
}

const SLACK_BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";

#[test]
fn slack_docs_worked_example_verifies_at_its_own_time() {
    let d = Delivery::new(
        &[
            (
                "X-Slack-Signature",
                "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
            ),
            ("X-Slack-Request-Timestamp", "1531420618"),
        ],
        SLACK_BODY,
        URL,
    );
    let verified = d
        .verify(
            &Scheme::Slack,
            &["8f742231b10e8888abcd99yyyzzz85a5"],
            1_531_420_618,
        )
        .unwrap();
    assert_eq!(verified.timestamp, Some(1_531_420_618));
    // The example is from 2018: today it is a replay.
    assert!(matches!(
        d.verify(&Scheme::Slack, &["8f742231b10e8888abcd99yyyzzz85a5"], NOW),
        Err(Error::TimestampTooOld { .. })
    ));
}

fn standard(id: &str, ts: &str, sig: &str, body: &str) -> Delivery {
    Delivery::new(
        &[
            ("webhook-id", id),
            ("webhook-timestamp", ts),
            ("webhook-signature", sig),
        ],
        body,
        URL,
    )
}

#[test]
fn standard_webhooks_go_and_csharp_vector_verifies_and_returns_the_id() {
    let d = standard(
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "1614265330",
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        r#"{"test": 2432232314}"#,
    );
    let verified = d
        .verify(
            &Scheme::StandardWebhooks,
            &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
            1_614_265_330,
        )
        .unwrap();
    assert_eq!(verified.timestamp, Some(1_614_265_330));
    assert_eq!(verified.id.as_deref(), Some("msg_p5jXN8AQM9LWM0D4loKWxJek"));
}

#[test]
fn standard_webhooks_rust_vector_verifies() {
    let d = standard(
        "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
        "1649367553",
        "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
        r#"{"email":"test@example.com","username":"test_user"}"#,
    );
    let secrets = ["whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"];
    assert!(d
        .verify(&Scheme::StandardWebhooks, &secrets, 1_649_367_553)
        .is_ok());
}

pub(super) const TWILIO_URL: &str = "https://mycompany.com/myapp.php?foo=1&bar=2";
/// The twilio-python params, form-encoded (`+` must be `%2B` in a form body).
pub(super) const TWILIO_FORM: &str =
    "CallSid=CA1234567890ABCDE&Digits=1234&From=%2B14158675309&To=%2B18005551212&Caller=%2B14158675309";

/// Verifies as Twilio with twilio-python's test auth token.
pub(super) fn twilio(url: &str, signature: &str, body: &str) -> Result<(), Error> {
    Delivery::new(&[("X-Twilio-Signature", signature)], body, url)
        .verify(&Scheme::Twilio, &["12345"], NOW)
        .map(drop)
}

#[test]
fn twilio_form_vector_verifies_with_and_without_the_default_port() {
    let with_port = TWILIO_URL.replace(".com", ".com:443");
    for url in [TWILIO_URL, with_port.as_str()] {
        assert_eq!(
            twilio(url, "RSOYDt4T1cUTdK1PDd93/VVr8B8=", TWILIO_FORM),
            Ok(()),
            "{url}"
        );
        assert_eq!(
            twilio(url, "kvajT1Ptam85bY51eRf/AJRuM3w=", TWILIO_FORM),
            Ok(()),
            "{url}"
        );
    }
}

#[test]
fn twilio_json_body_vector_verifies_through_the_body_hash() {
    let body = r#"{"property": "value", "boolean": true}"#;
    let url = format!(
        "{TWILIO_URL}&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
    );
    assert_eq!(twilio(&url, "a9nBmqA0ju/hNViExpshrM61xv4=", body), Ok(()));
    assert_eq!(
        twilio(
            &url,
            "a9nBmqA0ju/hNViExpshrM61xv4=",
            r#"{"property": "value", "boolean": false}"#
        ),
        Err(Error::BodyHashMismatch)
    );
}

#[test]
fn twilio_duplicate_parameter_vector_sorts_values_and_drops_duplicates() {
    // As in the reference (Digits=5678,1234,1234), and as in twilio-python's
    // MultiDict/QueryDict tests (Digits=5678,1234).
    for body in [
        "Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234&Digits=1234",
        "Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234",
    ] {
        assert_eq!(
            twilio(TWILIO_URL, "IK+Dwps556ElfBT0I3Rgjkr1wJU=", body),
            Ok(()),
            "{body}"
        );
    }
}

fn square(key: &str, url: &str, body: &str, signature: &str) -> Result<(), Error> {
    Delivery::new(&[("x-square-hmacsha256-signature", signature)], body, url)
        .verify(&Scheme::Square, &[key], NOW)
        .map(drop)
}

#[test]
fn square_sdk_vectors_verify() {
    let body = r#"{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}"#;
    let url = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9";
    let sig = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=";
    assert_eq!(square("Ibxx_5AKakO-3qeNVR61Dw", url, body, sig), Ok(()));
    let url = "https://webhook.site/webhooks";
    assert_eq!(
        square(
            "signature-key",
            url,
            r#"{"data":{"type":"webhooks","id":"fake_id"}}"#,
            "W3FlCNk5IA3ZQ2LHTWoajvzfaDu/OwY2tNHIHC3IUOA="
        ),
        Ok(())
    );
}

#[test]
fn square_vector_with_angle_brackets_verifies_over_the_bytes_as_sent() {
    let body = r#"{"data":{"type":"webhooks","id":">id<"}}"#;
    let sig = "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U=";
    assert_eq!(
        square("signature-key", "https://webhook.site/webhooks", body, sig),
        Ok(())
    );
    let escaped = r#"{"data":{"type":"webhooks","id":"\u003eid\u003c"}}"#;
    assert_eq!(
        square(
            "signature-key",
            "https://webhook.site/webhooks",
            escaped,
            sig
        ),
        Err(Error::NoMatchingSignature)
    );
}

#[test]
fn square_go_hex_digest_is_the_same_mac_and_is_not_accepted_as_the_header() {
    use base64::Engine as _;
    let b64 = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=";
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    let hex_digest = "185e1892b2601810d9f4d2186cd5c19cccea6f61e82f8456fd2eaf919f7fd8de";
    assert_eq!(hex::encode(raw), hex_digest);
    // The header carries base64; hex there is malformed.
    let err = square("Ibxx_5AKakO-3qeNVR61Dw", "https://x", "{}", hex_digest).unwrap_err();
    assert_eq!(err.status(), 400);
}
