//! Seed 003 style (Stripe-like):
//! `x-signature: t=<unix>,v1=<lowercase hex HMAC-SHA256("<t>.<body>")>`.
//!
//! The HMAC key is the secret text as configured (its UTF-8 bytes, not
//! base64-decoded; see [`crate::seed`]). Verification parses `t=` once and
//! one or more `v1=` entries, ignores other keys, accepts if any `v1`
//! matches, and checks the timestamp against now with a symmetric
//! tolerance (300 s by default). The format is Stripe's, so parsing and
//! verification are the shared ones of `provider::pairs`.

use crate::error::Error;
use crate::provider::pairs;
use crate::standard::{unix_now, DEFAULT_TOLERANCE_SECS};
use crate::symmetric::hmac_sha256;

/// Returns the `x-signature` value `t=<timestamp>,v1=<lowercase hex>`,
/// keyed with the bytes of `secret` exactly as configured.
pub fn sign(secret: &str, timestamp: u64, body: &[u8]) -> String {
    sign_with_each(&[secret], timestamp, body)
}

/// Returns `t=<timestamp>,v1=<hex>,v1=<hex>…`: one `v1` entry per secret, in
/// the order given, as Stripe signs during a secret rotation (a receiver
/// accepts when any entry matches one of its secrets).
pub fn sign_with_each<S: AsRef<str>>(secrets: &[S], timestamp: u64, body: &[u8]) -> String {
    let t = timestamp.to_string();
    let mut header = format!("t={t}");
    for secret in secrets {
        let mac = hmac_sha256(secret.as_ref().as_bytes(), &[t.as_bytes(), b".", body]);
        header.push_str(",v1=");
        header.push_str(&hex::encode(mac));
    }
    header
}

/// A parsed `x-signature` value: the timestamp and every `v1` hex entry
/// (undecodable `v1` values are kept out; they cannot match).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSignature {
    /// The `t=` value, unix seconds.
    pub timestamp: u64,
    /// The decoded `v1=` MACs.
    pub signatures: Vec<[u8; 32]>,
}

/// Parses `t=<unix>,v1=<hex>[,v1=<hex>...]`. Parts are comma-separated
/// `key=value` pairs (surrounding spaces are tolerated); unknown keys are
/// ignored. Fails if `t` is missing, repeated or not an unsigned integer,
/// or if there is no `v1` entry at all.
pub fn parse(raw: &[u8]) -> Result<ParsedSignature, Error> {
    pairs::parse(&pairs::SEED, raw)
}

/// Verifies an `x-signature` value over `body` as of `now` (unix seconds),
/// with the default 300 s tolerance in both directions.
pub fn verify_at(
    secret: &str,
    signature: Option<&[u8]>,
    body: &[u8],
    now: u64,
) -> Result<(), Error> {
    verify_at_with_tolerance(secret, signature, body, now, DEFAULT_TOLERANCE_SECS)
}

/// [`verify_at`] with an explicit tolerance (seconds, both directions).
pub fn verify_at_with_tolerance(
    secret: &str,
    signature: Option<&[u8]>,
    body: &[u8],
    now: u64,
    tolerance_secs: u64,
) -> Result<(), Error> {
    pairs::verify(
        &pairs::SEED,
        &[secret.as_bytes()],
        signature,
        body,
        now,
        tolerance_secs,
    )
    .map(|_| ())
}

