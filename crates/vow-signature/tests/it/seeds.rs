//! The seed styles, from a receiver's point of view.

use vow_signature::header::{X_DELIVERY_ID, X_SIGNATURE};
use vow_signature::seed::{sha256, timestamped};
use vow_signature::Error;

const SECRET: &str = "whsec_demo_secret";
const BODY: &[u8] = br#"{"type":"job.completed","jobId":"job_1"}"#;

#[test]
fn seed_header_names_are_lowercase_and_as_the_seeds_use_them() {
    assert_eq!(
        (X_SIGNATURE, X_DELIVERY_ID),
        ("x-signature", "x-delivery-id")
    );
}

#[test]
fn seed_000_signature_is_not_keyed_with_the_base64_decoded_secret() {
    // A whsec_-looking secret is used as text, never decoded.
    let looks_like_whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let sig = sha256::sign(looks_like_whsec, BODY);
    assert_eq!(
        sha256::verify(looks_like_whsec, Some(sig.as_bytes()), BODY),
        Ok(())
    );
    assert_ne!(sig, sha256::sign("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", BODY));
}

#[test]
fn seed_003_round_trips_and_rejects_a_replay_after_the_tolerance() {
    let sig = timestamped::sign(SECRET, 1_000, BODY);
    assert_eq!(
        timestamped::verify_at(SECRET, Some(sig.as_bytes()), BODY, 1_000),
        Ok(())
    );
    assert!(matches!(
        timestamped::verify_at(SECRET, Some(sig.as_bytes()), BODY, 1_301),
        Err(Error::TimestampTooOld { .. })
    ));
    let parsed = timestamped::parse(sig.as_bytes()).unwrap();
    assert_eq!((parsed.timestamp, parsed.signatures.len()), (1_000, 1));
}
