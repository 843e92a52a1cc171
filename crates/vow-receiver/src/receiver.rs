//! [`Receiver`]: one source's validated configuration ([`Config`]: scheme, secrets, tolerance,
//! where the event id and the account are, as [`Locator`]s) and [`Receiver::accept`], which
//! verifies the exact raw bytes first and only then reads the identity out of the headers or the
//! body. Pure: the clock is passed in, nothing is stored.

use std::fmt;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::Value;
use vow_signature::provider::{
    self, Headers, IdLocation, Request, Scheme, Verified, DEFAULT_TOLERANCE_SECS,
};
use vow_signature::KeyError;

use crate::event::{Delivery, Identity, PayloadDigest};
use crate::rejection::{Field, Rejection, MAX_IDENTITY_LEN};

/// Where a part of the identity is read from, after verification.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Locator {
    /// A request header (name matched case-insensitively), e.g. `x-github-delivery`.
    Header(String),
    /// An RFC 6901 JSON pointer into the body, e.g. `/id`. The body is parsed only once it has
    /// been verified.
    JsonPointer(String),
    /// The message id the scheme signs: Standard Webhooks' `webhook-id` (or `svix-id`), a
    /// generic HMAC's id header. Authenticated, so preferred where there is one.
    SignedId,
}

impl From<IdLocation<'_>> for Locator {
    fn from(at: IdLocation<'_>) -> Self {
        match at {
            IdLocation::Header(name) => Self::Header(name.into()),
            IdLocation::Pointer(pointer) => Self::JsonPointer(pointer.into()),
            IdLocation::Signed => Self::SignedId,
        }
    }
}

impl Locator {
    /// Where `scheme` documents its event id ([`Scheme::event_id_at`], the table in the crate
    /// docs), in order: the first one present wins. Empty for a generic HMAC without an id
    /// header.
    pub fn event_id_of(scheme: &Scheme) -> Vec<Self> {
        scheme
            .event_id_at()
            .iter()
            .copied()
            .map(Self::from)
            .collect()
    }

    /// The text at this place: `None` when it is absent, JSON `null` or empty.
    fn read<H: Headers + ?Sized>(
        &self,
        field: Field,
        headers: &H,
        verified: &Verified,
        body: &mut Body<'_>,
    ) -> Result<Option<String>, Rejection> {
        let text = match self {
            Self::Header(name) => match headers.get(name) {
                None => None,
                Some(raw) => Some(
                    std::str::from_utf8(raw)
                        .map_err(|_| Rejection::NotText(field))?
                        .to_owned(),
                ),
            },
            Self::SignedId => verified.id.clone(),
            Self::JsonPointer(pointer) => match body.json(field)?.pointer(pointer) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(n.to_string()),
                Some(_) => return Err(Rejection::NotText(field)),
            },
        };
        match text {
            Some(t) if t.len() > MAX_IDENTITY_LEN => Err(Rejection::TooLong(field)),
            Some(t) if t.is_empty() => Ok(None),
            other => Ok(other),
        }
    }
}

/// The verified body, parsed as JSON at most once and only when a [`Locator`] asks.
struct Body<'a> {
    raw: &'a [u8],
    json: Option<Value>,
}

impl Body<'_> {
    fn json(&mut self, field: Field) -> Result<&Value, Rejection> {
        let json = match self.json.take() {
            Some(json) => json,
            None => serde_json::from_slice(self.raw).map_err(|_| Rejection::BodyNotJson(field))?,
        };
        Ok(self.json.insert(json))
    }
}

/// One source's settings, checked by [`Receiver::new`].
#[derive(Clone)]
pub struct Config {
    source: String,
    scheme: Scheme,
    secrets: Vec<String>,
    tolerance_secs: u64,
    /// Where the event id is, in order: the first one present wins.
    event_id: Vec<Locator>,
    account: Option<Locator>,
}

impl Config {
    /// Deliveries from `source` (the name its claims are scoped by, e.g. `"stripe"`), signed as
    /// `scheme` with any of `secrets` (several while one rotates out). Defaults: the tolerance
    /// [`DEFAULT_TOLERANCE_SECS`] (both directions), the event id where the scheme documents it
    /// ([`Locator::event_id_of`]), no account (`""`).
    pub fn new<S: Into<String>>(
        source: &str,
        scheme: Scheme,
        secrets: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            source: source.to_owned(),
            event_id: Locator::event_id_of(&scheme),
            scheme,
            secrets: secrets.into_iter().map(Into::into).collect(),
            tolerance_secs: DEFAULT_TOLERANCE_SECS,
            account: None,
        }
    }

    /// The same with signed timestamps held to `secs` either side of now.
    pub fn with_tolerance_secs(self, secs: u64) -> Self {
        Self {
            tolerance_secs: secs,
            ..self
        }
    }

    /// The same with the event id read from `at` (instead of the scheme's default places);
    /// `None`: no delivery is ever deduplicated.
    pub fn with_event_id(self, at: Option<Locator>) -> Self {
        Self {
            event_id: at.into_iter().collect(),
            ..self
        }
    }

    /// The same with the account read from `at` (absent there: `""`).
    pub fn with_account(self, at: Locator) -> Self {
        Self {
            account: Some(at),
            ..self
        }
    }
}

