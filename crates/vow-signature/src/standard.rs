//! Standard Webhooks v1 (HMAC-SHA256) and v1a (ed25519): signing a whole
//! `webhook-signature` header with several keys, and verifying one.
//!
//! The signed content is `msg_id + "." + timestamp + "." + payload` over the
//! raw payload bytes. The header is a space-separated list of
//! `<version>,<base64>` entries; a message verifies if *any* entry of a
//! known version verifies with *any* configured key, and its timestamp is
//! within the tolerance (300 s by default) of now, in either direction.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use subtle::ConstantTimeEq;

use crate::error::Error;
use crate::header::{
    check_tolerance, parse_signature_entries, parse_timestamp, WebhookHeaders, WEBHOOK_ID,
    WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP,
};
use crate::key::{decode_signature, SigningKey, VerifyingKey};

/// Version identifier of symmetric (HMAC-SHA256) signatures.
pub const V1: &str = "v1";
/// Version identifier of asymmetric (ed25519) signatures.
pub const V1A: &str = "v1a";
/// Default timestamp tolerance, applied both to the past and the future.
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;

/// The bytes that get signed: `msg_id.timestamp.payload`.
pub fn signed_content(msg_id: &[u8], timestamp: u64, payload: &[u8]) -> Vec<u8> {
    let ts = timestamp.to_string();
    let mut content = Vec::with_capacity(msg_id.len() + ts.len() + payload.len() + 2);
    content.extend_from_slice(msg_id);
    content.push(b'.');
    content.extend_from_slice(ts.as_bytes());
    content.push(b'.');
    content.extend_from_slice(payload);
    content
}

/// Signs a message with every key and returns the full `webhook-signature`
/// header value: one entry per key, space-separated, in the order given
/// (rotation: put the current key first and keep the old ones while
/// receivers migrate). An empty slice gives an empty string.
///
/// `msg_id` should be sender-controlled and contain no `.` (spec advice).
pub fn sign(keys: &[SigningKey], msg_id: &str, timestamp: u64, payload: &[u8]) -> String {
    keys.iter()
        .map(|k| k.sign_entry(msg_id, timestamp, payload))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Verifies Standard Webhooks messages against a set of trusted keys.
///
/// ```
/// use vow_signature::{sign, SigningKey, Verifier, WebhookHeaders};
/// let key: SigningKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
/// let sig = sign(std::slice::from_ref(&key), "msg_1", 1_700_000_000, b"{}");
/// let headers = WebhookHeaders::new(Some(b"msg_1"), Some(b"1700000000"), Some(sig.as_bytes()));
/// let verifier = Verifier::new([key.verifying_key()]);
/// assert!(verifier.verify_at(&headers, b"{}", 1_700_000_100).is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verifier {
    keys: Vec<VerifyingKey>,
    tolerance_secs: u64,
}

impl Verifier {
    /// A verifier trusting `keys`, with the default 300 s tolerance.
    pub fn new(keys: impl IntoIterator<Item = VerifyingKey>) -> Self {
        Self {
            keys: keys.into_iter().collect(),
            tolerance_secs: DEFAULT_TOLERANCE_SECS,
        }
    }

    /// Sets the timestamp tolerance (seconds, applied in both directions).
    pub fn with_tolerance_secs(mut self, tolerance_secs: u64) -> Self {
        self.tolerance_secs = tolerance_secs;
        self
    }

    /// The timestamp tolerance in seconds.
    pub fn tolerance_secs(&self) -> u64 {
        self.tolerance_secs
    }

    /// The trusted keys.
    pub fn keys(&self) -> &[VerifyingKey] {
        &self.keys
    }

