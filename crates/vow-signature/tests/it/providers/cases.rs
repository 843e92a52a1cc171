//! The same cases against every provider: a delivery signed as the provider
//! documents verifies; a tampered body, another secret, a stale or future
//! timestamp are 401; each missing and each malformed header is 400; the
//! second secret of a rotation passes.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::Signer as _;
use hmac::Hmac;
use vow_signature::provider::{Encoding, HmacAlgorithm, HmacConfig, Scheme};

use super::{b64_256, cat, hex256, mac, Delivery, NOW, TOLERANCE};

/// A provider under test.
struct Provider {
    scheme: Scheme,
    /// The two secrets a source could be configured with (A, B).
    secrets: [String; 2],
    /// A delivery signed with secret `which` (0 = A, 1 = B) at `ts`.
    sign: fn(which: usize, ts: u64) -> Delivery,
    /// Whether the scheme signs a timestamp.
    timestamped: bool,
    /// Every header whose absence is a bad request.
    required: &'static [&'static str],
    /// Header values that are malformed.
    malformed: &'static [(&'static str, &'static str)],
}

const URL: &str = "https://vow.example/in/src_1?tenant=acme";
const BODY: &str = r#"{"id":"evt_1","type":"thing.happened"}"#;
const WHSEC: [&str; 2] = [
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
];
const TEXT: [&str; 2] = ["secret-a", "secret-b"];

fn text(which: usize) -> &'static str {
    TEXT[which]
}

fn discord_key(which: usize) -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[which as u8 + 1; 32])
}

fn generic() -> HmacConfig {
    HmacConfig::new("X-Acme-Signature")
        .with_prefix("sha512=")
        .with_encoding(Encoding::Base64)
        .with_algorithm(HmacAlgorithm::Sha512)
        .with_template("{id}.{timestamp}.{body}".parse().unwrap())
        .with_timestamp_header("X-Acme-Timestamp")
        .with_id_header("X-Acme-Id")
}

