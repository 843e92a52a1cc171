//! Key enums used for signing and verifying, and the shared text encoding.
//!
//! Standard Webhooks keys are text: a prefix (`whsec_`, `whsk_`, `whpk_`)
//! followed by standard, padded base64. [`SigningKey`] and [`VerifyingKey`]
//! parse any of them and dispatch on the prefix, so a configuration file can
//! list symmetric and asymmetric keys side by side (key rotation).

use std::fmt;
use std::str::FromStr;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use crate::asymmetric::{AsymmetricKey, PublicKey};
use crate::error::KeyError;
use crate::symmetric::SymmetricKey;

/// Prefix of a symmetric (HMAC) secret.
pub const SYMMETRIC_PREFIX: &str = "whsec_";
/// Prefix of an ed25519 secret key.
pub const SECRET_KEY_PREFIX: &str = "whsk_";
/// Prefix of an ed25519 public key.
pub const PUBLIC_KEY_PREFIX: &str = "whpk_";

const PREFIXES: [&str; 3] = [SYMMETRIC_PREFIX, SECRET_KEY_PREFIX, PUBLIC_KEY_PREFIX];

/// Strips the optional `expected` prefix, rejects any other known prefix,
/// and base64-decodes the rest (standard alphabet, padding required).
pub(crate) fn decode_key(text: &str, expected: &'static str) -> Result<Vec<u8>, KeyError> {
    if let Some(found) = PREFIXES
        .iter()
        .find(|p| **p != expected && text.starts_with(**p))
    {
        return Err(KeyError::WrongPrefix { expected, found });
    }
    let body = text.strip_prefix(expected).unwrap_or(text);
    if body.is_empty() {
        return Err(KeyError::Empty);
    }
    let bytes = STANDARD.decode(body).map_err(|_| KeyError::NotBase64)?;
    if bytes.is_empty() {
        return Err(KeyError::Empty);
    }
    Ok(bytes)
}

/// Formats `prefix` followed by the padded standard base64 of `bytes`.
pub(crate) fn encode_key(f: &mut fmt::Formatter<'_>, prefix: &str, bytes: &[u8]) -> fmt::Result {
    write!(f, "{prefix}{}", STANDARD.encode(bytes))
}

/// A key that can sign: a symmetric secret (`v1`) or an ed25519 key (`v1a`).
///
/// Parses from `whsec_…` (or bare base64) and `whsk_…`; displays back in the
/// same form. `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SigningKey {
    /// HMAC-SHA256, signature version `v1`.
    Symmetric(SymmetricKey),
    /// ed25519, signature version `v1a`.
    Asymmetric(AsymmetricKey),
}

impl SigningKey {
    /// The signature version this key produces (`"v1"` or `"v1a"`).
    pub fn version(&self) -> &'static str {
        match self {
            Self::Symmetric(_) => crate::standard::V1,
            Self::Asymmetric(_) => crate::standard::V1A,
        }
    }

    /// The key that verifies this key's signatures (the key itself for
    /// symmetric keys, the public half for ed25519 keys).
    pub fn verifying_key(&self) -> VerifyingKey {
        match self {
            Self::Symmetric(k) => VerifyingKey::Symmetric(k.clone()),
            Self::Asymmetric(k) => VerifyingKey::Public(k.public_key()),
        }
    }

    /// Signs one message and returns a single `webhook-signature` entry,
    /// e.g. `v1,<base64>`.
    pub fn sign_entry(&self, msg_id: &str, timestamp: u64, payload: &[u8]) -> String {
        match self {
            Self::Symmetric(k) => k.sign_entry(msg_id, timestamp, payload),
            Self::Asymmetric(k) => k.sign_entry(msg_id, timestamp, payload),
        }
    }
}

impl FromStr for SigningKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, KeyError> {
        if s.starts_with(SECRET_KEY_PREFIX) {
            s.parse().map(Self::Asymmetric)
        } else {
            s.parse().map(Self::Symmetric)
        }
    }
}

impl fmt::Display for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Symmetric(k) => k.fmt(f),
            Self::Asymmetric(k) => k.fmt(f),
        }
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Symmetric(k) => fmt::Debug::fmt(k, f),
            Self::Asymmetric(k) => fmt::Debug::fmt(k, f),
        }
    }
}

impl From<SymmetricKey> for SigningKey {
    fn from(k: SymmetricKey) -> Self {
        Self::Symmetric(k)
    }
}

impl From<AsymmetricKey> for SigningKey {
    fn from(k: AsymmetricKey) -> Self {
        Self::Asymmetric(k)
    }
}

