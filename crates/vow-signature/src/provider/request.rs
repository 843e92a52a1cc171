//! The borrowed view of an inbound request that verification reads — header
//! lookup, exact body bytes, full URL — and [`Verified`], what it learned.
//!
//! Nothing here copies the body or parses more than a header lookup. Header
//! names are matched ASCII case-insensitively; the crate always asks in
//! lowercase.

use std::fmt;
use std::marker::PhantomData;

use crate::error::Error;

/// Header lookup by name.
///
/// Implemented for slices, arrays and `Vec`s of `(name, value)` pairs of
/// anything byte-like (`&str`, `String`, `&[u8]`, `Vec<u8>`), and for a
/// closure wrapped in [`HeaderFn`] (e.g. over `http::HeaderMap`).
pub trait Headers {
    /// The value of header `name` (lowercase ASCII), compared
    /// case-insensitively; the first one if it is repeated.
    fn get(&self, name: &str) -> Option<&[u8]>;
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> Headers for [(N, V)] {
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(n, _)| n.as_ref().eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v.as_ref())
    }
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>, const K: usize> Headers for [(N, V); K] {
    fn get(&self, name: &str) -> Option<&[u8]> {
        Headers::get(self.as_slice(), name)
    }
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> Headers for Vec<(N, V)> {
    fn get(&self, name: &str) -> Option<&[u8]> {
        Headers::get(self.as_slice(), name)
    }
}

/// Adapts a lookup closure to [`Headers`], e.g.
/// `HeaderFn::new(|n: &str| map.get(n).map(|v| v.as_bytes()))` over an
/// `http::HeaderMap` (whose lookups are already case-insensitive).
#[derive(Clone, Copy)]
pub struct HeaderFn<'a, F> {
    lookup: F,
    /// Ties the values' lifetime to the adapter, so lookups may return them.
    values: PhantomData<&'a [u8]>,
}

impl<'a, F: Fn(&str) -> Option<&'a [u8]>> HeaderFn<'a, F> {
    /// Wraps `lookup`, which is given lowercase names.
    pub fn new(lookup: F) -> Self {
        Self {
            lookup,
            values: PhantomData,
        }
    }
}

impl<'a, F: Fn(&str) -> Option<&'a [u8]>> Headers for HeaderFn<'a, F> {
    fn get(&self, name: &str) -> Option<&[u8]> {
        (self.lookup)(name)
    }
}

/// What verification needs from one inbound request, borrowed.
///
/// `url` is the full URL *as the provider addressed it* (scheme, host,
/// optional port, path and query): Square and Twilio sign it, so behind a
/// proxy the receiver must rebuild the public URL, not the internal one.
#[derive(Clone, Copy)]
pub struct Request<'a, H: ?Sized> {
    headers: &'a H,
    body: &'a [u8],
    url: &'a str,
}

impl<'a, H: Headers + ?Sized> Request<'a, H> {
    /// Borrows the headers, the exact raw body bytes and the full URL.
    pub fn new(headers: &'a H, body: &'a [u8], url: &'a str) -> Self {
        Self { headers, body, url }
    }

    /// The value of header `name` (lowercase), if present.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers.get(name)
    }

    /// The exact raw body bytes.
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// The full request URL as the provider addressed it.
    pub fn url(&self) -> &'a str {
        self.url
    }

    /// The value of header `name`, or [`Error::MissingHeader`] naming it.
    pub(crate) fn require(&self, name: &'static str) -> Result<&'a [u8], Error> {
        self.header(name).ok_or(Error::MissingHeader(name.into()))
    }
}

impl<H: ?Sized> fmt::Debug for Request<'_, H> {
    /// Shows only the body length: headers hold signatures and URLs may hold
    /// tokens.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// What a successful verification learned that the receiver needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified {
    /// The provider's signed timestamp (unix seconds), when the scheme has one.
    pub timestamp: Option<u64>,
    /// The signed message id, when the scheme has one (`webhook-id` for
    /// Standard Webhooks, the configured id header for generic HMAC).
    pub id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lookup_ignores_ascii_case_and_takes_the_first_of_repeated_headers() {
        let pairs = [("X-Hub-Signature-256", "a"), ("x-hub-signature-256", "b")];
        assert_eq!(pairs.get("x-hub-signature-256"), Some(&b"a"[..]));
        assert_eq!(pairs.get("x-hub-signature"), None);
        let owned: Vec<(Vec<u8>, Vec<u8>)> = vec![(b"Stripe-Signature".to_vec(), b"\xff".to_vec())];
        assert_eq!(owned.get("stripe-signature"), Some(&b"\xff"[..]));
    }

    #[test]
    fn a_closure_can_serve_as_the_header_lookup() {
        let value = b"v".to_vec();
        let lookup = HeaderFn::new(|n: &str| (n == "x-a").then_some(value.as_slice()));
        let request = Request::new(&lookup, b"body", "https://h/p");
        assert_eq!(request.header("x-a"), Some(&b"v"[..]));
        assert_eq!(
            request.require("x-b"),
            Err(Error::MissingHeader("x-b".into()))
        );
    }

    #[test]
    fn debug_of_a_request_shows_neither_headers_nor_url() {
        let pairs = [("x-signature", "sha256=deadbeef")];
        let request = Request::new(&pairs[..], b"{}", "https://h/p?token=t0ps3cret");
        let shown = format!("{request:?}");
        assert!(
            !shown.contains("deadbeef") && !shown.contains("t0ps3cret"),
            "{shown}"
        );
        assert!(shown.contains("body_len: 2"), "{shown}");
    }
}
