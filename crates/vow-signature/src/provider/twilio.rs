//! Twilio: `X-Twilio-Signature: <base64 HMAC-SHA1>` keyed with the auth
//! token, over the full URL followed by the POST parameters sorted by name
//! (then value, duplicates removed) as `name ‖ value` with no delimiter.
//!
//! For JSON bodies Twilio appends `bodySHA256=<hex SHA-256 of the body>` to
//! the URL and signs the URL alone; the body must then match that hash.
//! Twilio's own validator accepts the URL with and without its port (the
//! default one is added when absent), because Twilio's signing is
//! inconsistent there; so does this. The form and query decoding follows
//! `application/x-www-form-urlencoded`: `+` is a space, `%XX` a byte, and
//! anything else (a stray `%`) is kept as it is.

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq;

use crate::header::header_str;
use crate::provider::hmac::Encoding;
use crate::provider::{Error, Headers, Request, Verified};
use crate::symmetric::Digest;

/// `x-twilio-signature`.
pub(crate) const SIGNATURE: &str = "x-twilio-signature";
/// The query parameter carrying the body hash of a JSON request.
const BODY_SHA256: &[u8] = b"bodySHA256";

pub(crate) fn verify<H: Headers + ?Sized>(
    keys: &[&[u8]],
    request: &Request<'_, H>,
) -> Result<Verified, Error> {
    let raw = request.require(SIGNATURE)?;
    let signature = Encoding::Base64
        .decode(header_str(SIGNATURE, raw)?, Digest::Sha1.len())
        .ok_or(Error::MalformedHeader {
            header: SIGNATURE.into(),
            reason: "expected base64 of a 20-byte HMAC-SHA1",
        })?;
    let url = request.url();
    let body_hash = query(url)
        .find(|(name, value)| name == BODY_SHA256 && !value.is_empty())
        .map(|(_, value)| {
            let mut hash = [0u8; 32];
            hex::decode_to_slice(&value, &mut hash)
                .map(|()| hash)
                .map_err(|_| Error::MalformedUrl("`bodySHA256` is not 64 hex digits"))
        })
        .transpose()?;

    let signed_params = signed_params(request.body(), body_hash.is_some());

    let alternate = toggle_port(url);
    let matched = [Some(url), alternate.as_deref()]
        .into_iter()
        .flatten()
        .fold(false, |found, url| {
            let parts: [&[u8]; 2] = [url.as_bytes(), &signed_params];
            found | Digest::Sha1.any_matches(keys, &parts, &[&signature])
        });
    if !matched {
        return Err(Error::NoMatchingSignature);
    }
    if let Some(expected) = body_hash {
        let actual: [u8; 32] = Sha256::digest(request.body()).into();
        if !bool::from(actual.ct_eq(&expected)) {
            return Err(Error::BodyHashMismatch);
        }
    }
    Ok(Verified::default())
}

/// What Twilio signs after the URL: nothing for a JSON request (`json`: its URL carries the
/// body's hash), else the form's params sorted by name then value, duplicates removed, as
/// `name ‖ value`.
fn signed_params(body: &[u8], json: bool) -> Vec<u8> {
    let mut params: Vec<_> = match json {
        true => Vec::new(),
        false => form_pairs(body).collect(),
    };
    params.sort_unstable();
    params.dedup();
    params
        .into_iter()
        .flat_map(|(n, v)| [n, v])
        .flatten()
        .collect()
}

/// The signed content of a verified request in one canonical form, for
/// [`crate::provider::content_digest`]: the URL without its port, a NUL, and the signed
/// params. Requests that verify as the same signed content (params reordered or repeated, the
/// port added or dropped) give the same bytes.
pub(crate) fn canonical_content(url: &str, body: &[u8]) -> Vec<u8> {
    let json = query(url).any(|(name, value)| name == BODY_SHA256 && !value.is_empty());
    let portless = match toggle_port(url) {
        Some(other) if other.len() < url.len() => other,
        _ => url.to_owned(),
    };
    let mut content = portless.into_bytes();
    content.push(0);
    content.extend(signed_params(body, json));
    content
}

/// The decoded `name=value` pairs of a form-encoded text (a segment without
/// `=` is a name with an empty value; empty segments are skipped).
fn form_pairs(text: &[u8]) -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> + '_ {
    text.split(|&b| b == b'&')
        .filter(|segment| !segment.is_empty())
        .map(|segment| {
            let (name, value) = match segment.iter().position(|&b| b == b'=') {
                Some(i) => (&segment[..i], &segment[i + 1..]),
                None => (segment, &b""[..]),
            };
            (form_decode(name), form_decode(value))
        })
}

