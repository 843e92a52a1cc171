//! The generic HMAC scheme ([`HmacConfig`]), and the providers that are
//! fixed instances of it: GitHub, Shopify, Slack, Square, and Linear's
//! signature half (its timestamp lives in the body; see `linear`).
//!
//! One engine serves them all: look the signature header up, strip a
//! prefix, decode hex or base64 of exactly the MAC's length, read the
//! timestamp and id headers the template needs, check the timestamp against
//! the tolerance, then compare HMAC(secret, template) for every secret in
//! constant time. All 400-class checks run before any 401-class one.

use std::borrow::Cow;
use std::str::FromStr;

use crate::header::{check_tolerance, header_str, parse_timestamp};
use crate::key::decode_signature;
use crate::provider::template::{Part, Template, BODY};
use crate::provider::{Error, Headers, Request, Verified};
use crate::symmetric::Digest;

/// How the signature header encodes the MAC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// Hex digits, either case.
    #[default]
    Hex,
    /// Standard, padded base64.
    Base64,
}

impl Encoding {
    /// The configuration name: `"hex"` or `"base64"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hex => "hex",
            Self::Base64 => "base64",
        }
    }

    /// Decodes `text` into exactly `len` bytes, or `None`. Checks the text
    /// length first, so oversized input costs nothing.
    pub(crate) fn decode(self, text: &str, len: usize) -> Option<Vec<u8>> {
        match self {
            Self::Hex => {
                let mut out = vec![0u8; len];
                hex::decode_to_slice(text, &mut out).ok()?;
                Some(out)
            }
            Self::Base64 => {
                if text.len() != len.div_ceil(3) * 4 {
                    return None;
                }
                let (buf, n) = decode_signature::<64>(text)?;
                (n == len).then(|| buf[..n].to_vec())
            }
        }
    }

    /// Encodes a MAC (for tests).
    #[cfg(test)]
    pub(crate) fn encode(self, mac: &[u8]) -> String {
        match self {
            Self::Hex => hex::encode(mac),
            Self::Base64 => {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.encode(mac)
            }
        }
    }
}

impl FromStr for Encoding {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        [Self::Hex, Self::Base64]
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or(Error::InvalidConfig("encoding must be `hex` or `base64`"))
    }
}

/// The hash of a generic HMAC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HmacAlgorithm {
    /// HMAC-SHA256 (32-byte MAC).
    #[default]
    Sha256,
    /// HMAC-SHA512 (64-byte MAC).
    Sha512,
}

impl HmacAlgorithm {
    /// The configuration name: `"sha256"` or `"sha512"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }

    fn digest(self) -> Digest {
        match self {
            Self::Sha256 => Digest::Sha256,
            Self::Sha512 => Digest::Sha512,
        }
    }
}

impl FromStr for HmacAlgorithm {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        [Self::Sha256, Self::Sha512]
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or(Error::InvalidConfig(
                "algorithm must be `sha256` or `sha512`",
            ))
    }
}

/// A generic HMAC scheme: which header carries the MAC and how, what is
/// signed, and which headers carry the timestamp and id.
///
/// Built from [`HmacConfig::new`] with `with_*` setters; defaults are no
/// prefix, hex, SHA-256, template `{body}`, no timestamp or id header, and
/// the tolerance passed to [`verify`](crate::provider::verify). The key is
/// the secret text as configured (its UTF-8 bytes). Header names are
/// stored lowercase.
///
/// ```
/// use vow_signature::provider::{Encoding, HmacConfig, Template};
/// let config = HmacConfig::new("X-Signature")
///     .with_prefix("sha512=")
///     .with_encoding(Encoding::Base64)
///     .with_template("{timestamp}.{body}".parse()?)
///     .with_timestamp_header("X-Timestamp");
/// assert_eq!(config.signature_header(), "x-signature");
/// # Ok::<(), vow_signature::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HmacConfig {
    signature_header: Cow<'static, str>,
    /// A second name for the signature header (Shopify's Events preview).
    alias: Option<&'static str>,
    prefix: Option<Cow<'static, str>>,
    encoding: Encoding,
    algorithm: HmacAlgorithm,
    template: Template,
    timestamp_header: Option<Cow<'static, str>>,
    id_header: Option<Cow<'static, str>>,
    tolerance_secs: Option<u64>,
}

