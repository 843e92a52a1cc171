//! The two "seed" sender styles vow can deliver with and verify, besides
//! Standard Webhooks.
//!
//! **Keying rule (both styles):** the HMAC-SHA256 key is the secret *text
//! exactly as configured*, as UTF-8 bytes — `whsec_demo_secret` keys the
//! HMAC with those 17 bytes. It is **not** base64-decoded, even when it
//! looks like a `whsec_` key. This is what the seeds' own Node code does
//! (`crypto.createHmac("sha256", secret)` with a string secret), so their
//! receivers verify vow's deliveries unchanged.
//!
//! * [`sha256`] — seed 000: `x-signature: sha256=<hex HMAC(body)>`, with the
//!   unsigned id in `x-delivery-id`; no timestamp, no replay protection.
//! * [`timestamped`] — seed 003 (Stripe-like):
//!   `x-signature: t=<unix>,v1=<hex HMAC("<t>.<body>")>`.

pub mod sha256;
pub mod timestamped;

use crate::error::Error;

/// Decodes a 64-character hex HMAC (either case) into 32 bytes.
pub(crate) fn decode_hex_mac(hex_text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_text, &mut out).ok()?;
    Some(out)
}

/// A `MalformedHeader` error for `x-signature`.
pub(crate) fn malformed(reason: &'static str) -> Error {
    Error::MalformedHeader {
        header: crate::header::X_SIGNATURE.into(),
        reason,
    }
}