/// The decoded query parameters of `url` (between `?` and `#`).
fn query(url: &str) -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> + '_ {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    form_pairs(query.as_bytes())
}

/// `application/x-www-form-urlencoded` decoding of one name or value.
fn form_decode(text: &[u8]) -> Vec<u8> {
    let hex_digit = |b: u8| char::from(b).to_digit(16);
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        let escaped = match (b, text.get(i + 1), text.get(i + 2)) {
            (b'%', Some(&hi), Some(&lo)) => hex_digit(hi).zip(hex_digit(lo)),
            _ => None,
        };
        match escaped {
            // Two hex digits make at most 0xff.
            Some((hi, lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'%'));
                i += 3;
            }
            None => {
                out.push(if b == b'+' { b' ' } else { b });
                i += 1;
            }
        }
    }
    out
}

/// The URL with its port removed if it has one, or with the scheme's
/// default port (443 for `https`, else 80) added if not; `None` if it has
/// no `scheme://`.
fn toggle_port(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let host_start = authority.rfind('@').map_or(0, |i| i + 1);
    let (userinfo, host_port) = authority.split_at(host_start);
    // A port follows the last `:` that is not inside an IPv6 literal.
    let port_colon = host_port
        .rfind(':')
        .filter(|&i| !host_port[i..].contains(']'));
    let host_port = match port_colon {
        Some(i) => host_port[..i].to_owned(),
        None if scheme.eq_ignore_ascii_case("https") => format!("{host_port}:443"),
        None => format!("{host_port}:80"),
    };
    Some(format!("{scheme}://{userinfo}{host_port}{tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canonical_content_ignores_param_order_repeats_and_the_port() {
        let plain = canonical_content("https://h.com/p?a=1", b"B=2&A=1");
        assert_eq!(
            canonical_content("https://h.com:443/p?a=1", b"A=1&B=2&A=1"),
            plain
        );
        assert_ne!(canonical_content("https://h.com/p?a=2", b"A=1&B=2"), plain);
        assert_ne!(canonical_content("https://h.com/p?a=1", b"A=1&B=3"), plain);
        let json = "https://h.com/p?bodySHA256=00";
        assert_eq!(
            canonical_content(json, b"{}"),
            canonical_content(json, b"[]")
        );
    }

    #[test]
    fn form_decoding_handles_plus_escapes_and_stray_percents() {
        assert_eq!(form_decode(b"%2B1415+x"), b"+1415 x");
        assert_eq!(form_decode(b"100%"), b"100%");
        assert_eq!(form_decode(b"%zz%4"), b"%zz%4");
        assert_eq!(form_decode(b"%ff%C3%A9"), b"\xff\xc3\xa9");
    }

    #[test]
    fn form_pairs_keep_empty_values_and_skip_empty_segments() {
        let pairs: Vec<_> = form_pairs(b"a=1&&b=&c&d=x=y").collect();
        let expected: Vec<(Vec<u8>, Vec<u8>)> = [("a", "1"), ("b", ""), ("c", ""), ("d", "x=y")]
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(pairs, expected);
    }

    #[test]
    fn query_stops_at_the_fragment() {
        let names: Vec<_> = query("https://h/p?a=1&b=2#c=3").map(|(n, _)| n).collect();
        assert_eq!(names, [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(query("https://h/p").count(), 0);
    }

    #[test]
    fn toggling_the_port_removes_any_port_or_adds_the_default_one() {
        let t = |u| toggle_port(u);
        assert_eq!(
            t("https://h.com/p?q=1").as_deref(),
            Some("https://h.com:443/p?q=1")
        );
        assert_eq!(t("http://h.com").as_deref(), Some("http://h.com:80"));
        assert_eq!(
            t("https://h.com:1234/p").as_deref(),
            Some("https://h.com/p")
        );
        assert_eq!(
            t("https://u:pw@h.com/p").as_deref(),
            Some("https://u:pw@h.com:443/p")
        );
        assert_eq!(
            t("https://[::1]:8443/p").as_deref(),
            Some("https://[::1]/p")
        );
        assert_eq!(t("https://[::1]/p").as_deref(), Some("https://[::1]:443/p"));
        assert_eq!(t("no scheme"), None);
    }
}
