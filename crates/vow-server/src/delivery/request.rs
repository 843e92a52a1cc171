//! The headers of one delivery attempt: the endpoint's custom headers, then the signature
//! headers of its style, signed over the exact payload bytes with every currently valid secret.
//! [`signature_headers`] is the signing alone, which `vow sign` shares.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use vow_core::SignatureStyle;
use vow_signature::{KeyError, SigningKey, SymmetricKey};
use vow_store::EndpointSecret;

/// A stored secret or header cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A stored secret does not parse (never shown: it is a secret).
    #[error("the endpoint has an unusable signing secret")]
    BadSecret,
    /// The endpoint has no current secret.
    #[error("the endpoint has no signing secret")]
    NoSecret,
    /// A stored custom header is not a valid header.
    #[error("the endpoint's custom header {0:?} is not a valid HTTP header")]
    BadHeader(String),
}

/// Which keys a Standard Webhooks signature may be made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandardKeys {
    /// `whsec_` secrets only (`v1`): what vow's endpoints hold.
    Symmetric,
    /// `whsec_` secrets (`v1`) and `whsk_` ed25519 keys (`v1a`), as `vow sign` takes them.
    SymmetricOrEd25519,
}

impl StandardKeys {
    fn parse(self, secret: &str) -> Result<SigningKey, KeyError> {
        match self {
            StandardKeys::Symmetric => secret.parse::<SymmetricKey>().map(SigningKey::from),
            StandardKeys::SymmetricOrEd25519 => secret.parse(),
        }
    }
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
}

/// The signature headers `style` adds for message `msg_id` at unix time `timestamp` over the
/// exact `payload` bytes, in the order sent: Standard Webhooks signs with every secret (one
/// entry each, current first, keys as `keys` allows), the seed styles with the current (first)
/// secret's text.
pub fn signature_headers<S: AsRef<str>>(
    style: SignatureStyle,
    keys: StandardKeys,
    secrets: &[S],
    msg_id: &str,
    timestamp: u64,
    payload: &[u8],
) -> Result<Vec<(&'static str, String)>, SignError> {
    let current = secrets.first().ok_or(SignError::NoSecret)?.as_ref();
    Ok(match style {
        SignatureStyle::StandardWebhooks => {
            let signing_keys = secrets
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    keys.parse(s.as_ref())
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
                vow_signature::seed::timestamped::sign(current, timestamp, payload),
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
    let signed = signature_headers(
        style,
        StandardKeys::Symmetric,
        &keys,
        msg_id,
        timestamp,
        payload,
    )
    .map_err(|e| match e {
        SignError::NoSecret => RequestError::NoSecret,
        SignError::BadSecret { .. } => RequestError::BadSecret,
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

    #[test]
    fn only_vow_sign_signs_with_an_ed25519_key_and_a_bad_secret_is_named_by_its_place() {
        let ed25519 = vow_signature::AsymmetricKey::from_seed(&[9u8; 32]);
        let secrets = [NEW.to_string(), ed25519.to_string()];
        let signed = signature_headers(
            SignatureStyle::StandardWebhooks,
            StandardKeys::SymmetricOrEd25519,
            &secrets,
            "msg_1",
            5,
            b"{}",
        )
        .unwrap();
        let (_, signature) = signed
            .iter()
            .find(|(name, _)| *name == "webhook-signature")
            .unwrap();
        let versions: Vec<&str> = signature
            .split(' ')
            .filter_map(|entry| entry.split_once(',').map(|(v, _)| v))
            .collect();
        assert_eq!(versions, ["v1", "v1a"]);
        let endpoint = signature_headers(
            SignatureStyle::StandardWebhooks,
            StandardKeys::Symmetric,
            &secrets,
            "msg_1",
            5,
            b"{}",
        );
        assert!(
            matches!(endpoint, Err(SignError::BadSecret { index: 2, .. })),
            "{endpoint:?}"
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
