//! Symmetric `whsec_` secrets and HMAC-SHA256 signing (`v1`).
//!
//! A [`SymmetricKey`] holds the *decoded* key bytes: `whsec_` + base64 is
//! only its text form. (The seed styles key their HMAC differently, with the
//! secret text itself; see [`crate::seed`].) The HMAC helpers here, SHA-256
//! and the SHA-1/SHA-512 `Digest`s of the provider schemes, are shared by
//! every scheme in the crate and compare in constant time.

use std::fmt;
use std::str::FromStr;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use rand::{CryptoRng, RngCore};
use sha1::Sha1;
use sha2::{Sha256, Sha512};
use subtle::ConstantTimeEq;

use crate::error::KeyError;
use crate::key::{decode_key, decode_signature, encode_key, SYMMETRIC_PREFIX};

type HmacSha256 = Hmac<Sha256>;

/// Starts a MAC over `key`. HMAC accepts keys of any length (long keys are
/// hashed, short ones padded), so this cannot fail.
fn keyed<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> M {
    let mut mac = match <M as KeyInit>::new_from_slice(key) {
        Ok(mac) => mac,
        // Unreachable: `Hmac` implements `KeyInit` for every key length.
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    for part in parts {
        mac.update(part);
    }
    mac
}

/// HMAC-SHA256 of the concatenation of `parts`, keyed with `key`.
pub(crate) fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    keyed::<HmacSha256>(key, parts)
        .finalize()
        .into_bytes()
        .into()
}

/// Constant-time check of `expected` against HMAC-SHA256(`key`, `parts`).
/// A wrong length simply fails.
pub(crate) fn hmac_sha256_verify(key: &[u8], parts: &[&[u8]], expected: &[u8]) -> bool {
    keyed::<HmacSha256>(key, parts)
        .verify_slice(expected)
        .is_ok()
}

/// The hash under an HMAC, for the schemes that are not SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Digest {
    /// HMAC-SHA1 (Twilio only).
    Sha1,
    /// HMAC-SHA256.
    Sha256,
    /// HMAC-SHA512.
    Sha512,
}

impl Digest {
    /// Length of the MAC in bytes.
    pub(crate) fn len(self) -> usize {
        match self {
            Self::Sha1 => 20,
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    /// The MAC of the concatenation of `parts`, keyed with `key`.
    pub(crate) fn mac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        match self {
            Self::Sha1 => keyed::<Hmac<Sha1>>(key, parts)
                .finalize()
                .into_bytes()
                .to_vec(),
            Self::Sha256 => hmac_sha256(key, parts).to_vec(),
            Self::Sha512 => keyed::<Hmac<Sha512>>(key, parts)
                .finalize()
                .into_bytes()
                .to_vec(),
        }
    }

    /// Whether any of `candidates` is the MAC of `parts` under any of
    /// `keys`. Every comparison is constant-time and none is skipped once
    /// one matched, so timing reveals neither which key nor which candidate.
    pub(crate) fn any_matches(self, keys: &[&[u8]], parts: &[&[u8]], candidates: &[&[u8]]) -> bool {
        keys.iter().fold(false, |found, key| {
            let mac = self.mac(key, parts);
            candidates.iter().fold(found, |found, c| {
                found | bool::from(mac.as_slice().ct_eq(c))
            })
        })
    }
}

/// A Standard Webhooks symmetric secret (`whsec_<base64>`), used for `v1`
/// HMAC-SHA256 signatures.
///
/// * Parsing accepts `whsec_<base64>` and bare `<base64>` (standard
///   alphabet, padded), of any non-empty decoded length, as Svix does.
/// * Generation makes 24 bytes by default, 24–64 on request.
/// * `Display` gives `whsec_<base64>`; `Debug` is redacted.
/// * Equality is constant-time.
#[derive(Clone)]
pub struct SymmetricKey(Vec<u8>);

impl SymmetricKey {
    /// Length of a freshly generated key, in bytes.
    pub const DEFAULT_LEN: usize = 24;
    /// Shortest key [`SymmetricKey::generate_with_len`] will make.
    pub const MIN_GENERATED_LEN: usize = 24;
    /// Longest key [`SymmetricKey::generate_with_len`] will make.
    pub const MAX_GENERATED_LEN: usize = 64;