fn providers() -> Vec<Provider> {
    let texts = || TEXT.map(str::to_owned);
    vec![
        Provider {
            scheme: Scheme::StandardWebhooks,
            secrets: WHSEC.map(str::to_owned),
            sign: |which, ts| {
                let key = STANDARD.decode(&WHSEC[which]["whsec_".len()..]).unwrap();
                let content = format!("msg_1.{ts}.{BODY}");
                let sig = STANDARD.encode(mac::<Hmac<sha2::Sha256>>(&key, content.as_bytes()));
                let ts = ts.to_string();
                let headers: &[(&str, &str)] = &[
                    ("webhook-id", "msg_1"),
                    ("webhook-timestamp", ts.as_str()),
                    ("webhook-signature", &format!("v1,{sig}")),
                ];
                Delivery::new(headers, BODY, URL)
            },
            timestamped: true,
            required: &["webhook-id", "webhook-timestamp", "webhook-signature"],
            malformed: &[
                ("webhook-timestamp", "soon"),
                ("webhook-signature", "nocomma"),
            ],
        },
        Provider {
            scheme: Scheme::Stripe,
            secrets: ["whsec_test_secret".into(), "whsec_rolled_secret".into()],
            sign: |which, ts| {
                let key = ["whsec_test_secret", "whsec_rolled_secret"][which];
                let v1 = hex256(key, format!("{ts}.{BODY}").as_bytes());
                Delivery::new(
                    &[("Stripe-Signature", &format!("t={ts},v1={v1}"))],
                    BODY,
                    URL,
                )
            },
            timestamped: true,
            required: &["stripe-signature"],
            malformed: &[
                ("stripe-signature", "v1=00"),
                ("stripe-signature", "t=abc,v1=00"),
            ],
        },
        Provider {
            scheme: Scheme::GitHub,
            secrets: texts(),
            sign: |which, _| {
                let sig = format!("sha256={}", hex256(text(which), BODY.as_bytes()));
                Delivery::new(&[("X-Hub-Signature-256", &sig)], BODY, URL)
            },
            timestamped: false,
            required: &["x-hub-signature-256"],
            malformed: &[
                ("x-hub-signature-256", "sha1=00"),
                ("x-hub-signature-256", "sha256=zz"),
            ],
        },
        Provider {
            scheme: Scheme::Shopify,
            secrets: texts(),
            sign: |which, _| {
                let sig = b64_256(text(which), BODY.as_bytes());
                Delivery::new(&[("X-Shopify-Hmac-SHA256", &sig)], BODY, URL)
            },
            timestamped: false,
            required: &["x-shopify-hmac-sha256"],
            malformed: &[("x-shopify-hmac-sha256", "not base64!")],
        },
        Provider {
            scheme: Scheme::Slack,
            secrets: texts(),
            sign: |which, ts| {
                let sig = hex256(text(which), format!("v0:{ts}:{BODY}").as_bytes());
                let ts = ts.to_string();
                let headers: &[(&str, &str)] = &[
                    ("X-Slack-Signature", &format!("v0={sig}")),
                    ("X-Slack-Request-Timestamp", ts.as_str()),
                ];
                Delivery::new(headers, BODY, URL)
            },
            timestamped: true,
            required: &["x-slack-signature", "x-slack-request-timestamp"],
            malformed: &[
                ("x-slack-signature", "v1=00"),
                ("x-slack-signature", "v0=zz"),
                ("x-slack-request-timestamp", "yesterday"),
            ],
        },
        Provider {
            scheme: Scheme::Square,
            secrets: texts(),
            sign: |which, _| {
                let sig = b64_256(text(which), &cat(&[URL.as_bytes(), BODY.as_bytes()]));
                Delivery::new(&[("x-square-hmacsha256-signature", &sig)], BODY, URL)
            },
            timestamped: false,
            required: &["x-square-hmacsha256-signature"],
            malformed: &[("x-square-hmacsha256-signature", "%%%")],
        },
        Provider {
            scheme: Scheme::Paddle,
            secrets: ["pdl_ntfset_a".into(), "pdl_ntfset_b".into()],
            sign: |which, ts| {
                let key = ["pdl_ntfset_a", "pdl_ntfset_b"][which];
                let h1 = hex256(key, format!("{ts}:{BODY}").as_bytes());
                Delivery::new(
                    &[("Paddle-Signature", &format!("ts={ts};h1={h1}"))],
                    BODY,
                    URL,
                )
            },
            timestamped: true,
            required: &["paddle-signature"],
            malformed: &[
                ("paddle-signature", "ts=1;h2=00"),
                ("paddle-signature", "t=1,v1=00"),
            ],
        },
        Provider {
            scheme: Scheme::Linear,
            secrets: texts(),
            sign: |which, ts| {
                let body = format!(
                    r#"{{"action":"create","type":"Issue","webhookTimestamp":{}}}"#,
                    ts * 1000 + 123
                );
                let sig = hex256(text(which), body.as_bytes());
                Delivery::new(&[("Linear-Signature", &sig)], body, URL)
            },
            timestamped: true,
            required: &["linear-signature"],
            malformed: &[("linear-signature", "xyz")],
        },
        Provider {
            scheme: Scheme::Twilio,
            secrets: texts(),
            sign: |which, _| {
                let body = "From=%2B14158675309&CallSid=CA1&Digits=1234";
                let signed = format!("{URL}CallSidCA1Digits1234From+14158675309");
                let sig = STANDARD.encode(mac::<Hmac<sha1::Sha1>>(
                    text(which).as_bytes(),
                    signed.as_bytes(),
                ));
                Delivery::new(&[("X-Twilio-Signature", &sig)], body, URL)
            },
            timestamped: false,
            required: &["x-twilio-signature"],
            malformed: &[("x-twilio-signature", "not base64")],
        },
        Provider {
            scheme: Scheme::Discord,
            secrets: [0, 1].map(|w| hex::encode(discord_key(w).verifying_key().to_bytes())),
            sign: |which, ts| {
                let ts = ts.to_string();
                let sig = discord_key(which).sign(&cat(&[ts.as_bytes(), BODY.as_bytes()]));
                let headers: &[(&str, &str)] = &[
                    ("X-Signature-Ed25519", &hex::encode(sig.to_bytes())),
                    ("X-Signature-Timestamp", ts.as_str()),
                ];
                Delivery::new(headers, BODY, URL)
            },
            timestamped: true,
            required: &["x-signature-ed25519", "x-signature-timestamp"],
            malformed: &[
                ("x-signature-ed25519", "zz"),
                ("x-signature-timestamp", "-1"),
            ],
        },
        Provider {
            scheme: Scheme::SeedSha256,
            secrets: texts(),
            sign: |which, _| {
                let sig = format!("sha256={}", hex256(text(which), BODY.as_bytes()));
                Delivery::new(&[("x-signature", &sig)], BODY, URL)
            },
            timestamped: false,
            required: &["x-signature"],
            malformed: &[("x-signature", "sha256=abcd")],
        },
        Provider {
            scheme: Scheme::SeedTimestamped,
            secrets: texts(),
            sign: |which, ts| {
                let v1 = hex256(text(which), format!("{ts}.{BODY}").as_bytes());
                Delivery::new(&[("x-signature", &format!("t={ts},v1={v1}"))], BODY, URL)
            },
            timestamped: true,
            required: &["x-signature"],
            malformed: &[("x-signature", "t=1")],
        },
        Provider {
            scheme: Scheme::Hmac(generic()),
            secrets: texts(),
            sign: |which, ts| {
                let content = format!("msg_9.{ts}.{BODY}");
                let sig = mac::<Hmac<sha2::Sha512>>(text(which).as_bytes(), content.as_bytes());
                let ts = ts.to_string();
                let headers: &[(&str, &str)] = &[
                    (
                        "X-Acme-Signature",
                        &format!("sha512={}", STANDARD.encode(sig)),
                    ),
                    ("X-Acme-Timestamp", ts.as_str()),
                    ("X-Acme-Id", "msg_9"),
                ];
                Delivery::new(headers, BODY, URL)
            },
            timestamped: true,
            required: &["x-acme-signature", "x-acme-timestamp", "x-acme-id"],
            malformed: &[
                ("x-acme-signature", "sha256=AAAA"),
                ("x-acme-signature", "sha512=AAAA"),
                ("x-acme-timestamp", "1.5"),
            ],
        },
    ]
}

