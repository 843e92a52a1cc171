//! ed25519 keys (`whsk_` / `whpk_`) and `v1a` signatures.
//!
//! The secret key text follows Svix's layout: base64 of the 32-byte seed
//! followed by the 32-byte public key. A bare 32-byte seed is accepted too;
//! the public half is then derived. Verification uses ed25519-dalek's strict
//! mode (rejects malleable signatures and weak keys).

use std::fmt;
use std::str::FromStr;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer as _};
use rand::{CryptoRng, RngCore};

use crate::error::KeyError;
use crate::key::{decode_key, decode_signature, encode_key, PUBLIC_KEY_PREFIX, SECRET_KEY_PREFIX};

/// An ed25519 secret key (`whsk_<base64>`), used for `v1a` signatures.
///
/// `Display` gives `whsk_` + base64(seed ‖ public key); `Debug` shows only
/// the public half.
#[derive(Clone, PartialEq, Eq)]
pub struct AsymmetricKey(ed25519_dalek::SigningKey);

impl AsymmetricKey {
    /// Generates a fresh random key pair.
    pub fn generate<R: RngCore + CryptoRng>(rng: &mut R) -> Self {
        Self(ed25519_dalek::SigningKey::generate(rng))
    }

    /// Builds the key from its 32-byte secret seed.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self(ed25519_dalek::SigningKey::from_bytes(seed))
    }

    /// The matching public key (`whpk_…`), to hand to receivers.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// The raw 64-byte `v1a` signature over `msg_id.timestamp.payload`.
    pub fn sign_raw(&self, msg_id: &[u8], timestamp: u64, payload: &[u8]) -> [u8; 64] {
        let content = crate::standard::signed_content(msg_id, timestamp, payload);
        self.0.sign(&content).to_bytes()
    }

    /// Signs one message and returns the header entry `v1a,<base64 sig>`.
    pub fn sign_entry(&self, msg_id: &str, timestamp: u64, payload: &[u8]) -> String {
        let sig = self.sign_raw(msg_id.as_bytes(), timestamp, payload);
        format!("{},{}", crate::standard::V1A, STANDARD.encode(sig))
    }
}

impl FromStr for AsymmetricKey {
    type Err = KeyError;

    /// Parses `whsk_<base64>` (prefix optional) holding either the 32-byte
    /// seed or seed ‖ public key (64 bytes, whose halves must match).
    fn from_str(s: &str) -> Result<Self, KeyError> {
        let bytes = decode_key(s, SECRET_KEY_PREFIX)?;
        let (seed, public) = match bytes.len() {
            32 => (&bytes[..], None),
            64 => (&bytes[..32], Some(&bytes[32..])),
            actual => {
                return Err(KeyError::WrongLength {
                    expected: "32 or 64",
                    actual,
                })
            }
        };
        let seed: &[u8; 32] = seed.try_into().map_err(|_| KeyError::Empty)?;
        let key = Self::from_seed(seed);
        match public {
            Some(p) if p != key.0.verifying_key().as_bytes() => Err(KeyError::PublicKeyMismatch),
            _ => Ok(key),
        }
    }
}

impl fmt::Display for AsymmetricKey {
    /// Writes `whsk_<base64(seed ‖ public)>`. This is the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        encode_key(f, SECRET_KEY_PREFIX, &self.0.to_keypair_bytes())
    }
}

impl fmt::Debug for AsymmetricKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AsymmetricKey {{ public: {}, secret: REDACTED }}",
            self.public_key()
        )
    }
}

/// An ed25519 public key (`whpk_<base64>`), verifying `v1a` signatures.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(ed25519_dalek::VerifyingKey);

impl PublicKey {
    /// Builds the key from its 32 bytes; fails on an invalid curve point.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, KeyError> {
        ed25519_dalek::VerifyingKey::from_bytes(bytes)
            .map(Self)
            .map_err(|_| KeyError::InvalidPublicKey)
    }

    /// The 32 raw bytes of the key.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// Checks a base64 `v1a` signature over already-assembled signed content.
    pub(crate) fn verify_signature(&self, content: &[u8], signature_b64: &str) -> bool {
        match decode_signature::<64>(signature_b64) {
            Some((bytes, 64)) => self.verify_raw(content, &bytes),
            _ => false,
        }
    }

    /// Checks a raw 64-byte ed25519 signature over `content` (strict mode).
    pub(crate) fn verify_raw(&self, content: &[u8], signature: &[u8; 64]) -> bool {
        let sig = Signature::from_bytes(signature);
        self.0.verify_strict(content, &sig).is_ok()
    }
}