    /// Verifies a message as of `now` (unix seconds).
    ///
    /// Checks, in order: all three headers present; timestamp an unsigned
    /// integer within the tolerance; signature header well-formed; some
    /// `v1`/`v1a` entry verifies with some key (unknown versions are
    /// ignored, comparisons are constant-time).
    pub fn verify_at(
        &self,
        headers: &WebhookHeaders<'_>,
        body: &[u8],
        now: u64,
    ) -> Result<(), Error> {
        let id = headers.id.ok_or(Error::MissingHeader(WEBHOOK_ID.into()))?;
        let raw_ts = headers
            .timestamp
            .ok_or(Error::MissingHeader(WEBHOOK_TIMESTAMP.into()))?;
        let raw_sig = headers
            .signature
            .ok_or(Error::MissingHeader(WEBHOOK_SIGNATURE.into()))?;

        let timestamp = parse_timestamp(WEBHOOK_TIMESTAMP, raw_ts)?;
        check_tolerance(timestamp, now, self.tolerance_secs)?;
        let entries = parse_signature_entries(raw_sig)?;

        let content = signed_content(id, timestamp, body);
        for key in &self.keys {
            let version = key.version();
            let candidates = entries.iter().filter(|e| e.version == version);
            let matched = match key {
                // Compute the MAC once per key, then compare to each entry.
                VerifyingKey::Symmetric(k) => {
                    let expected = k.mac(&content);
                    candidates.fold(false, |found, e| {
                        let ok = decode_signature::<32>(e.signature)
                            .is_some_and(|(sig, len)| bool::from(expected.ct_eq(&sig[..len])));
                        found | ok
                    })
                }
                VerifyingKey::Public(k) => candidates.fold(false, |found, e| {
                    found | k.verify_signature(&content, e.signature)
                }),
            };
            if matched {
                return Ok(());
            }
        }
        Err(Error::NoMatchingSignature)
    }

    /// Verifies a message as of the system clock. The only impure function
    /// in the crate; prefer [`Verifier::verify_at`] in tests.
    pub fn verify(&self, headers: &WebhookHeaders<'_>, body: &[u8]) -> Result<(), Error> {
        self.verify_at(headers, body, unix_now())
    }
}