/// A key that can verify: a symmetric secret (`v1`) or an ed25519 public
/// key (`v1a`).
///
/// Parses from `whsec_…` (or bare base64) and `whpk_…`. `Debug` is redacted
/// for symmetric keys (public keys are shown).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifyingKey {
    /// HMAC-SHA256, checks `v1` entries.
    Symmetric(SymmetricKey),
    /// ed25519 public key, checks `v1a` entries.
    Public(PublicKey),
}

impl VerifyingKey {
    /// The signature version this key checks (`"v1"` or `"v1a"`).
    pub fn version(&self) -> &'static str {
        match self {
            Self::Symmetric(_) => crate::standard::V1,
            Self::Public(_) => crate::standard::V1A,
        }
    }

    /// Checks one base64 signature (the part after `<version>,`) over the
    /// signed content `msg_id.timestamp.payload`. Never panics.
    pub fn verify_signature(&self, content: &[u8], signature_b64: &str) -> bool {
        match self {
            Self::Symmetric(k) => k.verify_signature(content, signature_b64),
            Self::Public(k) => k.verify_signature(content, signature_b64),
        }
    }
}

impl FromStr for VerifyingKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, KeyError> {
        if s.starts_with(PUBLIC_KEY_PREFIX) {
            s.parse().map(Self::Public)
        } else {
            s.parse().map(Self::Symmetric)
        }
    }
}

impl fmt::Display for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Symmetric(k) => k.fmt(f),
            Self::Public(k) => k.fmt(f),
        }
    }
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Symmetric(k) => fmt::Debug::fmt(k, f),
            Self::Public(k) => fmt::Debug::fmt(k, f),
        }
    }
}

impl From<SymmetricKey> for VerifyingKey {
    fn from(k: SymmetricKey) -> Self {
        Self::Symmetric(k)
    }
}

impl From<PublicKey> for VerifyingKey {
    fn from(k: PublicKey) -> Self {
        Self::Public(k)
    }
}

/// Decodes a base64 signature into a fixed buffer, without allocating.
/// Returns `None` for anything that is not standard padded base64 of at
/// most `N` bytes.
pub(crate) fn decode_signature<const N: usize>(signature_b64: &str) -> Option<([u8; N], usize)> {
    // Reject oversized input before decoding; 4 chars per 3 bytes, padded.
    if signature_b64.len() > N.div_ceil(3) * 4 {
        return None;
    }
    // `decode_slice` sizes its check with a conservative estimate, so leave
    // a few spare bytes and check the real length afterwards.
    let mut buf = [0u8; 96];
    let len = STANDARD.decode_slice(signature_b64, &mut buf).ok()?;
    if len > N {
        return None;
    }
    let mut out = [0u8; N];
    out[..len].copy_from_slice(&buf[..len]);
    Some((out, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatches_signing_keys_on_their_prefix() {
        let sym: SigningKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        assert_eq!(sym.version(), "v1");
        let asym: SigningKey =
            "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg=="
                .parse()
                .unwrap();
        assert_eq!(asym.version(), "v1a");
        assert_eq!(
            asym.verifying_key().to_string(),
            "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="
        );
    }

    #[test]
    fn dispatches_verifying_keys_on_their_prefix() {
        let public: VerifyingKey = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="
            .parse()
            .unwrap();
        assert_eq!(public.version(), "v1a");
        let sym: VerifyingKey = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        assert_eq!(sym.version(), "v1");
    }

    #[test]
    fn a_secret_key_is_not_accepted_as_a_verifying_key() {
        let err = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbc="
            .parse::<VerifyingKey>()
            .unwrap_err();
        assert_eq!(
            err,
            KeyError::WrongPrefix {
                expected: "whsec_",
                found: "whsk_"
            }
        );
    }

    #[test]
    fn debug_output_of_key_enums_never_contains_secret_material() {
        let k: SigningKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        let shown = format!("{k:?} {:?}", k.verifying_key());
        assert!(!shown.contains("MfKQ9r8G"), "{shown}");
        assert!(shown.contains("REDACTED"));
    }

    #[test]
    fn decodes_signatures_into_fixed_buffers_and_rejects_oversized_ones() {
        let (buf, len) = decode_signature::<32>("AAEC").unwrap();
        assert_eq!((&buf[..len], len), (&[0u8, 1, 2][..], 3));
        assert!(decode_signature::<32>(&"A".repeat(48)).is_none());
        assert!(decode_signature::<3>("AAECAw==").is_none());
        assert!(decode_signature::<32>("not base64!").is_none());
        let (buf, len) = decode_signature::<64>(&STANDARD.encode([7u8; 64])).unwrap();
        assert_eq!((buf, len), ([7u8; 64], 64));
        assert!(
            decode_signature::<64>(&"A".repeat(88)).is_none(),
            "66 bytes"
        );
    }
}