    /// Generates a random 24-byte key.
    pub fn generate<R: RngCore + CryptoRng>(rng: &mut R) -> Self {
        let mut bytes = vec![0u8; Self::DEFAULT_LEN];
        rng.fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// Generates a random key of `len` bytes, which must be within 24–64.
    pub fn generate_with_len<R: RngCore + CryptoRng>(
        rng: &mut R,
        len: usize,
    ) -> Result<Self, KeyError> {
        if !(Self::MIN_GENERATED_LEN..=Self::MAX_GENERATED_LEN).contains(&len) {
            return Err(KeyError::WrongLength {
                expected: "24 to 64",
                actual: len,
            });
        }
        let mut bytes = vec![0u8; len];
        rng.fill_bytes(&mut bytes);
        Ok(Self(bytes))
    }

    /// Wraps already-decoded key bytes (non-empty).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        if bytes.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(Self(bytes.to_vec()))
    }

    /// Length of the decoded key, in bytes.
    #[allow(clippy::len_without_is_empty)] // a key is never empty
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The raw `v1` MAC over `msg_id.timestamp.payload`.
    pub fn sign_raw(&self, msg_id: &[u8], timestamp: u64, payload: &[u8]) -> [u8; 32] {
        let ts = timestamp.to_string();
        hmac_sha256(&self.0, &[msg_id, b".", ts.as_bytes(), b".", payload])
    }

    /// Signs one message and returns the header entry `v1,<base64 MAC>`.
    pub fn sign_entry(&self, msg_id: &str, timestamp: u64, payload: &[u8]) -> String {
        let mac = self.sign_raw(msg_id.as_bytes(), timestamp, payload);
        format!("{},{}", crate::standard::V1, STANDARD.encode(mac))
    }

    /// The raw MAC over already-assembled signed content.
    pub(crate) fn mac(&self, content: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.0, &[content])
    }

    /// Checks a base64 `v1` signature over already-assembled signed content.
    pub(crate) fn verify_signature(&self, content: &[u8], signature_b64: &str) -> bool {
        match decode_signature::<32>(signature_b64) {
            Some((sig, len)) => hmac_sha256_verify(&self.0, &[content], &sig[..len]),
            None => false,
        }
    }
}

impl FromStr for SymmetricKey {
    type Err = KeyError;

    /// Parses `whsec_<base64>` or bare `<base64>`.
    fn from_str(s: &str) -> Result<Self, KeyError> {
        decode_key(s, SYMMETRIC_PREFIX).map(Self)
    }
}

impl fmt::Display for SymmetricKey {
    /// Writes `whsec_<base64>`. This is the secret: store it, don't log it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        encode_key(f, SYMMETRIC_PREFIX, &self.0)
    }
}

impl fmt::Debug for SymmetricKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SymmetricKey(REDACTED)")
    }
}