/// Seconds since the Unix epoch by the system clock (0 if it is set before).
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Encodes a raw signature as a header entry, e.g. for tests and tooling.
pub fn entry(version: &str, signature: &[u8]) -> String {
    format!("{version},{}", STANDARD.encode(signature))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AsymmetricKey, SymmetricKey};
    use rand::rngs::OsRng;

    const NOW: u64 = 1_700_000_000;

    fn key() -> SigningKey {
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap()
    }

    fn check(
        v: &Verifier,
        id: &str,
        ts: &str,
        sig: &str,
        body: &[u8],
        now: u64,
    ) -> Result<(), Error> {
        let h = WebhookHeaders::new(
            Some(id.as_bytes()),
            Some(ts.as_bytes()),
            Some(sig.as_bytes()),
        );
        v.verify_at(&h, body, now)
    }

    #[test]
    fn signed_content_joins_id_timestamp_and_payload_with_dots() {
        assert_eq!(
            signed_content(b"msg", 12, b"\xff{}"),
            b"msg.12.\xff{}".to_vec()
        );
    }

    #[test]
    fn signs_with_every_key_in_the_given_order() {
        let asym = SigningKey::from(AsymmetricKey::generate(&mut OsRng));
        let header = sign(&[asym.clone(), key()], "msg_1", NOW, b"x");
        let versions: Vec<_> = header
            .split(' ')
            .map(|e| e.split_once(',').unwrap().0)
            .collect();
        assert_eq!(versions, ["v1a", "v1"]);
        assert_eq!(sign(&[], "msg_1", NOW, b"x"), "");
    }

    #[test]
    fn names_the_missing_header() {
        let v = Verifier::new([key().verifying_key()]);
        let full = WebhookHeaders::new(Some(b"a"), Some(b"1"), Some(b"v1,x"));
        let cases = [
            (WebhookHeaders { id: None, ..full }, WEBHOOK_ID),
            (
                WebhookHeaders {
                    timestamp: None,
                    ..full
                },
                WEBHOOK_TIMESTAMP,
            ),
            (
                WebhookHeaders {
                    signature: None,
                    ..full
                },
                WEBHOOK_SIGNATURE,
            ),
        ];
        for (headers, name) in cases {
            assert_eq!(
                v.verify_at(&headers, b"", 1),
                Err(Error::MissingHeader(name.into()))
            );
        }
    }

    #[test]
    fn rejects_a_timestamp_older_than_the_tolerance() {
        let v = Verifier::new([key().verifying_key()]);
        let sig = sign(&[key()], "m", NOW, b"b");
        assert_eq!(check(&v, "m", "1700000000", &sig, b"b", NOW + 300), Ok(()));
        assert!(matches!(
            check(&v, "m", "1700000000", &sig, b"b", NOW + 301),
            Err(Error::TimestampTooOld {
                tolerance_secs: 300,
                ..
            })
        ));
    }

    #[test]
    fn rejects_a_timestamp_newer_than_the_tolerance() {
        let v = Verifier::new([key().verifying_key()]);
        let sig = sign(&[key()], "m", NOW, b"b");
        assert_eq!(check(&v, "m", "1700000000", &sig, b"b", NOW - 300), Ok(()));
        assert!(matches!(
            check(&v, "m", "1700000000", &sig, b"b", NOW - 301),
            Err(Error::TimestampTooNew { .. })
        ));
    }

    #[test]
    fn honours_a_configured_tolerance() {
        let v = Verifier::new([key().verifying_key()]).with_tolerance_secs(10);
        assert_eq!(v.tolerance_secs(), 10);
        let sig = sign(&[key()], "m", NOW, b"b");
        assert_eq!(check(&v, "m", "1700000000", &sig, b"b", NOW + 10), Ok(()));
        assert!(check(&v, "m", "1700000000", &sig, b"b", NOW + 11).is_err());
    }

    #[test]
    fn ignores_unknown_versions_and_accepts_any_valid_entry() {
        let v = Verifier::new([key().verifying_key()]);
        let good = sign(&[key()], "m", NOW, b"b");
        let header = format!("v2,abc v1,AAAA {good} v1a,zzz");
        assert_eq!(check(&v, "m", "1700000000", &header, b"b", NOW), Ok(()));
        assert_eq!(
            check(&v, "m", "1700000000", "v2,abc v1,AAAA", b"b", NOW),
            Err(Error::NoMatchingSignature)
        );
    }

    #[test]
    fn a_symmetric_key_does_not_verify_a_v1a_entry_with_the_same_bytes() {
        let k = SymmetricKey::from_bytes(b"secret").unwrap();
        let mac = k.mac(&signed_content(b"m", NOW, b"b"));
        let v = Verifier::new([VerifyingKey::from(k)]);
        let header = entry(V1A, &mac);
        assert_eq!(
            check(&v, "m", "1700000000", &header, b"b", NOW),
            Err(Error::NoMatchingSignature)
        );
        assert_eq!(
            check(&v, "m", "1700000000", &entry(V1, &mac), b"b", NOW),
            Ok(())
        );
    }

    #[test]
    fn verifies_with_any_of_several_keys() {
        let old = key();
        let new = SigningKey::from(AsymmetricKey::generate(&mut OsRng));
        let v = Verifier::new([
            SymmetricKey::generate(&mut OsRng).into(),
            new.verifying_key(),
        ]);
        let sig = sign(&[new.clone(), old.clone()], "m", NOW, b"b");
        assert_eq!(check(&v, "m", "1700000000", &sig, b"b", NOW), Ok(()));
        let only_old = sign(&[old], "m", NOW, b"b");
        assert_eq!(
            check(&v, "m", "1700000000", &only_old, b"b", NOW),
            Err(Error::NoMatchingSignature)
        );
    }

    #[test]
    fn a_verifier_without_keys_matches_nothing() {
        let sig = sign(&[key()], "m", NOW, b"b");
        assert_eq!(
            check(&Verifier::new([]), "m", "1700000000", &sig, b"b", NOW),
            Err(Error::NoMatchingSignature)
        );
    }

    #[test]
    fn system_clock_wrapper_accepts_a_fresh_signature() {
        let now = unix_now();
        let sig = sign(&[key()], "m", now, b"b");
        let ts = now.to_string();
        let h = WebhookHeaders::new(Some(b"m"), Some(ts.as_bytes()), Some(sig.as_bytes()));
        assert_eq!(
            Verifier::new([key().verifying_key()]).verify(&h, b"b"),
            Ok(())
        );
    }
}
