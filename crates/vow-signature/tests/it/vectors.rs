//! Every test vector from shared/reference/standard-webhooks.md.

use vow_signature::{
    sign, AsymmetricKey, Error, PublicKey, SigningKey, SymmetricKey, Verifier, VerifyingKey,
    WebhookHeaders,
};

const ID_2: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TS_2: u64 = 1_614_265_330;
const BODY_2: &[u8] = br#"{"test": 2432232314}"#;
const WHSK: &str =
    "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
const WHPK: &str = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";
const V1A_SIG: &str =
    "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==";

fn verify(keys: &[VerifyingKey], id: &str, ts: u64, sig: &str, body: &[u8]) -> Result<(), Error> {
    let ts_text = ts.to_string();
    let headers = WebhookHeaders::new(
        Some(id.as_bytes()),
        Some(ts_text.as_bytes()),
        Some(sig.as_bytes()),
    );
    Verifier::new(keys.iter().cloned()).verify_at(&headers, body, ts)
}

#[test]
fn signs_and_verifies_the_rust_library_vector() {
    let key: SigningKey = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD".parse().unwrap();
    let id = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
    let body = br#"{"email":"test@example.com","username":"test_user"}"#;
    let sig = sign(std::slice::from_ref(&key), id, 1_649_367_553, body);
    assert_eq!(sig, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
    assert_eq!(
        verify(&[key.verifying_key()], id, 1_649_367_553, &sig, body),
        Ok(())
    );
}

#[test]
fn signs_and_verifies_the_javascript_and_go_vector() {
    let key: SymmetricKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
    assert_eq!(key.len(), 24);
    let sig = key.sign_entry(ID_2, TS_2, BODY_2);
    assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    assert_eq!(verify(&[key.into()], ID_2, TS_2, &sig, BODY_2), Ok(()));
}

#[test]
fn rejects_the_python_negative_vector() {
    let key: VerifyingKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
    let bad = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=";
    assert_eq!(
        verify(&[key], ID_2, TS_2, bad, BODY_2),
        Err(Error::NoMatchingSignature)
    );
}

#[test]
fn signs_the_asymmetric_vector_and_verifies_it_with_the_published_public_key() {
    let key: AsymmetricKey = WHSK.parse().unwrap();
    assert_eq!(key.sign_entry(ID_2, TS_2, BODY_2), V1A_SIG);
    let public: PublicKey = WHPK.parse().unwrap();
    assert_eq!(key.public_key(), public);
    assert_eq!(
        verify(&[public.into()], ID_2, TS_2, V1A_SIG, BODY_2),
        Ok(())
    );
    assert_eq!(
        verify(
            &[public.into()],
            ID_2,
            TS_2,
            V1A_SIG,
            br#"{"test": 2432232315}"#
        ),
        Err(Error::NoMatchingSignature)
    );
}

#[test]
fn passes_the_multi_signature_decoy_test_only_when_a_valid_entry_is_present() {
    let key: VerifyingKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
    let decoy = "v1,tFtCZ5RDCPxzWQRWXWPgrCgE2frDBe9gjpbWQxnVfsQ=";
    let valid = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    let negative = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=";
    let keys = std::slice::from_ref(&key);
    for header in [
        format!("{decoy} {valid}"),
        format!("{valid} {decoy}"),
        format!("v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= {decoy} {valid} {negative}"),
        format!("{V1A_SIG} {decoy} {valid}"),
    ] {
        assert_eq!(
            verify(keys, ID_2, TS_2, &header, BODY_2),
            Ok(()),
            "{header}"
        );
    }
    for header in [
        decoy.to_owned(),
        format!("{decoy} {negative}"),
        V1A_SIG.to_owned(),
    ] {
        assert_eq!(
            verify(keys, ID_2, TS_2, &header, BODY_2),
            Err(Error::NoMatchingSignature),
            "{header}"
        );
    }
}

#[test]
fn signs_with_a_mix_of_rotated_keys_in_order_and_each_receiver_verifies() {
    let sym: SigningKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
    let asym: SigningKey = WHSK.parse().unwrap();
    let header = sign(&[asym.clone(), sym.clone()], ID_2, TS_2, BODY_2);
    assert_eq!(
        header,
        format!("{V1A_SIG} v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    );
    assert_eq!(
        verify(&[sym.verifying_key()], ID_2, TS_2, &header, BODY_2),
        Ok(())
    );
    assert_eq!(
        verify(&[asym.verifying_key()], ID_2, TS_2, &header, BODY_2),
        Ok(())
    );
}