/// [`verify_at`] as of the system clock.
pub fn verify(secret: &str, signature: Option<&[u8]>, body: &[u8]) -> Result<(), Error> {
    verify_at(secret, signature, body, unix_now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    const SECRET: &str = "whsec_demo_secret";
    const BODY: &[u8] = br#"{"type":"job.completed","jobId":"job_1"}"#;
    const T: u64 = 1_754_900_000;

    #[test]
    fn matches_the_seed_003_node_computation_keyed_by_the_secret_text() {
        // Node: createHmac("sha256", secret).update(`${timestamp}.${rawBody}`).digest("hex")
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(format!("{T}.").as_bytes());
        mac.update(BODY);
        let hex_mac = hex::encode(mac.finalize().into_bytes());
        assert_eq!(sign(SECRET, T, BODY), format!("t={T},v1={hex_mac}"));
        // Pinned from running that exact Node expression (Node 20).
        assert_eq!(
            hex_mac,
            "cfc0ddd4626c90b2a35b5597e19d6c39af4080225137c3d18c6482255ece19fb"
        );
    }

    #[test]
    fn verifies_at_the_tolerance_boundary_in_both_directions() {
        let sig = sign(SECRET, T, BODY);
        let v = |now| verify_at(SECRET, Some(sig.as_bytes()), BODY, now);
        assert_eq!(v(T + 300), Ok(()));
        assert_eq!(v(T - 300), Ok(()));
        assert!(matches!(v(T + 301), Err(Error::TimestampTooOld { .. })));
        assert!(matches!(v(T - 301), Err(Error::TimestampTooNew { .. })));
        let strict = verify_at_with_tolerance(SECRET, Some(sig.as_bytes()), BODY, T + 2, 1);
        assert!(matches!(
            strict,
            Err(Error::TimestampTooOld {
                tolerance_secs: 1,
                ..
            })
        ));
    }

    #[test]
    fn accepts_any_of_several_v1_entries_and_ignores_unknown_keys() {
        let good = sign(SECRET, T, BODY);
        let v1 = good.split_once(",v1=").unwrap().1;
        let header = format!("t={T}, v0=abc,v1={},v1=nothex, v1={v1},x", "0".repeat(64));
        assert_eq!(verify_at(SECRET, Some(header.as_bytes()), BODY, T), Ok(()));
        let wrong = format!("t={T},v1={}", "0".repeat(64));
        assert_eq!(
            verify_at(SECRET, Some(wrong.as_bytes()), BODY, T),
            Err(Error::NoMatchingSignature)
        );
    }

    #[test]
    fn signing_with_each_secret_repeats_v1_and_each_secret_verifies_alone() {
        let other = "whsec_other_secret";
        let header = sign_with_each(&[SECRET, other], T, BODY);
        let parsed = parse(header.as_bytes()).unwrap();
        assert_eq!((parsed.timestamp, parsed.signatures.len()), (T, 2));
        assert!(header.starts_with(&sign(SECRET, T, BODY)), "{header}");
        for secret in [SECRET, other] {
            assert_eq!(verify_at(secret, Some(header.as_bytes()), BODY, T), Ok(()));
        }
        assert_eq!(
            verify_at("whsec_third", Some(header.as_bytes()), BODY, T),
            Err(Error::NoMatchingSignature)
        );
    }

    #[test]
    fn rejects_a_signature_moved_to_another_timestamp() {
        let good = sign(SECRET, T, BODY);
        let moved = good.replacen(&T.to_string(), &(T + 1).to_string(), 1);
        assert_eq!(
            verify_at(SECRET, Some(moved.as_bytes()), BODY, T),
            Err(Error::NoMatchingSignature)
        );
    }

    #[test]
    fn reports_missing_and_malformed_headers() {
        assert_eq!(
            verify_at(SECRET, None, BODY, T),
            Err(Error::MissingHeader("x-signature".into()))
        );
        let v1 = format!("v1={}", "0".repeat(64));
        for bad in [
            String::new(),
            v1.clone(),
            format!("t=,{v1}"),
            format!("t=-5,{v1}"),
            format!("t=1e9,{v1}"),
            format!("t=1,t=1,{v1}"),
            format!("t=99999999999999999999,{v1}"),
            "t=1".to_owned(),
        ] {
            assert!(
                matches!(
                    verify_at(SECRET, Some(bad.as_bytes()), BODY, T),
                    Err(Error::MalformedHeader { header, .. }) if header == "x-signature"
                ),
                "{bad:?}"
            );
        }
    }
}