fn lowercase(name: &str) -> Cow<'static, str> {
    Cow::Owned(name.to_ascii_lowercase())
}

impl HmacConfig {
    /// A SHA-256, hex, `{body}` scheme whose MAC is in `signature_header`.
    pub fn new(signature_header: &str) -> Self {
        Self {
            signature_header: lowercase(signature_header),
            ..preset("", None, Encoding::Hex, BODY, None)
        }
    }

    /// The prefix the signature header must start with (stripped before
    /// decoding), e.g. `sha256=`. An empty prefix means none.
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.prefix = (!prefix.is_empty()).then(|| Cow::Owned(prefix.to_owned()));
        self
    }

    /// How the MAC is encoded.
    pub fn with_encoding(mut self, encoding: Encoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// The hash under the HMAC.
    pub fn with_algorithm(mut self, algorithm: HmacAlgorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// What is signed.
    pub fn with_template(mut self, template: Template) -> Self {
        self.template = template;
        self
    }

    /// The header carrying a unix timestamp (seconds), which is then always
    /// checked against the tolerance.
    pub fn with_timestamp_header(mut self, name: &str) -> Self {
        self.timestamp_header = Some(lowercase(name));
        self
    }

    /// The header carrying the message id, returned in [`Verified::id`].
    pub fn with_id_header(mut self, name: &str) -> Self {
        self.id_header = Some(lowercase(name));
        self
    }

    /// A tolerance (seconds, both directions) overriding the one passed to
    /// [`verify`](crate::provider::verify).
    pub fn with_tolerance_secs(mut self, tolerance_secs: u64) -> Self {
        self.tolerance_secs = Some(tolerance_secs);
        self
    }

    /// The signature header name (lowercase).
    pub fn signature_header(&self) -> &str {
        &self.signature_header
    }

    /// The required signature prefix, if any.
    pub fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// The MAC encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The hash under the HMAC.
    pub fn algorithm(&self) -> HmacAlgorithm {
        self.algorithm
    }

    /// The signed-content template.
    pub fn template(&self) -> &Template {
        &self.template
    }

    /// The timestamp header name (lowercase), if any.
    pub fn timestamp_header(&self) -> Option<&str> {
        self.timestamp_header.as_deref()
    }

    /// The id header name (lowercase), if any.
    pub fn id_header(&self) -> Option<&str> {
        self.id_header.as_deref()
    }

    /// The tolerance override, if any.
    pub fn tolerance_secs(&self) -> Option<u64> {
        self.tolerance_secs
    }

    /// Checks that the configuration can work: a signature header name, and
    /// a header for every placeholder the template uses.
    pub fn validate(&self) -> Result<(), Error> {
        if self.signature_header.is_empty() {
            return Err(Error::InvalidConfig("the signature header name is empty"));
        }
        if self.template.uses(&Part::Timestamp) && self.timestamp_header.is_none() {
            return Err(Error::InvalidConfig(
                "the template uses {timestamp} but no timestamp header is set",
            ));
        }
        if self.template.uses(&Part::Id) && self.id_header.is_none() {
            return Err(Error::InvalidConfig(
                "the template uses {id} but no id header is set",
            ));
        }
        Ok(())
    }

    /// Decodes the signature header value into MAC bytes.
    fn decode_signature(&self, raw: &[u8]) -> Result<Vec<u8>, Error> {
        let header = &self.signature_header;
        let malformed = |reason| Error::MalformedHeader {
            header: header.clone(),
            reason,
        };
        let text = header_str("", raw).map_err(|e| e.with_header(header.clone()))?;
        let text = match &self.prefix {
            Some(prefix) => text
                .strip_prefix(prefix.as_ref())
                .ok_or_else(|| malformed("missing the signature prefix"))?,
            None => text,
        };
        self.encoding
            .decode(text, self.algorithm.digest().len())
            .ok_or_else(|| {
                malformed(match self.encoding {
                    Encoding::Hex => "expected the MAC in hex",
                    Encoding::Base64 => "expected the MAC in base64",
                })
            })
    }
}

impl HmacConfig {
    /// Adds a second name for the signature header (presets only).
    const fn with_alias(mut self, alias: &'static str) -> Self {
        self.alias = Some(alias);
        self
    }
}

/// A fixed provider instance (SHA-256, static names).
const fn preset(
    signature_header: &'static str,
    prefix: Option<&'static str>,
    encoding: Encoding,
    template: Template,
    timestamp_header: Option<&'static str>,
) -> HmacConfig {
    HmacConfig {
        signature_header: Cow::Borrowed(signature_header),
        alias: None,
        prefix: match prefix {
            Some(p) => Some(Cow::Borrowed(p)),
            None => None,
        },
        encoding,
        algorithm: HmacAlgorithm::Sha256,
        template,
        timestamp_header: match timestamp_header {
            Some(h) => Some(Cow::Borrowed(h)),
            None => None,
        },
        id_header: None,
        tolerance_secs: None,
    }
}

/// GitHub: `X-Hub-Signature-256: sha256=<hex HMAC(body)>` (legacy SHA-1
/// `X-Hub-Signature` is not accepted).
pub(crate) const GITHUB: HmacConfig = preset(
    "x-hub-signature-256",
    Some("sha256="),
    Encoding::Hex,
    BODY,
    None,
);

/// Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC(body)>`, or
/// `Shopify-Hmac-Sha256` (Events developer preview).
pub(crate) const SHOPIFY: HmacConfig = HmacConfig::with_alias(
    preset("x-shopify-hmac-sha256", None, Encoding::Base64, BODY, None),
    "shopify-hmac-sha256",
);

/// Slack: `X-Slack-Signature: v0=<hex HMAC("v0:" ts ":" body)>` with the
/// timestamp in `X-Slack-Request-Timestamp`.
pub(crate) const SLACK: HmacConfig = preset(
    "x-slack-signature",
    Some("v0="),
    Encoding::Hex,
    Template(Cow::Borrowed(&[
        Part::Literal(Cow::Borrowed("v0:")),
        Part::Timestamp,
        Part::Literal(Cow::Borrowed(":")),
        Part::Body,
    ])),
    Some("x-slack-request-timestamp"),
);

/// Square: `x-square-hmacsha256-signature: <base64 HMAC(url body)>`.
pub(crate) const SQUARE: HmacConfig = preset(
    "x-square-hmacsha256-signature",
    None,
    Encoding::Base64,
    Template(Cow::Borrowed(&[Part::Url, Part::Body])),
    None,
);

/// Linear's signature: `Linear-Signature: <hex HMAC(body)>`.
pub(crate) const LINEAR: HmacConfig = preset("linear-signature", None, Encoding::Hex, BODY, None);

/// Verifies `request` against `config` with the secret texts `keys`.
pub(crate) fn verify<H: Headers + ?Sized>(
    config: &HmacConfig,
    keys: &[&[u8]],
    request: &Request<'_, H>,
    now: u64,
    tolerance_secs: u64,
) -> Result<Verified, Error> {
    let require = |name: &Cow<'static, str>| {
        request
            .header(name)
            .ok_or_else(|| Error::MissingHeader(name.clone()))
    };
    let raw_sig = request
        .header(&config.signature_header)
        .or_else(|| config.alias.and_then(|alias| request.header(alias)))
        .ok_or_else(|| Error::MissingHeader(config.signature_header.clone()))?;
    let timestamp = match &config.timestamp_header {
        Some(name) => {
            let raw = require(name)?;
            let ts = parse_timestamp("", raw).map_err(|e| e.with_header(name.clone()))?;
            Some((raw, ts))
        }
        None => None,
    };
    let id = match &config.id_header {
        Some(name) => {
            let raw = require(name)?;
            let text = header_str("", raw).map_err(|e| e.with_header(name.clone()))?;
            Some((raw, text))
        }
        None => None,
    };
    let signature = config.decode_signature(raw_sig)?;
    if let Some((_, ts)) = timestamp {
        check_tolerance(ts, now, config.tolerance_secs.unwrap_or(tolerance_secs))?;
    }

    let parts: Vec<&[u8]> = config
        .template
        .0
        .iter()
        .map(|part| match part {
            Part::Literal(text) => text.as_bytes(),
            Part::Timestamp => timestamp.map(|(raw, _)| raw).unwrap_or_default(),
            Part::Id => id.map(|(raw, _)| raw).unwrap_or_default(),
            Part::Body => request.body(),
            Part::Url => request.url().as_bytes(),
        })
        .collect();
    if config
        .algorithm
        .digest()
        .any_matches(keys, &parts, &[&signature])
    {
        Ok(Verified {
            timestamp: timestamp.map(|(_, ts)| ts),
            id: id.map(|(_, text)| text.to_owned()),
        })
    } else {
        Err(Error::NoMatchingSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slack_preset_signs_version_timestamp_and_body() {
        assert_eq!(SLACK.template.to_string(), "v0:{timestamp}:{body}");
        assert_eq!(SQUARE.template.to_string(), "{url}{body}");
    }

    #[test]
    fn a_config_whose_template_needs_a_missing_header_does_not_validate() {
        let ts: Template = "{timestamp}.{body}".parse().unwrap();
        let id: Template = "{id}.{body}".parse().unwrap();
        assert!(HmacConfig::new("x-sig")
            .with_template(ts.clone())
            .validate()
            .is_err());
        assert!(HmacConfig::new("x-sig")
            .with_template(id.clone())
            .validate()
            .is_err());
        assert!(HmacConfig::new("").validate().is_err());
        let ok = HmacConfig::new("x-sig")
            .with_template(ts)
            .with_timestamp_header("x-ts");
        assert_eq!(ok.validate(), Ok(()));
        assert!(HmacConfig::new("x-sig")
            .with_template(id)
            .with_id_header("X-Id")
            .validate()
            .is_ok());
    }

    #[test]
    fn setters_lowercase_header_names_and_treat_an_empty_prefix_as_none() {
        let c = HmacConfig::new("X-Sig")
            .with_prefix("")
            .with_timestamp_header("X-TS")
            .with_id_header("X-Id")
            .with_tolerance_secs(5)
            .with_algorithm(HmacAlgorithm::Sha512);
        assert_eq!(
            (
                c.signature_header(),
                c.prefix(),
                c.timestamp_header(),
                c.id_header()
            ),
            ("x-sig", None, Some("x-ts"), Some("x-id"))
        );
        assert_eq!(
            (c.tolerance_secs(), c.algorithm(), c.encoding()),
            (Some(5), HmacAlgorithm::Sha512, Encoding::Hex)
        );
    }

    #[test]
    fn encodings_and_algorithms_parse_from_their_names() {
        assert_eq!("base64".parse::<Encoding>(), Ok(Encoding::Base64));
        assert_eq!("sha512".parse::<HmacAlgorithm>(), Ok(HmacAlgorithm::Sha512));
        assert!("HEX".parse::<Encoding>().is_err());
        assert!("sha1".parse::<HmacAlgorithm>().is_err());
    }

    #[test]
    fn decoding_demands_exactly_the_mac_length() {
        let mac = [7u8; 32];
        for enc in [Encoding::Hex, Encoding::Base64] {
            let text = enc.encode(&mac);
            assert_eq!(enc.decode(&text, 32), Some(mac.to_vec()));
            assert_eq!(enc.decode(&text, 20), None);
            assert_eq!(enc.decode(&text, 64), None);
            assert_eq!(enc.decode(&text[1..], 32), None);
        }
        assert_eq!(
            Encoding::Hex.decode(&"AB".repeat(20), 20),
            Some(vec![0xab; 20])
        );
        assert_eq!(
            Encoding::Base64.decode("not base64 at all!!!!!!!", 16),
            None
        );
        assert_eq!(
            Encoding::Base64.decode(&Encoding::Base64.encode(&[1u8; 64]), 64),
            Some(vec![1; 64])
        );
    }

    #[test]
    fn a_missing_prefix_or_bad_encoding_is_a_malformed_header_naming_the_configured_header() {
        let c = HmacConfig::new("X-My-Sig").with_prefix("sha256=");
        for raw in [&b"00"[..], b"sha256=zz", b"sha1=00", b"\xff"] {
            match c.decode_signature(raw) {
                Err(Error::MalformedHeader { header, .. }) => assert_eq!(header, "x-my-sig"),
                other => panic!("{raw:?}: {other:?}"),
            }
        }
    }
}
