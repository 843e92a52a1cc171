//! Property tests: round trips, tamper detection, and total parsers.

use proptest::prelude::*;
use vow_signature::header::{parse_signature_entries, parse_timestamp, WEBHOOK_TIMESTAMP};
use vow_signature::seed::{sha256, timestamped};
use vow_signature::{
    sign, AsymmetricKey, PublicKey, SigningKey, SymmetricKey, Verifier, VerifyingKey,
    WebhookHeaders,
};

fn keys() -> (SigningKey, SigningKey) {
    let sym: SigningKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
    let asym = AsymmetricKey::from_seed(&[7u8; 32]).into();
    (sym, asym)
}

fn check(v: &Verifier, id: &[u8], ts: u64, sig: &[u8], body: &[u8], now: u64) -> bool {
    let ts = ts.to_string();
    let h = WebhookHeaders::new(Some(id), Some(ts.as_bytes()), Some(sig));
    v.verify_at(&h, body, now).is_ok()
}

/// Ids the spec allows: no `.` (so content boundaries are unambiguous).
fn msg_id() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_-]{0,40}"
}

proptest! {
    #[test]
    fn sign_then_verify_round_trips_for_both_key_kinds(
        id in msg_id(),
        ts in any::<u64>(),
        body in proptest::collection::vec(any::<u8>(), 0..512),
        asym_first in any::<bool>(),
    ) {
        let (sym, asym) = keys();
        for key in [&sym, &asym] {
            let sig = sign(std::slice::from_ref(key), &id, ts, &body);
            let v = Verifier::new([key.verifying_key()]);
            prop_assert!(check(&v, id.as_bytes(), ts, sig.as_bytes(), &body, ts));
        }
        let order = if asym_first { [asym.clone(), sym.clone()] } else { [sym.clone(), asym.clone()] };
        let sig = sign(&order, &id, ts, &body);
        for key in [&sym, &asym] {
            let v = Verifier::new([key.verifying_key()]);
            prop_assert!(check(&v, id.as_bytes(), ts, sig.as_bytes(), &body, ts));
        }
    }

    #[test]
    fn any_change_to_body_id_timestamp_or_signature_fails(
        id in msg_id(),
        ts in 1_000u64..4_000_000_000,
        body in proptest::collection::vec(any::<u8>(), 0..256),
        which in 0u8..4,
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
        use_asym in any::<bool>(),
    ) {
        let (sym, asym) = keys();
        let key = if use_asym { asym } else { sym };
        let v = Verifier::new([key.verifying_key()]);
        let sig = sign(std::slice::from_ref(&key), &id, ts, &body);
        let (mut id2, mut ts2, mut body2) = (id.clone().into_bytes(), ts, body.clone());
        let mut sig2 = sig.clone().into_bytes();
        match which {
            0 => if body2.is_empty() { body2.push(0) } else { let i = flip.index(body2.len()); body2[i] ^= 1 << bit },
            1 => id2.push(b'x'),
            2 => ts2 += 1,
            _ => {
                // Flip a bit of the decoded signature and re-encode.
                use base64::Engine as _;
                let (ver, b64) = sig.split_once(',').unwrap();
                let mut raw = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
                let i = flip.index(raw.len());
                raw[i] ^= 1 << bit;
                sig2 = format!("{ver},{}", base64::engine::general_purpose::STANDARD.encode(raw)).into_bytes();
            }
        }
        // Verify at the original time so the tolerance is never the reason.
        prop_assert!(!check(&v, &id2, ts2, &sig2, &body2, ts));
    }

    #[test]
    fn seed_styles_round_trip_and_detect_body_changes(
        secret in ".{0,40}",
        ts in 0u64..u64::MAX / 2,
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let s0 = sha256::sign(&secret, &body);
        prop_assert!(sha256::verify(&secret, Some(s0.as_bytes()), &body).is_ok());
        let s3 = timestamped::sign(&secret, ts, &body);
        prop_assert!(timestamped::verify_at(&secret, Some(s3.as_bytes()), &body, ts).is_ok());
        let mut other = body.clone();
        other.push(b'!');
        prop_assert!(sha256::verify(&secret, Some(s0.as_bytes()), &other).is_err());
        prop_assert!(timestamped::verify_at(&secret, Some(s3.as_bytes()), &other, ts).is_err());
    }

    #[test]
    fn parsers_and_verifiers_never_panic_on_arbitrary_input(
        id in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
        ts in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..32)),
        sig in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..256)),
        body in proptest::collection::vec(any::<u8>(), 0..64),
        text in ".{0,128}",
        now in any::<u64>(),
    ) {
        let (sym, asym) = keys();
        let v = Verifier::new([sym.verifying_key(), asym.verifying_key()]).with_tolerance_secs(u64::MAX);
        let h = WebhookHeaders::new(id.as_deref(), ts.as_deref(), sig.as_deref());
        let _ = v.verify_at(&h, &body, now);
        let _ = parse_timestamp(WEBHOOK_TIMESTAMP, ts.as_deref().unwrap_or_default());
        let _ = parse_signature_entries(sig.as_deref().unwrap_or_default());
        let _ = sha256::verify(&text, sig.as_deref(), &body);
        let _ = timestamped::verify_at(&text, sig.as_deref(), &body, now);
        let _ = timestamped::parse(text.as_bytes());
        let _ = text.parse::<SymmetricKey>();
        let _ = text.parse::<AsymmetricKey>();
        let _ = text.parse::<PublicKey>();
        let _ = text.parse::<SigningKey>();
        let _ = text.parse::<VerifyingKey>();
    }

    #[test]
    fn key_parsers_never_panic_on_prefixed_base64_like_text(
        prefix in prop::sample::select(vec!["", "whsec_", "whsk_", "whpk_"]),
        body in "[A-Za-z0-9+/=]{0,120}",
    ) {
        let text = format!("{prefix}{body}");
        let _ = text.parse::<SigningKey>();
        let _ = text.parse::<VerifyingKey>();
        let _ = text.parse::<AsymmetricKey>();
        if let Ok(k) = text.parse::<SymmetricKey>() {
            prop_assert_eq!(k.to_string().parse::<SymmetricKey>().unwrap(), k);
        }
    }

    #[test]
    fn timestamp_parser_accepts_exactly_the_decimal_u64s(n in any::<u64>()) {
        prop_assert_eq!(parse_timestamp(WEBHOOK_TIMESTAMP, n.to_string().as_bytes()), Ok(n));
        let signed = format!("+{n}");
        prop_assert!(parse_timestamp(WEBHOOK_TIMESTAMP, signed.as_bytes()).is_err());
    }
}
