//! The headers of one delivery attempt: the endpoint's custom headers, then the signature
//! headers of its style, signed over the exact payload bytes with every currently valid secret.
//! [`signature_headers`] is the signing alone, which `vow sign` and the inbound forwarder share.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use vow_core::SignatureStyle;
use vow_signature::{KeyError, SigningKey};
use vow_store::EndpointSecret;

/// A stored secret or header cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A stored secret does not parse, or cannot sign the endpoint's style (never shown: it is
    /// a secret).
    #[error("the endpoint has an unusable signing secret")]
    BadSecret,
    /// The endpoint has no current secret.
    #[error("the endpoint has no signing secret")]
    NoSecret,
    /// A stored custom header is not a valid header.
    #[error("the endpoint's custom header {0:?} is not a valid HTTP header")]
    BadHeader(String),
}

/// Why [`signature_headers`] cannot sign.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    /// No secret at all.
    #[error("no signing secret")]
    NoSecret,
    /// Secret number `index` (from 1) does not parse as a key of the style.
    #[error("secret {index} is not a usable key: {error}")]
    BadSecret {
        /// Which secret, counting from 1.
        index: usize,
        /// What is wrong with it (never the secret itself).
        error: KeyError,
    },
    /// Secret number `index` (from 1) is an ed25519 key, which a seed style (an HMAC keyed with
    /// the secret's text) cannot sign with.
    #[error(
        "secret {index} is an ed25519 `whsk_` key, which signs only standard-webhooks, not {style}"
    )]
    Ed25519InSeedStyle {
        /// Which secret, counting from 1.
        index: usize,
        /// The seed style asked for.
        style: SignatureStyle,
    },
}