impl FromStr for PublicKey {
    type Err = KeyError;

    /// Parses `whpk_<base64>` (prefix optional) of exactly 32 bytes.
    fn from_str(s: &str) -> Result<Self, KeyError> {
        let bytes = decode_key(s, PUBLIC_KEY_PREFIX)?;
        let arr: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError::WrongLength {
                expected: "32",
                actual: bytes.len(),
            })?;
        Self::from_bytes(&arr)
    }
}

impl fmt::Display for PublicKey {
    /// Writes `whpk_<base64>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        encode_key(f, PUBLIC_KEY_PREFIX, self.0.as_bytes())
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::OsRng;

    const WHSK: &str =
        "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
    const WHPK: &str = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";

    #[test]
    fn parses_the_svix_layout_and_derives_the_published_public_key() {
        let key: AsymmetricKey = WHSK.parse().unwrap();
        assert_eq!(key.public_key().to_string(), WHPK);
        assert_eq!(key.to_string(), WHSK);
    }

    #[test]
    fn accepts_a_bare_32_byte_seed() {
        let full: AsymmetricKey = WHSK.parse().unwrap();
        let seed = STANDARD.encode(full.0.to_bytes());
        let from_seed: AsymmetricKey = format!("whsk_{seed}").parse().unwrap();
        assert_eq!(from_seed, full);
        assert_eq!(
            from_seed.to_string(),
            WHSK,
            "displays in the 64-byte layout"
        );
    }

    #[test]
    fn rejects_a_secret_key_whose_public_half_does_not_match() {
        let mut bytes = AsymmetricKey::from_str(WHSK).unwrap().0.to_keypair_bytes();
        bytes[40] ^= 1;
        let text = format!("whsk_{}", STANDARD.encode(bytes));
        assert_eq!(
            text.parse::<AsymmetricKey>().unwrap_err(),
            KeyError::PublicKeyMismatch
        );
    }

    #[test]
    fn rejects_keys_of_the_wrong_length() {
        let text = format!("whsk_{}", STANDARD.encode([1u8; 48]));
        assert_eq!(
            text.parse::<AsymmetricKey>().unwrap_err(),
            KeyError::WrongLength {
                expected: "32 or 64",
                actual: 48
            }
        );
        let text = format!("whpk_{}", STANDARD.encode([1u8; 31]));
        assert_eq!(
            text.parse::<PublicKey>().unwrap_err(),
            KeyError::WrongLength {
                expected: "32",
                actual: 31
            }
        );
    }

    #[test]
    fn generated_keys_round_trip_and_sign_verifiably() {
        let key = AsymmetricKey::generate(&mut OsRng);
        let again: AsymmetricKey = key.to_string().parse().unwrap();
        assert_eq!(again, key);
        let entry = key.sign_entry("msg_1", 10, b"body");
        let (_, sig) = entry.split_once(',').unwrap();
        let content = crate::standard::signed_content(b"msg_1", 10, b"body");
        assert!(key.public_key().verify_signature(&content, sig));
        assert!(!key.public_key().verify_signature(b"msg_1.10.bodx", sig));
    }

    #[test]
    fn debug_shows_only_the_public_half() {
        let key: AsymmetricKey = WHSK.parse().unwrap();
        let shown = format!("{key:?}");
        assert!(
            shown.contains(WHPK) && shown.contains("REDACTED"),
            "{shown}"
        );
        assert!(!shown.contains("6Xb/dCcH"), "{shown}");
    }

    #[test]
    fn public_key_bytes_round_trip() {
        let pk: PublicKey = WHPK.parse().unwrap();
        assert_eq!(PublicKey::from_bytes(&pk.to_bytes()).unwrap(), pk);
    }
}
