//! Inbound verification: checks that a request really comes from a
//! provider (Stripe, GitHub, Slack, Twilio, …, Standard Webhooks, vow's seed
//! styles, or a configured generic HMAC), from a borrowed view of it.
//!
//! [`verify`] takes the [`Scheme`], the source's current secrets (any one
//! matching passes: rotation), the [`Request`] (headers, exact body bytes,
//! full URL), `now` in unix seconds (injected, never read here) and a
//! tolerance applied in both directions to every signed timestamp. It
//! returns what verification learned ([`Verified`]) or an [`Error`] whose
//! [`kind`](Error::kind) is the HTTP class: 400 for a request it cannot
//! read, 401 for one that is not authentic or not fresh, 500 for a
//! configuration that cannot work. Comparisons are constant-time, nothing
//! panics, and no error text holds a secret or a signature.
//!
//! ```
//! use vow_signature::provider::{verify, Request, Scheme, DEFAULT_TOLERANCE_SECS};
//!
//! // GitHub's documented example delivery.
//! let headers = [(
//!     "X-Hub-Signature-256",
//!     "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
//! )];
//! let request = Request::new(&headers[..], b"Hello, World!", "https://vow.example/in/src_1");
//! let secrets = ["It's a Secret to Everybody"];
//! let verified = verify(&Scheme::GitHub, &secrets, &request, 1_700_000_000, DEFAULT_TOLERANCE_SECS)?;
//! assert_eq!(verified.timestamp, None);
//!
//! let tampered = Request::new(&headers[..], b"Hello, World?", "https://vow.example/in/src_1");
//! let err = verify(&Scheme::GitHub, &secrets, &tampered, 1_700_000_000, 300).unwrap_err();
//! assert_eq!((err.status(), err.reason()), (401, "signature_mismatch"));
//! # Ok::<(), vow_signature::Error>(())
//! ```
//!
//! [`content_digest`] names a verified request's signed content, for a
//! replay guard (identical content under a new, unsigned id).
//!
//! [`Scheme::event_id_at`] says where each provider puts its event id
//! ([`IdLocation`]); reading it out of a request, and Slack's
//! `url_verification` handshake, belong to the receiver.

mod discord;
mod hmac;
mod linear;
pub(crate) mod pairs;
mod request;
mod scheme;
mod standard_webhooks;
mod template;
mod twilio;

pub use crate::error::{Error, ErrorKind};
pub use crate::standard::DEFAULT_TOLERANCE_SECS;
pub use hmac::{Encoding, HmacAlgorithm, HmacConfig};
pub use request::{HeaderFn, Headers, Request, Verified};
pub use scheme::{IdLocation, Scheme, UnknownScheme};
pub use template::Template;

use crate::error::KeyError;
use crate::header::X_SIGNATURE;
use crate::seed;

/// Verifies `request` as `scheme` with any of `secrets`, as of `now` (unix
/// seconds), holding signed timestamps to `tolerance_secs` in both
/// directions (a generic HMAC's own tolerance, if set, wins).
///
/// Checks the configuration first (no secret, an unusable secret or an
/// invalid generic config is [`ErrorKind::Misconfigured`]), then what the
/// request carries (missing or malformed: [`ErrorKind::BadRequest`]), then
/// freshness and authenticity ([`ErrorKind::Unauthorized`]). Two follow
/// their reference libraries instead: Standard Webhooks checks the
/// timestamp before parsing the signature header, and Linear, whose
/// timestamp is inside the body, checks the MAC before the timestamp.
pub fn verify<H, S>(
    scheme: &Scheme,
    secrets: &[S],
    request: &Request<'_, H>,
    now: u64,
    tolerance_secs: u64,
) -> Result<Verified, Error>
where
    H: Headers + ?Sized,
    S: AsRef<str>,
{
    let text = || parse_secrets(secrets, text_key);
    match scheme {
        Scheme::StandardWebhooks => {
            let keys = parse_secrets(secrets, standard_webhooks::parse_key)?;
            standard_webhooks::verify(keys, request, now, tolerance_secs)
        }
        Scheme::Discord => {
            let keys = parse_secrets(secrets, discord::parse_key)?;
            discord::verify(&keys, request, now, tolerance_secs)
        }
        Scheme::Stripe => {
            pairs::verify_request(&pairs::STRIPE, &text()?, request, now, tolerance_secs)
        }
        Scheme::Paddle => {
            pairs::verify_request(&pairs::PADDLE, &text()?, request, now, tolerance_secs)
        }
        Scheme::SeedTimestamped => {
            pairs::verify_request(&pairs::SEED, &text()?, request, now, tolerance_secs)
        }
        Scheme::SeedSha256 => {
            seed::sha256::verify_keys(&text()?, request.header(X_SIGNATURE), request.body())?;
            Ok(Verified::default())
        }
        Scheme::GitHub => hmac::verify(&hmac::GITHUB, &text()?, request, now, tolerance_secs),
        Scheme::Shopify => hmac::verify(&hmac::SHOPIFY, &text()?, request, now, tolerance_secs),
        Scheme::Slack => hmac::verify(&hmac::SLACK, &text()?, request, now, tolerance_secs),
        Scheme::Square => hmac::verify(&hmac::SQUARE, &text()?, request, now, tolerance_secs),
        Scheme::Linear => linear::verify(&text()?, request, now, tolerance_secs),
        Scheme::Twilio => twilio::verify(&text()?, request),
        Scheme::Hmac(config) => {
            config.validate()?;
            hmac::verify(config, &text()?, request, now, tolerance_secs)
        }
    }
}