#[test]
fn the_case_table_covers_every_scheme() {
    let mut names: Vec<_> = providers().iter().map(|p| p.scheme.as_str()).collect();
    names.sort_unstable();
    let mut expected: Vec<_> = Scheme::NAMED.iter().map(Scheme::as_str).collect();
    expected.push("hmac");
    expected.sort_unstable();
    assert_eq!(names, expected);
}

#[test]
fn every_provider_accepts_a_delivery_signed_as_it_documents() {
    for p in providers() {
        let verified = (p.sign)(0, NOW).verify(&p.scheme, &p.secrets[..1], NOW);
        let verified = verified.unwrap_or_else(|e| panic!("{}: {e}", p.scheme));
        let expected_ts = p.timestamped.then_some(NOW);
        assert_eq!(verified.timestamp, expected_ts, "{}", p.scheme);
    }
}

#[test]
fn every_provider_rejects_a_tampered_body_as_unauthorized() {
    for p in providers() {
        let err = (p.sign)(0, NOW)
            .tampered()
            .verify(&p.scheme, &p.secrets, NOW)
            .unwrap_err();
        assert_eq!(
            (err.status(), err.reason()),
            (401, "signature_mismatch"),
            "{}",
            p.scheme
        );
    }
}

#[test]
fn every_provider_rejects_a_signature_made_with_another_secret() {
    for p in providers() {
        let err = (p.sign)(1, NOW)
            .verify(&p.scheme, &p.secrets[..1], NOW)
            .unwrap_err();
        assert_eq!(
            (err.status(), err.reason()),
            (401, "signature_mismatch"),
            "{}",
            p.scheme
        );
    }
}

