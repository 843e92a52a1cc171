//! Endpoint and destination signing secrets (`whsec_<base64>`): making a new one, and reading a
//! client's. Below the API and the workers, which both make secrets (the operational endpoint's
//! comes from [`generate`]).

use vow_signature::SymmetricKey;

/// A new random secret, `whsec_…`.
pub fn generate() -> String {
    SymmetricKey::generate(&mut rand::rngs::OsRng).to_string()
}

/// A client-supplied secret (`^(whsec_)?[a-zA-Z0-9+/=]{32,100}$`, decodable) normalised to
/// `whsec_<base64>`, or `None` when it has another shape.
pub fn normalise(raw: &str) -> Option<String> {
    let body = raw.strip_prefix("whsec_").unwrap_or(raw);
    let shaped = (32..=100).contains(&body.len())
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    match raw.parse::<SymmetricKey>() {
        Ok(key) if shaped => Some(key.to_string()),
        _ => None,
    }
}
