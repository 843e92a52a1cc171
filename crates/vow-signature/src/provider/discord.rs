//! Discord interactions: ed25519 over `X-Signature-Timestamp ‖ body`, the
//! signature in `X-Signature-Ed25519` (hex), verified with the
//! application's public key (64 hex digits).
//!
//! Discord specifies no replay window, but the timestamp is signed unix
//! seconds, so it is held to the tolerance like every other timestamp.
//! Discord probes endpoints with deliberately invalid signatures and
//! removes those that accept them: every failure here is a rejection.

use crate::asymmetric::PublicKey;
use crate::error::KeyError;
use crate::header::{check_tolerance, header_str, parse_timestamp};
use crate::provider::hmac::Encoding;
use crate::provider::{Error, Headers, Request, Verified};

/// `x-signature-ed25519`: the hex signature.
pub(crate) const SIGNATURE: &str = "x-signature-ed25519";
/// `x-signature-timestamp`: unix seconds, signed.
pub(crate) const TIMESTAMP: &str = "x-signature-timestamp";

/// Parses an application public key: 64 hex digits (either case).
pub(crate) fn parse_key(text: &str) -> Result<PublicKey, KeyError> {
    if text.is_empty() {
        return Err(KeyError::Empty);
    }
    if text.len() != 64 {
        return Err(KeyError::WrongLength {
            expected: "32",
            actual: text.len() / 2,
        });
    }
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(text, &mut bytes).map_err(|_| KeyError::NotHex)?;
    PublicKey::from_bytes(&bytes)
}

pub(crate) fn verify<H: Headers + ?Sized>(
    keys: &[PublicKey],
    request: &Request<'_, H>,
    now: u64,
    tolerance_secs: u64,
) -> Result<Verified, Error> {
    let raw_sig = request.require(SIGNATURE)?;
    let raw_ts = request.require(TIMESTAMP)?;
    let signature: [u8; 64] = Encoding::Hex
        .decode(header_str(SIGNATURE, raw_sig)?, 64)
        .and_then(|sig| sig.try_into().ok())
        .ok_or(Error::MalformedHeader {
            header: SIGNATURE.into(),
            reason: "expected 128 hex digits",
        })?;
    let timestamp = parse_timestamp(TIMESTAMP, raw_ts)?;
    check_tolerance(timestamp, now, tolerance_secs)?;
    let content = [raw_ts, request.body()].concat();
    if keys.iter().fold(false, |found, key| {
        found | key.verify_raw(&content, &signature)
    }) {
        Ok(Verified {
            timestamp: Some(timestamp),
            id: None,
        })
    } else {
        Err(Error::NoMatchingSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_hex_public_key_in_either_case() {
        let key = crate::AsymmetricKey::from_seed(&[3u8; 32]).public_key();
        let text = hex::encode(key.to_bytes());
        assert_eq!(parse_key(&text), Ok(key));
        assert_eq!(parse_key(&text.to_uppercase()), Ok(key));
    }

    #[test]
    fn rejects_empty_short_and_non_hex_keys() {
        assert_eq!(parse_key(""), Err(KeyError::Empty));
        assert_eq!(
            parse_key("abcd"),
            Err(KeyError::WrongLength {
                expected: "32",
                actual: 2
            })
        );
        assert_eq!(parse_key(&"zz".repeat(32)), Err(KeyError::NotHex));
        assert_eq!(parse_key(&"é".repeat(32)), Err(KeyError::NotHex));
    }
}
