//! Feeds arbitrary bytes to every header parser and verifier of
//! `vow-signature`. The input is split on `\n` into
//! id / timestamp / signature / body / secret text; the first 8 bytes of the
//! body part double as `now`. Nothing may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vow_signature::header::{parse_signature_entries, parse_timestamp, WEBHOOK_TIMESTAMP};
use vow_signature::seed::{sha256, timestamped};
use vow_signature::{
    AsymmetricKey, PublicKey, SigningKey, SymmetricKey, Verifier, VerifyingKey, WebhookHeaders,
};

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(5, |&b| b == b'\n');
    let id = parts.next();
    let ts = parts.next();
    let sig = parts.next();
    let body = parts.next().unwrap_or_default();
    let secret = String::from_utf8_lossy(parts.next().unwrap_or_default());

    let mut now_bytes = [0u8; 8];
    let n = body.len().min(8);
    now_bytes[..n].copy_from_slice(&body[..n]);
    let now = u64::from_le_bytes(now_bytes);

    // Standard Webhooks, with one key of each kind and the widest tolerance
    // so signature parsing is reached for any timestamp.
    let sym = SymmetricKey::from_bytes(b"fuzz-key").expect("non-empty");
    let asym = AsymmetricKey::from_seed(&[7u8; 32]);
    for tolerance in [300, u64::MAX] {
        let verifier = Verifier::new([sym.clone().into(), asym.public_key().into()])
            .with_tolerance_secs(tolerance);
        let headers = WebhookHeaders::new(id, ts, sig);
        let _ = verifier.verify_at(&headers, body, now);
    }
    let _ = parse_timestamp(WEBHOOK_TIMESTAMP, ts.unwrap_or_default());
    let _ = parse_signature_entries(sig.unwrap_or_default());

    // Seed styles.
    let _ = sha256::verify(&secret, sig, body);
    let _ = timestamped::verify_at(&secret, sig, body, now);
    let _ = timestamped::verify_at_with_tolerance(&secret, sig, body, now, u64::MAX);
    let _ = timestamped::parse(sig.unwrap_or_default());

    // Key parsers, on the secret part and on the whole input as text.
    for text in [secret.as_ref(), String::from_utf8_lossy(data).as_ref()] {
        let _ = text.parse::<SymmetricKey>();
        let _ = text.parse::<AsymmetricKey>();
        let _ = text.parse::<PublicKey>();
        let _ = text.parse::<SigningKey>();
        let _ = text.parse::<VerifyingKey>();
    }
});