impl PartialEq for SymmetricKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl Eq for SymmetricKey {}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::OsRng;

    #[test]
    fn parses_with_and_without_the_whsec_prefix() {
        let a: SymmetricKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        let b: SymmetricKey = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 24);
        assert_eq!(b.to_string(), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    }

    #[test]
    fn accepts_short_and_long_keys_like_svix() {
        assert_eq!("whsec_AQ==".parse::<SymmetricKey>().unwrap().len(), 1);
        let long = format!("whsec_{}", STANDARD.encode([9u8; 75]));
        assert_eq!(long.parse::<SymmetricKey>().unwrap().len(), 75);
    }

    #[test]
    fn rejects_empty_undecodable_and_foreign_keys_with_typed_errors() {
        let parse = |s: &str| s.parse::<SymmetricKey>().unwrap_err();
        assert_eq!(parse(""), KeyError::Empty);
        assert_eq!(parse("whsec_"), KeyError::Empty);
        assert_eq!(parse("whsec_not base64!"), KeyError::NotBase64);
        assert_eq!(
            parse("whsec_AQ"),
            KeyError::NotBase64,
            "padding is required"
        );
        assert_eq!(
            parse("whsec_-_8="),
            KeyError::NotBase64,
            "URL-safe alphabet is not"
        );
        assert_eq!(
            parse("whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="),
            KeyError::WrongPrefix {
                expected: "whsec_",
                found: "whpk_"
            }
        );
        assert_eq!(SymmetricKey::from_bytes(&[]).unwrap_err(), KeyError::Empty);
    }

    #[test]
    fn generates_24_bytes_by_default_and_24_to_64_on_request() {
        assert_eq!(SymmetricKey::generate(&mut OsRng).len(), 24);
        assert_eq!(
            SymmetricKey::generate_with_len(&mut OsRng, 64)
                .unwrap()
                .len(),
            64
        );
        assert!(SymmetricKey::generate_with_len(&mut OsRng, 23).is_err());
        assert!(SymmetricKey::generate_with_len(&mut OsRng, 65).is_err());
        assert_ne!(
            SymmetricKey::generate(&mut OsRng),
            SymmetricKey::generate(&mut OsRng)
        );
    }

    #[test]
    fn generated_keys_round_trip_through_their_text_form() {
        let key = SymmetricKey::generate(&mut OsRng);
        let text = key.to_string();
        assert!(text.starts_with("whsec_"));
        assert_eq!(text.parse::<SymmetricKey>().unwrap(), key);
    }

    #[test]
    fn debug_is_redacted() {
        let key: SymmetricKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        assert_eq!(format!("{key:?}"), "SymmetricKey(REDACTED)");
    }

    #[test]
    fn signs_the_first_reference_vector() {
        let key: SymmetricKey = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD".parse().unwrap();
        let entry = key.sign_entry(
            "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
            1_649_367_553,
            br#"{"email":"test@example.com","username":"test_user"}"#,
        );
        assert_eq!(entry, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
    }

    #[test]
    fn digests_have_their_published_lengths_and_agree_with_the_sha256_helper() {
        for d in [Digest::Sha1, Digest::Sha256, Digest::Sha512] {
            assert_eq!(d.mac(b"k", &[b"a", b"b"]).len(), d.len());
            assert_eq!(d.mac(b"k", &[b"a", b"b"]), d.mac(b"k", &[b"ab"]));
        }
        assert_eq!(
            Digest::Sha256.mac(b"k", &[b"x"]),
            hmac_sha256(b"k", &[b"x"]).to_vec()
        );
    }

    #[test]
    fn any_matches_accepts_any_key_and_any_candidate_and_nothing_else() {
        let good = Digest::Sha512.mac(b"new", &[b"body"]);
        let junk = [0u8; 64];
        let keys: [&[u8]; 2] = [b"old", b"new"];
        assert!(Digest::Sha512.any_matches(&keys, &[b"body"], &[&junk, &good]));
        assert!(!Digest::Sha512.any_matches(&keys[..1], &[b"body"], &[&good]));
        assert!(!Digest::Sha512.any_matches(&keys, &[b"bodx"], &[&good]));
        assert!(!Digest::Sha512.any_matches(&keys, &[b"body"], &[&good[..63]]));
        assert!(!Digest::Sha512.any_matches(&[], &[b"body"], &[&good]));
    }

    #[test]
    fn verify_signature_rejects_wrong_lengths_and_garbage() {
        let key = SymmetricKey::from_bytes(b"k").unwrap();
        let good = STANDARD.encode(hmac_sha256(b"k", &[b"content"]));
        assert!(key.verify_signature(b"content", &good));
        assert!(!key.verify_signature(b"content", &good[..40]));
        assert!(!key.verify_signature(b"content", ""));
        assert!(!key.verify_signature(b"content", "%%%%"));
        assert!(!key.verify_signature(b"other", &good));
    }
}
