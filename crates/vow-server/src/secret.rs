//! Endpoint and destination signing secrets: `whsec_<base64>` (HMAC-SHA256, Standard Webhooks
//! `v1`) or, as Svix takes them, an ed25519 key `whsk_<base64(seed ‖ public key)>` (`v1a`).
//! Making a new one, reading a client's, and which signature styles a secret can sign. Below
//! the API and the workers, which both make secrets (the operational endpoint's comes from
//! [`generate`]). Stored as text, like every secret vow keeps.

use vow_core::SignatureStyle;
use vow_signature::key::SECRET_KEY_PREFIX;
use vow_signature::{AsymmetricKey, SymmetricKey};

/// A new random secret, `whsec_…`.
pub fn generate() -> String {
    SymmetricKey::generate(&mut rand::rngs::OsRng).to_string()
}

/// A new random secret of the same kind as `current`: a rotation without a given key keeps an
/// ed25519 endpoint on ed25519 (its receivers hold a public key, not a shared secret).
pub fn generate_like(current: &str) -> String {
    if is_ed25519(current) {
        AsymmetricKey::generate(&mut rand::rngs::OsRng).to_string()
    } else {
        generate()
    }
}

/// Whether a stored secret is an ed25519 key (`whsk_…`).
pub fn is_ed25519(key: &str) -> bool {
    key.starts_with(SECRET_KEY_PREFIX)
}

/// The public key (`whpk_…`) receivers verify an ed25519 key's `v1a` signatures with; `None`
/// for a shared secret (or a key that does not parse).
pub fn public_key(key: &str) -> Option<String> {
    if !is_ed25519(key) {
        return None;
    }
    let key = key.parse::<AsymmetricKey>().ok()?;
    Some(key.public_key().to_string())
}

/// Whether `key` can sign deliveries of `style`: the seed styles are HMACs keyed with the
/// secret's text, which an ed25519 key cannot be (a receiver would need the private key).
pub fn signs_in(key: &str, style: SignatureStyle) -> bool {
    style == SignatureStyle::StandardWebhooks || !is_ed25519(key)
}

/// The 422 message for a seed style combined with an ed25519 key.
pub fn style_mismatch(style: SignatureStyle) -> String {
    format!(
        "an ed25519 `whsk_` key signs only with signatureStyle `standard-webhooks` (`v1a`); \
         `{style}` is an HMAC keyed with a shared secret: use a `whsec_` secret"
    )
}

/// A client-supplied secret normalised to its stored text: `^(whsec_)?[a-zA-Z0-9+/=]{32,100}$`
/// (decodable) as `whsec_<base64>`, or a `whsk_` ed25519 key as
/// `whsk_<base64(seed ‖ public key)>`. The error is the 422 message (never the secret).
pub fn normalise(raw: &str) -> Result<String, String> {
    if is_ed25519(raw) {
        return raw
            .parse::<AsymmetricKey>()
            .map(|key| key.to_string())
            .map_err(|e| {
                format!(
                    "must be a `whsk_` ed25519 key, base64 of the 32-byte seed followed by its \
                     32-byte public key ({e})"
                )
            });
    }
    let body = raw.strip_prefix("whsec_").unwrap_or(raw);
    let shaped = (32..=100).contains(&body.len())
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    match raw.parse::<SymmetricKey>() {
        Ok(key) if shaped => Ok(key.to_string()),
        _ => Err(
            "must be `whsec_` followed by 32 to 100 base64 characters, or a `whsk_` \
                  ed25519 key"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED25519: &str = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";

    #[test]
    fn ed25519_keys_are_kept_whole_and_a_seed_alone_gains_its_public_half() {
        assert_eq!(normalise(ED25519).as_deref(), Ok(ED25519));
        let seed_only = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbc=";
        assert_eq!(normalise(seed_only).as_deref(), Ok(ED25519));
        assert_eq!(
            normalise("C2FVsBQIhrscChlQIMV+b5sSYspob7oD").as_deref(),
            Ok("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
        );
    }

    #[test]
    fn a_malformed_ed25519_key_is_refused_with_its_reason_and_without_its_text() {
        let mismatched = ED25519.replace("RqSKJp4", "RqSKJp5");
        for (bad, reason) in [
            ("whsk_AAAA", "decodes to 3 bytes"),
            ("whsk_not base64!", "not valid base64"),
            (mismatched.as_str(), "does not match"),
        ] {
            let msg = normalise(bad).unwrap_err();
            assert!(
                msg.contains("`whsk_` ed25519 key") && msg.contains(reason),
                "{msg}"
            );
            assert!(!msg.contains(&bad[5..]), "{msg}");
        }
    }

    #[test]
    fn rotation_keeps_the_kind_of_the_current_secret_and_seed_styles_refuse_ed25519() {
        assert!(is_ed25519(&generate_like(ED25519)));
        assert_ne!(generate_like(ED25519), ED25519);
        assert!(generate_like(&generate()).starts_with("whsec_"));
        assert!(signs_in(ED25519, SignatureStyle::StandardWebhooks));
        assert!(!signs_in(ED25519, SignatureStyle::SeedTimestamped));
        assert!(!signs_in(ED25519, SignatureStyle::SeedSha256));
        assert!(signs_in(&generate(), SignatureStyle::SeedSha256));
        assert_eq!(
            public_key(ED25519).as_deref(),
            Some("whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=")
        );
        assert_eq!(public_key(&generate()), None);
    }
}
