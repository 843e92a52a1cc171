//! Seed 000 style: `x-signature: sha256=<lowercase hex HMAC-SHA256(body)>`.
//!
//! The HMAC key is the secret text as configured (its UTF-8 bytes, not
//! base64-decoded; see [`crate::seed`]). Only the raw body is signed: the id
//! travels unsigned in `x-delivery-id` and there is no timestamp, so this
//! style has no replay protection of its own and needs no clock.

use crate::error::Error;
use crate::header::{header_str, X_SIGNATURE};
use crate::seed::{decode_hex_mac, malformed};
use crate::symmetric::{hmac_sha256, Digest};

/// The prefix of the header value.
pub const PREFIX: &str = "sha256=";

/// Returns the `x-signature` value `sha256=<lowercase hex>` for `body`,
/// keyed with the bytes of `secret` exactly as configured.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mac = hmac_sha256(secret.as_bytes(), &[body]);
    format!("{PREFIX}{}", hex::encode(mac))
}

/// Verifies an `x-signature` value over `body` with the secret text as
/// configured. Hex digits may be either case; the comparison is
/// constant-time. There is no timestamp, so no `now` is needed.
pub fn verify(secret: &str, signature: Option<&[u8]>, body: &[u8]) -> Result<(), Error> {
    verify_keys(&[secret.as_bytes()], signature, body)
}

/// [`verify`] with several secret texts (rotation): passes if any matches.
pub(crate) fn verify_keys(
    keys: &[&[u8]],
    signature: Option<&[u8]>,
    body: &[u8],
) -> Result<(), Error> {
    let raw = signature.ok_or(Error::MissingHeader(X_SIGNATURE.into()))?;
    let text = header_str(X_SIGNATURE, raw)?;
    let hex_mac = text
        .strip_prefix(PREFIX)
        .ok_or_else(|| malformed("expected `sha256=<hex>`"))?;
    let mac = decode_hex_mac(hex_mac).ok_or_else(|| malformed("expected 64 hex digits"))?;
    if Digest::Sha256.any_matches(keys, &[body], &[&mac]) {
        Ok(())
    } else {
        Err(Error::NoMatchingSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    const SECRET: &str = "whsec_demo_secret";
    const BODY: &[u8] = br#"{"type":"job.completed","jobId":"job_1"}"#;

    #[test]
    fn matches_the_seed_000_node_computation_keyed_by_the_secret_text() {
        // Node: "sha256=" + createHmac("sha256", "whsec_demo_secret").update(body).digest("hex")
        let mut mac = Hmac::<Sha256>::new_from_slice(b"whsec_demo_secret").unwrap();
        mac.update(BODY);
        let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        assert_eq!(sign(SECRET, BODY), expected);
        // Pinned from running that exact Node expression (Node 20).
        assert_eq!(
            expected,
            "sha256=a302e29389e98df206d0fa60335edace952e96d37845b8e499330352204e7d11"
        );
    }

    #[test]
    fn verifies_its_own_signature_and_uppercase_hex() {
        let sig = sign(SECRET, BODY);
        assert_eq!(verify(SECRET, Some(sig.as_bytes()), BODY), Ok(()));
        let upper = format!("sha256={}", sig[7..].to_uppercase());
        assert_eq!(verify(SECRET, Some(upper.as_bytes()), BODY), Ok(()));
    }

    #[test]
    fn rejects_a_changed_body_or_another_secret() {
        let sig = sign(SECRET, BODY);
        let tampered = br#"{"type":"job.completed","jobId":"job_2"}"#;
        assert_eq!(
            verify(SECRET, Some(sig.as_bytes()), tampered),
            Err(Error::NoMatchingSignature)
        );
        assert_eq!(
            verify("other", Some(sig.as_bytes()), BODY),
            Err(Error::NoMatchingSignature)
        );
    }

    #[test]
    fn reports_missing_and_malformed_headers() {
        assert_eq!(
            verify(SECRET, None, BODY),
            Err(Error::MissingHeader("x-signature".into()))
        );
        for bad in [
            &b""[..],
            b"sha256=",
            b"sha1=00",
            b"sha256=zz",
            b"sha256=abcd",
            b"\xff",
        ] {
            assert!(matches!(
                verify(SECRET, Some(bad), BODY),
                Err(Error::MalformedHeader { header, .. }) if header == "x-signature"
            ));
        }
    }
}