impl fmt::Debug for Config {
    /// Counts the secrets, never shows them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("source", &self.source)
            .field("scheme", &self.scheme.as_str())
            .field(
                "secrets",
                &format_args!("[{} redacted]", self.secrets.len()),
            )
            .field("tolerance_secs", &self.tolerance_secs)
            .field("event_id", &self.event_id)
            .field("account", &self.account)
            .finish()
    }
}

/// Why a [`Config`] cannot work. Names the problem, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The source name is empty.
    #[error("the source name is empty")]
    EmptySource,
    /// No secret is configured.
    #[error("no secret is configured for source `{0}`")]
    NoSecrets(String),
    /// A secret cannot be used by the scheme.
    #[error("secret #{index} of source `{source_name}` cannot be used")]
    InvalidSecret {
        /// The source.
        source_name: String,
        /// Its position among the secrets, from 0.
        index: usize,
        /// Why.
        #[source]
        cause: KeyError,
    },
    /// The generic HMAC's own configuration is invalid.
    #[error("the scheme of source `{0}` is misconfigured")]
    Scheme(String, #[source] provider::Error),
    /// A locator's header name is empty, or its pointer does not start with `/`.
    #[error(
        "the {0} locator of source `{1}` is invalid: a header name, or a JSON pointer from `/`"
    )]
    InvalidLocator(Field, String),
    /// [`Locator::SignedId`] for a scheme that signs no id.
    #[error("source `{0}` reads a signed id, but its scheme signs none")]
    NoSignedId(String),
}

/// A source's verified configuration: makes [`Delivery`]s out of requests.
#[derive(Debug, Clone)]
pub struct Receiver {
    config: Config,
}

impl Receiver {
    /// Checks `config`: a source name, at least one secret and every secret usable by the
    /// scheme, a valid generic HMAC, and locators that can find something.
    pub fn new(mut config: Config) -> Result<Self, ConfigError> {
        for locator in config.event_id.iter_mut().chain(&mut config.account) {
            if let Locator::Header(name) = locator {
                name.make_ascii_lowercase(); // `Headers::get` is asked in lowercase
            }
        }
        let source = &config.source;
        if source.is_empty() {
            return Err(ConfigError::EmptySource);
        }
        if config.secrets.is_empty() {
            return Err(ConfigError::NoSecrets(source.clone()));
        }
        for (index, secret) in config.secrets.iter().enumerate() {
            config
                .scheme
                .check_secret(secret)
                .map_err(|cause| ConfigError::InvalidSecret {
                    source_name: source.clone(),
                    index,
                    cause,
                })?;
        }
        if let Scheme::Hmac(hmac) = &config.scheme {
            hmac.validate()
                .map_err(|e| ConfigError::Scheme(source.clone(), e))?;
        }
        let event_ids = config.event_id.iter().map(|at| (Field::EventId, at));
        for (field, locator) in
            event_ids.chain(config.account.iter().map(|at| (Field::Account, at)))
        {
            let valid = match locator {
                Locator::Header(name) => !name.is_empty(),
                Locator::JsonPointer(pointer) => pointer.starts_with('/'),
                Locator::SignedId => {
                    if !config.scheme.signs_id() {
                        return Err(ConfigError::NoSignedId(source.clone()));
                    }
                    true
                }
            };
            if !valid {
                return Err(ConfigError::InvalidLocator(field, source.clone()));
            }
        }
        Ok(Self { config })
    }

    /// The source name.
    pub fn source(&self) -> &str {
        &self.config.source
    }