#[test]
fn every_provider_accepts_either_secret_during_rotation() {
    for p in providers() {
        for which in [0, 1] {
            let result = (p.sign)(which, NOW).verify(&p.scheme, &p.secrets, NOW);
            assert!(result.is_ok(), "{} secret {which}: {result:?}", p.scheme);
        }
    }
}

#[test]
fn every_provider_reports_each_missing_header_as_a_bad_request() {
    for p in providers() {
        for name in p.required {
            let err = (p.sign)(0, NOW)
                .without(name)
                .verify(&p.scheme, &p.secrets, NOW)
                .unwrap_err();
            assert_eq!(
                (err.status(), err.reason()),
                (400, "missing_header"),
                "{} {name}",
                p.scheme
            );
            assert!(err.to_string().contains(name), "{}: {err}", p.scheme);
        }
    }
}

#[test]
fn every_provider_reports_malformed_headers_as_a_bad_request() {
    for p in providers() {
        for (name, value) in p.malformed {
            let err = (p.sign)(0, NOW)
                .with(name, value)
                .verify(&p.scheme, &p.secrets, NOW)
                .unwrap_err();
            let what = format!("{} {name}: {value:?}", p.scheme);
            assert_eq!(
                (err.status(), err.reason()),
                (400, "malformed_header"),
                "{what}"
            );
        }
    }
}

#[test]
fn timestamped_providers_reject_stale_and_future_deliveries_as_unauthorized() {
    for p in providers().into_iter().filter(|p| p.timestamped) {
        let stale = (p.sign)(0, NOW - TOLERANCE - 1).verify(&p.scheme, &p.secrets, NOW);
        let future = (p.sign)(0, NOW + TOLERANCE + 1).verify(&p.scheme, &p.secrets, NOW);
        let stale = stale.unwrap_err();
        let future = future.unwrap_err();
        assert_eq!(
            (stale.status(), stale.reason()),
            (401, "timestamp_too_old"),
            "{}",
            p.scheme
        );
        assert_eq!(
            (future.status(), future.reason()),
            (401, "timestamp_too_new"),
            "{}",
            p.scheme
        );
    }
}

#[test]
fn timestamped_providers_accept_deliveries_exactly_at_the_tolerance_edge() {
    for p in providers().into_iter().filter(|p| p.timestamped) {
        for ts in [NOW - TOLERANCE, NOW + TOLERANCE] {
            let verified = (p.sign)(0, ts).verify(&p.scheme, &p.secrets, NOW);
            assert_eq!(verified.map(|v| v.timestamp), Ok(Some(ts)), "{}", p.scheme);
        }
    }
}

#[test]
fn providers_without_timestamps_ignore_the_clock() {
    for p in providers().into_iter().filter(|p| !p.timestamped) {
        for now in [0, NOW, u64::MAX] {
            assert!(
                (p.sign)(0, NOW).verify(&p.scheme, &p.secrets, now).is_ok(),
                "{}",
                p.scheme
            );
        }
    }
}

#[test]
fn no_error_text_or_debug_output_contains_a_secret_or_the_signature() {
    for p in providers() {
        let signed = (p.sign)(1, NOW);
        let mut errors = vec![
            signed.verify(&p.scheme, &p.secrets[..1], NOW).unwrap_err(),
            signed
                .tampered()
                .verify(&p.scheme, &p.secrets, NOW)
                .unwrap_err(),
        ];
        if p.timestamped {
            let future = (p.sign)(1, NOW + TOLERANCE + 1);
            errors.push(future.verify(&p.scheme, &p.secrets, NOW).unwrap_err());
        }
        errors.extend(p.malformed.iter().map(|(name, value)| {
            let d = signed.with(name, value);
            d.verify(&p.scheme, &p.secrets, NOW).unwrap_err()
        }));
        for err in errors {
            let shown = format!("{err} {err:?} {}", err.reason());
            let signatures = signed
                .headers
                .iter()
                .map(|(_, v)| v)
                .filter(|v| v.len() > 16);
            for needle in p.secrets.iter().chain(signatures) {
                assert!(!shown.contains(needle.as_str()), "{}: {shown}", p.scheme);
            }
        }
    }
}
