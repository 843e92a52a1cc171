//! Inbound provider verification from outside the crate: every published
//! vector of `shared/reference/provider-signatures.md` ([`vectors`]), the
//! same rejection cases run against every provider ([`cases`]), what is
//! particular to each ([`specifics`]), where each puts its event id
//! ([`event_ids`]), and a no-panic property ([`props`]).
//!
//! Signatures made here are computed the way each provider documents it,
//! with the `hmac`/`sha1`/`sha2`/`ed25519-dalek` crates directly, never with
//! the code under test.

mod cases;
mod event_ids;
mod props;
mod specifics;
mod vectors;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use vow_signature::provider::{verify, Error, Request, Scheme, Verified};

/// The verifier's clock in most tests.
pub const NOW: u64 = 1_700_000_000;
/// The tolerance in most tests.
pub const TOLERANCE: u64 = 300;

/// MAC `M` (e.g. `Hmac<sha2::Sha256>`) of `data` under `key`.
pub fn mac<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <M as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Lowercase hex HMAC-SHA256.
pub fn hex256(key: &str, data: &[u8]) -> String {
    hex::encode(mac::<Hmac<sha2::Sha256>>(key.as_bytes(), data))
}

/// Standard base64 HMAC-SHA256.
pub fn b64_256(key: &str, data: &[u8]) -> String {
    STANDARD.encode(mac::<Hmac<sha2::Sha256>>(key.as_bytes(), data))
}

/// `a ‖ b ‖ …` as bytes.
pub fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// One delivery as a provider would send it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub url: String,
}

impl Delivery {
    pub fn new(headers: &[(&str, &str)], body: impl Into<Vec<u8>>, url: &str) -> Self {
        Self {
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: body.into(),
            url: url.to_owned(),
        }
    }

    /// Verifies as `scheme` with `secrets` at `now`, tolerance 300 s.
    pub fn verify<S: AsRef<str>>(
        &self,
        scheme: &Scheme,
        secrets: &[S],
        now: u64,
    ) -> Result<Verified, Error> {
        let request = Request::new(&self.headers[..], &self.body, &self.url);
        verify(scheme, secrets, &request, now, TOLERANCE)
    }

    /// The same delivery without header `name` (any case).
    pub fn without(&self, name: &str) -> Self {
        let mut d = self.clone();
        d.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        d
    }

    /// The same delivery with header `name` (any case) set to `value`.
    pub fn with(&self, name: &str, value: &str) -> Self {
        let mut d = self.without(name);
        d.headers.push((name.to_owned(), value.to_owned()));
        d
    }

    /// The same delivery with the last body byte changed.
    pub fn tampered(&self) -> Self {
        let mut d = self.clone();
        match d.body.last_mut() {
            Some(b) => *b ^= 0x01,
            None => d.body.push(b'x'),
        }
        d
    }
}