    /// Verifies a delivery as it arrived — `headers`, the exact raw `body`, the full `url` as the
    /// provider addressed it (only Square and Twilio sign it; `""` will do for the others) — as
    /// of `now`, then reads its identity. The body is not parsed before the signature is
    /// checked, and not at all when no locator points into it.
    pub fn accept<H: Headers + ?Sized>(
        &self,
        headers: &H,
        body: Bytes,
        url: &str,
        now: DateTime<Utc>,
    ) -> Result<Delivery, Rejection> {
        let c = &self.config;
        let unix = u64::try_from(now.timestamp()).unwrap_or(0);
        let request = Request::new(headers, &body, url);
        let verified = provider::verify(&c.scheme, &c.secrets, &request, unix, c.tolerance_secs)?;
        let mut parsed = Body {
            raw: &body,
            json: None,
        };
        let mut first = |field, places: &[Locator]| -> Result<Option<String>, Rejection> {
            for at in places {
                if let Some(text) = at.read(field, headers, &verified, &mut parsed)? {
                    return Ok(Some(text));
                }
            }
            Ok(None)
        };
        let event_id = first(Field::EventId, &c.event_id)?;
        let account = first(Field::Account, c.account.as_slice())?.unwrap_or_default();
        Ok(Delivery {
            identity: event_id.map(|id| Identity::new(&c.source, &account, &id)),
            digest: PayloadDigest::of(&body),
            body,
            verified,
            received_at: now,
        })
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};
    use vow_signature::provider::HmacConfig;

    use super::*;

    const SECRET: &str = "It's a Secret to Everybody";