/// The signature headers `style` adds for message `msg_id` at unix time `timestamp` over the
/// exact `payload` bytes, in the order sent. Standard Webhooks signs with every secret, current
/// first, each in its own version (`whsec_` → `v1`, `whsk_` → `v1a`), space-separated; seed 003
/// (`timestamped`) puts one `v1=` per secret after `t=`, as Stripe does during a rotation; seed
/// 000 (`sha256`) has room for one MAC and signs with the current (first) secret. The seed
/// styles refuse an ed25519 key.
pub fn signature_headers<S: AsRef<str>>(
    style: SignatureStyle,
    secrets: &[S],
    msg_id: &str,
    timestamp: u64,
    payload: &[u8],
) -> Result<Vec<(&'static str, String)>, SignError> {
    let current = secrets.first().ok_or(SignError::NoSecret)?.as_ref();
    if style != SignatureStyle::StandardWebhooks {
        if let Some(i) = secrets
            .iter()
            .position(|s| !crate::secret::signs_in(s.as_ref(), style))
        {
            return Err(SignError::Ed25519InSeedStyle {
                index: i + 1,
                style,
            });
        }
    }
    Ok(match style {
        SignatureStyle::StandardWebhooks => {
            let signing_keys = secrets
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    s.as_ref()
                        .parse::<SigningKey>()
                        .map_err(|error| SignError::BadSecret {
                            index: i + 1,
                            error,
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let signature = vow_signature::sign(&signing_keys, msg_id, timestamp, payload);
            let ts = timestamp.to_string();
            vec![
                ("webhook-id", msg_id.to_string()),
                ("webhook-timestamp", ts.clone()),
                ("webhook-signature", signature.clone()),
                ("svix-id", msg_id.to_string()),
                ("svix-timestamp", ts),
                ("svix-signature", signature),
            ]
        }
        SignatureStyle::SeedSha256 => vec![
            ("x-delivery-id", msg_id.to_string()),
            (
                "x-signature",
                vow_signature::seed::sha256::sign(current, payload),
            ),
        ],
        SignatureStyle::SeedTimestamped => vec![
            ("x-delivery-id", msg_id.to_string()),
            (
                "x-signature",
                vow_signature::seed::timestamped::sign_with_each(secrets, timestamp, payload),
            ),
        ],
    })
}

/// Headers for an attempt of message `msg_id` at unix time `timestamp`.
pub fn headers(
    style: SignatureStyle,
    msg_id: &str,
    timestamp: u64,
    payload: &[u8],
    secrets: &[EndpointSecret],
    custom: &BTreeMap<String, String>,
) -> Result<HeaderMap, RequestError> {
    let mut map = HeaderMap::with_capacity(custom.len() + 8);
    for (name, value) in custom {
        let bad = || RequestError::BadHeader(name.clone());
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        let value = HeaderValue::from_str(value).map_err(|_| bad())?;
        map.insert(name, value);
    }
    map.insert("content-type", HeaderValue::from_static("application/json"));
    let keys: Vec<&str> = secrets.iter().map(|s| s.key.as_str()).collect();
    let signed =
        signature_headers(style, &keys, msg_id, timestamp, payload).map_err(|e| match e {
            SignError::NoSecret => RequestError::NoSecret,
            SignError::BadSecret { .. } | SignError::Ed25519InSeedStyle { .. } => {
                RequestError::BadSecret
            }
        })?;
    for (name, value) in signed {
        // Ids, decimal timestamps and base64/hex signatures are always visible ASCII.
        if let Ok(v) = HeaderValue::from_str(&value) {
            map.insert(name, v);
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vow_signature::{Verifier, VerifyingKey, WebhookHeaders};

    const OLD: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    const NEW: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn secrets(keys: &[&str]) -> Vec<EndpointSecret> {
        keys.iter()
            .map(|k| EndpointSecret {
                key: k.to_string(),
                valid_until: None,
            })
            .collect()
    }

    fn get<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
        h.get(name).unwrap().to_str().unwrap()
    }

    #[test]
    fn standard_webhooks_headers_verify_with_every_valid_secret() {
        let body = br#"{"test": 2432232314}"#;
        let h = headers(
            SignatureStyle::StandardWebhooks,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            body,
            &secrets(&[NEW, OLD]),
            &BTreeMap::new(),
        )
        .unwrap();
        // The published vector for NEW is the first entry.
        assert!(get(&h, "webhook-signature")
            .starts_with("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1,"));
        assert_eq!(get(&h, "svix-signature"), get(&h, "webhook-signature"));
        assert_eq!(get(&h, "content-type"), "application/json");
        for key in [NEW, OLD] {
            let verifier = Verifier::new([key.parse::<VerifyingKey>().unwrap()]);
            let wh = WebhookHeaders::from_lookup(|n| h.get(n).map(|v| v.as_bytes()));
            verifier.verify_at(&wh, body, 1_614_265_330).unwrap();
        }
    }

    #[test]
    fn seed_styles_sign_with_the_current_secret_text() {
        let body = br#"{"type":"job.completed","jobId":"job_1"}"#;
        let s = secrets(&["whsec_demo_secret"]);
        let h = headers(
            SignatureStyle::SeedSha256,
            "msg_1",
            5,
            body,
            &s,
            &BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(get(&h, "x-delivery-id"), "msg_1");
        vow_signature::seed::sha256::verify(
            "whsec_demo_secret",
            Some(get(&h, "x-signature").as_bytes()),
            body,
        )
        .unwrap();
        let h = headers(
            SignatureStyle::SeedTimestamped,
            "msg_1",
            1_754_900_000,
            body,
            &s,
            &BTreeMap::new(),
        )
        .unwrap();
        vow_signature::seed::timestamped::verify_at(
            "whsec_demo_secret",
            Some(get(&h, "x-signature").as_bytes()),
            body,
            1_754_900_000,
        )
        .unwrap();
    }

    #[test]
    fn custom_headers_are_sent_but_cannot_replace_the_signature() {
        let custom = BTreeMap::from([
            ("X-Tenant".to_string(), "42".to_string()),
            ("webhook-id".to_string(), "forged".to_string()),
        ]);
        let h = headers(
            SignatureStyle::StandardWebhooks,
            "msg_1",
            5,
            b"{}",
            &secrets(&[NEW]),
            &custom,
        )
        .unwrap();
        assert_eq!(get(&h, "x-tenant"), "42");
        assert_eq!(get(&h, "webhook-id"), "msg_1");
    }

    /// Svix's published `v1a` vector (standard-webhooks.md, vector 3).
    const ED25519: &str = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";

    fn versions(signature: &str) -> Vec<&str> {
        signature
            .split(' ')
            .filter_map(|entry| entry.split_once(',').map(|(v, _)| v))
            .collect()
    }

    #[test]
    fn an_ed25519_endpoint_signs_v1a_and_a_rotation_overlap_signs_with_both_kinds() {
        let body = br#"{"test": 2432232314}"#;
        let (id, ts) = ("msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330);
        let h = headers(
            SignatureStyle::StandardWebhooks,
            id,
            ts,
            body,
            &secrets(&[ED25519, OLD]),
            &BTreeMap::new(),
        )
        .unwrap();
        let signature = get(&h, "webhook-signature");
        assert!(signature.starts_with("v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg== v1,"), "{signature}");
        assert_eq!(versions(signature), ["v1a", "v1"]);
        assert_eq!(get(&h, "svix-signature"), signature);
        let public = ED25519.parse::<SigningKey>().unwrap().verifying_key();
        assert_eq!(
            public.to_string(),
            "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="
        );
        for key in [public, OLD.parse::<VerifyingKey>().unwrap()] {
            let wh = WebhookHeaders::from_lookup(|n| h.get(n).map(|v| v.as_bytes()));
            Verifier::new([key]).verify_at(&wh, body, ts).unwrap();
        }
    }

    #[test]
    fn the_timestamped_style_repeats_v1_for_every_secret_of_a_rotation() {
        let body = br#"{"type":"job.completed","jobId":"job_1"}"#;
        let s = secrets(&["whsec_new_secret", "whsec_old_secret"]);
        let h = headers(
            SignatureStyle::SeedTimestamped,
            "msg_1",
            1_754_900_000,
            body,
            &s,
            &BTreeMap::new(),
        )
        .unwrap();
        let signature = get(&h, "x-signature");
        assert_eq!(signature.matches(",v1=").count(), 2, "{signature}");
        for secret in ["whsec_new_secret", "whsec_old_secret"] {
            vow_signature::seed::timestamped::verify_at(
                secret,
                Some(signature.as_bytes()),
                body,
                1_754_900_000,
            )
            .unwrap();
        }
    }

    #[test]
    fn seed_styles_refuse_an_ed25519_key_and_a_bad_secret_is_named_by_its_place() {
        for style in [SignatureStyle::SeedSha256, SignatureStyle::SeedTimestamped] {
            let signed = signature_headers(style, &[NEW, ED25519], "msg_1", 5, b"{}");
            assert_eq!(
                signed,
                Err(SignError::Ed25519InSeedStyle { index: 2, style })
            );
        }
        let bad = signature_headers(
            SignatureStyle::StandardWebhooks,
            &[NEW, "whsk_AAAA"],
            "msg_1",
            5,
            b"{}",
        );
        assert!(
            matches!(bad, Err(SignError::BadSecret { index: 2, .. })),
            "{bad:?}"
        );
    }

    #[test]
    fn an_endpoint_without_secrets_cannot_be_signed_for() {
        assert!(matches!(
            headers(
                SignatureStyle::StandardWebhooks,
                "m",
                1,
                b"{}",
                &[],
                &BTreeMap::new()
            ),
            Err(RequestError::NoSecret)
        ));
    }
}