/// The SHA-256 of what `scheme` signs of a request it verified, in a canonical form: two
/// requests that verify with the same signed content give the same digest, whatever a sender
/// could change without a secret. For Twilio that is the URL without its port and the sorted,
/// deduplicated form params (the order and repeats of params, and the port, are not signed);
/// for every other scheme the exact body. Signed timestamps and ids are left out: the digest
/// names the content, for a replay guard on schemes that sign neither.
pub fn content_digest<H: Headers + ?Sized>(scheme: &Scheme, request: &Request<'_, H>) -> [u8; 32] {
    use sha2::{Digest as _, Sha256};
    match scheme {
        Scheme::Twilio => Sha256::digest(twilio::canonical_content(request.url(), request.body())),
        _ => Sha256::digest(request.body()),
    }
    .into()
}

/// A secret used as text: its UTF-8 bytes, which must not be empty.
pub(crate) fn text_key(secret: &str) -> Result<&[u8], KeyError> {
    if secret.is_empty() {
        Err(KeyError::Empty)
    } else {
        Ok(secret.as_bytes())
    }
}

/// Parses every secret with `parse`; none at all is [`Error::NoSecrets`].
fn parse_secrets<'s, S: AsRef<str>, T>(
    secrets: &'s [S],
    parse: impl Fn(&'s str) -> Result<T, KeyError>,
) -> Result<Vec<T>, Error> {
    if secrets.is_empty() {
        return Err(Error::NoSecrets);
    }
    secrets
        .iter()
        .map(|s| parse(s.as_ref()).map_err(Error::InvalidKey))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_SECRETS: [&str; 0] = [];

    #[test]
    fn no_secret_or_an_empty_one_is_a_misconfiguration_whatever_the_request() {
        let headers: [(&str, &str); 0] = [];
        let request = Request::new(&headers[..], b"", "");
        for scheme in Scheme::NAMED {
            let none = verify(&scheme, &NO_SECRETS, &request, 0, 300).unwrap_err();
            assert_eq!(none, Error::NoSecrets, "{scheme}");
            let empty = verify(&scheme, &[""], &request, 0, 300).unwrap_err();
            assert_eq!(empty.status(), 500, "{scheme}");
        }
    }

    #[test]
    fn an_invalid_generic_config_is_a_misconfiguration() {
        let config = HmacConfig::new("x-sig").with_template("{timestamp}{body}".parse().unwrap());
        let headers = [("x-sig", "00")];
        let request = Request::new(&headers[..], b"", "");
        let err = verify(&Scheme::Hmac(config), &["k"], &request, 0, 300).unwrap_err();
        assert_eq!((err.status(), err.reason()), (500, "invalid_config"));
    }

    #[test]
    fn text_keys_are_the_secret_bytes_as_configured() {
        assert_eq!(text_key("whsec_abc"), Ok(&b"whsec_abc"[..]));
        assert_eq!(text_key(""), Err(KeyError::Empty));
    }
}