    /// GitHub's signature of `body`, computed as GitHub documents it.
    fn github_signature(body: &[u8]) -> String {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(body);
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    fn github(config: impl FnOnce(Config) -> Config) -> Receiver {
        Receiver::new(config(Config::new("github", Scheme::GitHub, [SECRET]))).unwrap()
    }

    /// `receiver` accepting `body`, signed, with `headers` besides the signature.
    fn accept(
        receiver: &Receiver,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Delivery, Rejection> {
        let signature = github_signature(body.as_bytes());
        let mut all = vec![("X-Hub-Signature-256", signature.as_str())];
        all.extend_from_slice(headers);
        let body = Bytes::copy_from_slice(body.as_bytes());
        receiver.accept(&all[..], body, "", DateTime::UNIX_EPOCH)
    }

    fn event_id(delivery: &Delivery) -> Option<&str> {
        delivery.identity().map(Identity::event_id)
    }

    #[test]
    fn an_authentic_delivery_has_its_identity_and_the_digest_of_its_raw_bytes() {
        let body = r#"{"action":"opened"}"#;
        let delivery = accept(&github(|c| c), &[("X-GitHub-Delivery", "d-1")], body).unwrap();
        assert_eq!(
            delivery.identity(),
            Some(&Identity::new("github", "", "d-1"))
        );
        assert_eq!(delivery.digest(), &PayloadDigest::of(body.as_bytes()));
        assert_eq!(&delivery.body()[..], body.as_bytes());
        let unkeyed = accept(&github(|c| c), &[], body).unwrap();
        assert_eq!(unkeyed.identity(), None, "no id, no identity");
    }

    #[test]
    fn the_body_is_not_read_before_its_signature_is_checked() {
        let receiver = github(|c| c.with_event_id(Some(Locator::JsonPointer("/id".into()))));
        let headers = [("X-Hub-Signature-256", github_signature(b"other bytes"))];
        let err = receiver
            .accept(
                &headers[..],
                Bytes::from_static(b"not json"),
                "",
                DateTime::UNIX_EPOCH,
            )
            .unwrap_err();
        assert_eq!((err.status(), err.reason()), (401, "signature_mismatch"));
        let err = accept(&receiver, &[], "not json").unwrap_err();
        assert_eq!(err, Rejection::BodyNotJson(Field::EventId));
    }

    #[test]
    fn a_pointer_reads_a_string_or_an_integer_and_absent_null_or_empty_is_no_id() {
        let receiver = github(|c| c.with_event_id(Some(Locator::JsonPointer("/event/id".into()))));
        let cases = [
            (r#"{"event":{"id":"evt_1"}}"#, Some("evt_1")),
            (r#"{"event":{"id":42}}"#, Some("42")),
            (r#"{"event":{"id":null}}"#, None),
            (r#"{"event":{"id":""}}"#, None),
            (r#"{"event":{}}"#, None),
            ("[]", None),
        ];
        for (body, id) in cases {
            assert_eq!(
                event_id(&accept(&receiver, &[], body).unwrap()),
                id,
                "{body}"
            );
        }
    }

    #[test]
    fn an_identity_that_is_not_text_or_is_too_long_is_refused_with_400() {
        let receiver = github(|c| {
            c.with_event_id(Some(Locator::JsonPointer("/id".into())))
                .with_account(Locator::Header("X-Account".into()))
        });
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_IDENTITY_LEN + 1));
        let cases = [
            (r#"{"id":1.5}"#, Rejection::NotText(Field::EventId)),
            (r#"{"id":{"a":1}}"#, Rejection::NotText(Field::EventId)),
            (&long, Rejection::TooLong(Field::EventId)),
        ];
        for (body, expected) in cases {
            let err = accept(&receiver, &[], body).unwrap_err();
            assert_eq!((err.status(), &err), (400, &expected), "{body}");
        }
        let fits = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_IDENTITY_LEN));
        assert!(accept(&receiver, &[], &fits).is_ok());
        let bytes = [(b"x-account".to_vec(), b"\xff".to_vec())];
        let headers: Vec<(Vec<u8>, Vec<u8>)> = bytes
            .into_iter()
            .chain([(
                b"x-hub-signature-256".to_vec(),
                github_signature(b"{}").into_bytes(),
            )])
            .collect();
        let err = receiver
            .accept(
                &headers[..],
                Bytes::from_static(b"{}"),
                "",
                DateTime::UNIX_EPOCH,
            )
            .unwrap_err();
        assert_eq!(err, Rejection::NotText(Field::Account));
    }

    #[test]
    fn the_account_scopes_the_identity_and_is_empty_where_absent() {
        let receiver = github(|c| c.with_account(Locator::JsonPointer("/account".into())));
        let with = r#"{"account":"acct_1"}"#;
        let delivery = accept(&receiver, &[("x-github-delivery", "d-1")], with).unwrap();
        assert_eq!(
            delivery.identity(),
            Some(&Identity::new("github", "acct_1", "d-1"))
        );
        let delivery = accept(&receiver, &[("x-github-delivery", "d-1")], "{}").unwrap();
        assert_eq!(delivery.identity().map(Identity::account), Some(""));
    }

    #[test]
    fn a_config_that_cannot_work_is_refused_naming_the_problem_not_the_secret() {
        let none: [&str; 0] = [];
        let refused = |config| Receiver::new(config).unwrap_err();
        assert_eq!(
            refused(Config::new("", Scheme::GitHub, [SECRET])),
            ConfigError::EmptySource
        );
        assert_eq!(
            refused(Config::new("gh", Scheme::GitHub, none)),
            ConfigError::NoSecrets("gh".into())
        );
        let bad = refused(Config::new(
            "sw",
            Scheme::StandardWebhooks,
            ["whsec_ok?", "not b64!"],
        ));
        assert!(
            matches!(bad, ConfigError::InvalidSecret { index: 0, .. }),
            "{bad:?}"
        );
        assert!(!bad.to_string().contains("whsec_ok?"), "{bad}");
        let signed =
            Config::new("st", Scheme::Stripe, ["whsec_x"]).with_event_id(Some(Locator::SignedId));
        assert_eq!(refused(signed), ConfigError::NoSignedId("st".into()));
        let pointer = Config::new("st", Scheme::Stripe, ["whsec_x"])
            .with_event_id(Some(Locator::JsonPointer("id".into())));
        assert_eq!(
            refused(pointer),
            ConfigError::InvalidLocator(Field::EventId, "st".into())
        );
        let header = Config::new("st", Scheme::Stripe, ["whsec_x"])
            .with_account(Locator::Header(String::new()));
        assert_eq!(
            refused(header),
            ConfigError::InvalidLocator(Field::Account, "st".into())
        );
        let hmac = Scheme::Hmac(
            HmacConfig::new("x-sig").with_template("{timestamp}{body}".parse().unwrap()),
        );
        assert!(matches!(
            refused(Config::new("h", hmac, ["k"])),
            ConfigError::Scheme(..)
        ));
    }

    #[test]
    fn each_scheme_reads_its_event_id_where_its_provider_documents_it() {
        let header = |n: &str| vec![Locator::Header(n.into())];
        let pointer = |p: &str| vec![Locator::JsonPointer(p.into())];
        let cases = [
            (Scheme::StandardWebhooks, vec![Locator::SignedId]),
            (Scheme::Stripe, pointer("/id")),
            (Scheme::Paddle, pointer("/event_id")),
            (Scheme::GitHub, header("x-github-delivery")),
            (Scheme::Twilio, header("i-twilio-idempotency-token")),
            (Scheme::Discord, pointer("/id")),
            (Scheme::SeedSha256, header("x-delivery-id")),
            (
                Scheme::Shopify,
                vec![
                    Locator::Header("x-shopify-event-id".into()),
                    Locator::Header("x-shopify-webhook-id".into()),
                ],
            ),
            (Scheme::Hmac(HmacConfig::new("x-sig")), vec![]),
            (
                Scheme::Hmac(HmacConfig::new("x-sig").with_id_header("x-id")),
                vec![Locator::SignedId],
            ),
        ];
        for (scheme, expected) in cases {
            assert_eq!(Locator::event_id_of(&scheme), expected, "{scheme}");
        }
    }

    #[test]
    fn debug_of_a_config_counts_the_secrets_without_showing_them() {
        let receiver = github(|c| c);
        let shown = format!("{receiver:?}");
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(shown.contains("[1 redacted]"), "{shown}");
    }
}
