//! Who a verified inbound delivery is: its event id and the account that scopes it (where the
//! source says, else where its provider documents them), the values at the version and entity
//! pointers, the provider handshakes answered instead of stored, and which headers are kept.
//! Pure functions of the request, so each rule is unit-tested here.

use std::collections::HashMap;

use axum::http::HeaderMap;
use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};
use vow_core::version::Version;
use vow_signature::provider::{Headers, IdLocation, Scheme, Verified};
use vow_store::inbound::{Locator, SourceFields};

/// Event ids longer than this are replaced by `sha256:` and their digest, so any id fits the
/// unique index and still deduplicates.
const MAX_ID_BYTES: usize = 512;

/// Where a source's configured `locator` looks, as a place [`Scheme::event_id_at`] names.
fn configured(locator: &Locator) -> IdLocation<'_> {
    match locator {
        Locator::Header(name) => IdLocation::Header(name),
        Locator::Pointer(pointer) => IdLocation::Pointer(pointer),
    }
}

/// Where each provider says whose event it is (the scope of its ids).
fn default_account(scheme: &Scheme) -> &'static [IdLocation<'static>] {
    match scheme {
        // Connect events name the connected account; the platform's own have none.
        Scheme::Stripe => &[IdLocation::Pointer("/account")],
        // One delivery GUID is shared by every hook subscribed to the event.
        Scheme::GitHub => &[IdLocation::Header("x-github-hook-id")],
        Scheme::Shopify => &[IdLocation::Header("x-shopify-shop-domain")],
        Scheme::Square => &[IdLocation::Pointer("/merchant_id")],
        _ => &[],
    }
}

/// Whether a delivery's event id and its account come only from what `scheme`'s signature
/// covers (the body, or the signed id), so a captured delivery sent again cannot change them:
/// it is then a duplicate of the event it repeats. A header (GitHub's delivery and hook ids,
/// Shopify's, Twilio's, Linear's) is not signed unless it is the scheme's signed id header.
pub fn identity_is_signed(fields: &SourceFields, scheme: &Scheme) -> bool {
    let signed = |lookup: &IdLocation<'_>| match *lookup {
        IdLocation::Pointer(_) | IdLocation::Signed => true,
        IdLocation::Header(name) => match scheme {
            Scheme::StandardWebhooks => matches!(name, "webhook-id" | "svix-id"),
            Scheme::Hmac(config) => config.id_header() == Some(name),
            _ => false,
        },
    };
    let all_signed = |set: Option<&Locator>, defaults: &[IdLocation<'_>]| match set {
        Some(locator) => signed(&configured(locator)),
        None => defaults.iter().all(signed),
    };
    let defaults = scheme.event_id_at();
    let has_id = fields.event_id.is_some() || !defaults.is_empty();
    has_id
        && all_signed(fields.event_id.as_ref(), defaults)
        && all_signed(fields.account.as_ref(), default_account(scheme))
}

/// What identifies a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    /// The id's scope (`""`: none).
    pub account: String,
    /// The provider's event id, if found.
    pub event_id: Option<String>,
    /// The value at the version pointer.
    pub version: Option<String>,
    /// The value at the entity pointer.
    pub entity: Option<String>,
}

/// The body as JSON, parsed at most once and only when a pointer needs it.
struct Body<'a> {
    raw: &'a [u8],
    json: std::cell::OnceCell<Option<Value>>,
}

impl Body<'_> {
    /// The exact text of the value at `pointer`: a string's content, a number's digits as
    /// written (no rounding through `f64`), or the JSON of anything else; `None` when absent
    /// or `null`. Read from the raw bytes, descending one level at a time.
    fn exact(&self, pointer: &str) -> Option<String> {
        let mut value: &RawValue = serde_json::from_slice(self.raw).ok()?;
        if !pointer.is_empty() {
            for token in pointer.strip_prefix('/')?.split('/') {
                let token = token.replace("~1", "/").replace("~0", "~");
                value = match value.get().as_bytes().first()? {
                    b'{' => serde_json::from_str::<HashMap<String, &RawValue>>(value.get())
                        .ok()?
                        .remove(&token)?,
                    b'[' => {
                        let index: usize = token.parse().ok()?;
                        let items: Vec<&RawValue> = serde_json::from_str(value.get()).ok()?;
                        *items.get(index)?
                    }
                    _ => return None,
                };
            }
        }
        match value.get() {
            "null" => None,
            text if text.starts_with('"') => serde_json::from_str(text).ok(),
            text => Some(text.to_owned()),
        }
    }

    fn pointer(&self, pointer: &str) -> Option<String> {
        let json = self
            .json
            .get_or_init(|| serde_json::from_slice(self.raw).ok());
        match json.as_ref()?.pointer(pointer)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
}

/// Finds the delivery's identity under `fields` (verified as `scheme`, yielding `verified`).
pub fn identify<H: Headers + ?Sized>(
    fields: &SourceFields,
    scheme: &Scheme,
    verified: &Verified,
    headers: &H,
    body: &[u8],
) -> Identity {
    let body = Body {
        raw: body,
        json: std::cell::OnceCell::new(),
    };
    let find = |lookup: &IdLocation<'_>| -> Option<String> {
        let value = match *lookup {
            IdLocation::Header(name) => {
                let raw = headers.get(name)?;
                std::str::from_utf8(raw).ok()?.trim().to_owned()
            }
            IdLocation::Pointer(pointer) => body.pointer(pointer)?,
            IdLocation::Signed => verified.id.clone()?,
        };
        (!value.is_empty()).then_some(value)
    };
    let first = |set: Option<&Locator>, defaults: &[IdLocation<'_>]| match set {
        Some(locator) => find(&configured(locator)),
        None => defaults.iter().find_map(&find),
    };
    let pointer = |p: &Option<String>| p.as_deref().and_then(|p| body.pointer(p));
    let exact = |p: &Option<String>| p.as_deref().and_then(|p| body.exact(p));
    Identity {
        account: first(fields.account.as_ref(), default_account(scheme))
            .map(bounded)
            .unwrap_or_default(),
        event_id: first(fields.event_id.as_ref(), scheme.event_id_at()).map(bounded),
        version: exact(&fields.version_pointer),
        entity: pointer(&fields.entity_pointer).map(bounded),
    }
}

/// Why vow cannot order this delivery among its entity's events, if it cannot: the source
/// orders by version (both pointers set), the delivery has an entity and a version, and the
/// version is neither a number nor an RFC 3339 time ([`vow_core::version`]). Such a delivery
/// is refused (422 `version_unorderable`, recorded) rather than stored unordered.
pub fn unorderable_version(fields: &SourceFields, who: &Identity) -> Option<String> {
    let (Some(pointer), Some(_)) = (&fields.version_pointer, &fields.entity_pointer) else {
        return None;
    };
    let (Some(version), Some(_)) = (&who.version, &who.entity) else {
        return None;
    };
    let e = Version::parse(version).err()?;
    Some(format!(
        "the version at {pointer} ({e}): vow orders an entity's events by number or by time only"
    ))
}

/// `value`, or `sha256:<hex>` of it when it is too long to index.
fn bounded(value: String) -> String {
    if value.len() <= MAX_ID_BYTES {
        value
    } else {
        format!("sha256:{}", hex::encode(Sha256::digest(value.as_bytes())))
    }
}

/// The answer to a provider's handshake, which is verified like any delivery and answered
/// instead of stored: Slack's `url_verification` (echo the challenge), Discord's PING.
pub fn handshake(scheme: &Scheme, body: &[u8]) -> Option<Value> {
    if !matches!(scheme, Scheme::Slack | Scheme::Discord) {
        return None;
    }
    let json: Value = serde_json::from_slice(body).ok()?;
    match scheme {
        Scheme::Slack if json["type"] == "url_verification" => {
            let challenge = json.get("challenge")?.as_str()?;
            Some(serde_json::json!({ "challenge": challenge }))
        }
        Scheme::Discord if json["type"] == 1 => Some(serde_json::json!({ "type": 1 })),
        _ => None,
    }
}

/// Headers that carry a credential by name: HTTP authentication, cookies, API keys and the
/// access tokens some providers send (GitLab's shared secret is `x-gitlab-token`).
const CREDENTIAL_NAMES: [&str; 13] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
    "apikey",
    "x-auth-token",
    "x-access-token",
    "x-api-token",
    "x-gitlab-token",
    "x-csrf-token",
    "x-amz-security-token",
];

/// Words that make any header name a signature or a secret: every provider's signature
/// header (`stripe-signature`, `x-hub-signature-256`, `x-twilio-signature`,
/// `x-signature-ed25519`, `webhook-signature`, …) or HMAC header (`x-shopify-hmac-sha256`),
/// and names that say secret, password or API key. A name with `token` in it is not a
/// credential by that alone: `i-twilio-idempotency-token` is Twilio's event id.
const CREDENTIAL_WORDS: [&str; 7] = [
    "signature",
    "hmac",
    "secret",
    "password",
    "api-key",
    "apikey",
    "api_key",
];

/// Whether header `name` (lowercase) may carry a credential or a signature, and so is never
/// stored: one of [`CREDENTIAL_NAMES`], or a name containing one of [`CREDENTIAL_WORDS`].
fn is_credential(name: &str) -> bool {
    CREDENTIAL_NAMES.contains(&name) || CREDENTIAL_WORDS.iter().any(|word| name.contains(word))
}

/// The headers worth storing with an event: all but credentials and signatures (and
/// `extra`, the signature header a generic HMAC source names), values as lossy UTF-8.
pub fn kept_headers(headers: &HeaderMap, extra: Option<&str>) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| !is_credential(name.as_str()) && Some(name.as_str()) != extra)
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Source fields with these locators, for the rules' unit tests.
    pub(in crate::http::inbound) fn fields(
        event_id: Option<Locator>,
        account: Option<Locator>,
    ) -> SourceFields {
        SourceFields {
            description: String::new(),
            scheme: String::new(),
            hmac: None,
            secrets: Vec::new(),
            tolerance_secs: 300,
            replay_window_secs: None,
            event_id,
            account,
            version_pointer: Some("/data/version".into()),
            entity_pointer: Some("/data/object/id".into()),
            destinations: Vec::new(),
        }
    }

    #[test]
    fn only_ids_and_accounts_under_the_signature_count_as_signed() {
        let plain = fields(None, None);
        assert!(identity_is_signed(&plain, &Scheme::Stripe));
        assert!(identity_is_signed(&plain, &Scheme::StandardWebhooks));
        assert!(identity_is_signed(&plain, &Scheme::Square));
        for scheme in [
            Scheme::GitHub,
            Scheme::Shopify,
            Scheme::Linear,
            Scheme::Twilio,
        ] {
            assert!(!identity_is_signed(&plain, &scheme), "{scheme}");
        }
        let header_id = fields(Some(Locator::Header("x-id".into())), None);
        assert!(!identity_is_signed(&header_id, &Scheme::Stripe));
        let header_account = fields(None, Some(Locator::Header("x-account".into())));
        assert!(!identity_is_signed(&header_account, &Scheme::Stripe));
        let body_id = fields(Some(Locator::Pointer("/id".into())), None);
        assert!(
            !identity_is_signed(&body_id, &Scheme::GitHub),
            "the hook id is a header"
        );
        let svix = fields(Some(Locator::Header("svix-id".into())), None);
        assert!(identity_is_signed(&svix, &Scheme::StandardWebhooks));
    }

    fn who(scheme: &Scheme, f: &SourceFields, headers: &[(&str, &str)], body: &str) -> Identity {
        identify(f, scheme, &Verified::default(), headers, body.as_bytes())
    }

    #[test]
    fn each_provider_names_its_event_id_and_account_where_it_documents_them() {
        let f = fields(None, None);
        let stripe = who(
            &Scheme::Stripe,
            &f,
            &[],
            r#"{"id":"evt_1","account":"acct_9","data":{"version":7,"object":{"id":"cus_1"}}}"#,
        );
        let expected = Identity {
            account: "acct_9".into(),
            event_id: Some("evt_1".into()),
            version: Some("7".into()),
            entity: Some("cus_1".into()),
        };
        assert_eq!(stripe, expected);
        let github = [("x-github-delivery", "guid-1"), ("x-github-hook-id", "42")];
        let github = who(&Scheme::GitHub, &f, &github, "{}");
        assert_eq!(
            (github.event_id.as_deref(), github.account.as_str()),
            (Some("guid-1"), "42")
        );
        let shopify = [
            ("x-shopify-webhook-id", "delivery-1"),
            ("x-shopify-shop-domain", "shop.example"),
        ];
        let shopify = who(&Scheme::Shopify, &f, &shopify, "{}");
        assert_eq!(shopify.event_id.as_deref(), Some("delivery-1"));
        assert_eq!(shopify.account, "shop.example");
        let slack = who(&Scheme::Slack, &f, &[], r#"{"event_id":"Ev1"}"#);
        assert_eq!(
            (slack.event_id.as_deref(), slack.account.as_str()),
            (Some("Ev1"), "")
        );
        let signed = Verified::default();
        let std = identify(
            &f,
            &Scheme::StandardWebhooks,
            &signed,
            &[("webhook-id", "x")][..],
            b"",
        );
        assert_eq!(
            std.event_id, None,
            "only the signed id counts, and none was signed"
        );
    }

    #[test]
    fn a_configured_locator_replaces_the_default_and_a_missing_value_is_no_id() {
        let f = fields(
            Some(Locator::Header("x-request-id".into())),
            Some(Locator::Pointer("/tenant".into())),
        );
        let found = who(
            &Scheme::Stripe,
            &f,
            &[("x-request-id", " r-1 ")],
            r#"{"tenant":5}"#,
        );
        assert_eq!(
            (found.event_id.as_deref(), found.account.as_str()),
            (Some("r-1"), "5")
        );
        let missing = who(&Scheme::Stripe, &f, &[], r#"{"id":"evt_1"}"#);
        assert_eq!(missing.event_id, None);
        let not_json = who(&Scheme::Stripe, &fields(None, None), &[], "id=evt_1");
        assert_eq!(not_json, Identity::default());
    }

    #[test]
    fn a_version_is_read_exactly_and_refused_when_it_cannot_be_ordered() {
        let f = fields(None, None);
        let body = r#"{"data":{"version":18446744073709551617,"object":{"id":"cus_1"}}}"#;
        let exact = who(&Scheme::Stripe, &f, &[], body);
        assert_eq!(exact.version.as_deref(), Some("18446744073709551617"));
        assert_eq!(unorderable_version(&f, &exact), None);
        let at = |version: &str| {
            let body = format!(r#"{{"data":{{"version":{version},"object":{{"id":"c"}}}}}}"#);
            who(&Scheme::Stripe, &f, &[], &body)
        };
        assert_eq!(
            at(r#""2026-01-01T00:00:00.5Z""#).version.as_deref(),
            Some("2026-01-01T00:00:00.5Z")
        );
        assert_eq!(at("1.50").version.as_deref(), Some("1.50"));
        assert_eq!(at("null").version, None);
        let refused = unorderable_version(&f, &at(r#""v3""#)).unwrap();
        assert!(
            refused.contains("/data/version") && refused.contains("\"v3\""),
            "{refused}"
        );
        assert!(unorderable_version(&f, &at("true")).is_some());
        assert!(unorderable_version(&f, &at(r#"{"a":1}"#)).is_some());
        let unordered = SourceFields {
            entity_pointer: None,
            ..f.clone()
        };
        assert_eq!(
            unorderable_version(&unordered, &at(r#""v3""#)),
            None,
            "no ordering, no refusal"
        );
        let escaped = SourceFields {
            version_pointer: Some("/a~1b/0".into()),
            ..f
        };
        let found = who(
            &Scheme::Stripe,
            &escaped,
            &[],
            r#"{"a/b":[7],"data":{"object":{"id":"c"}}}"#,
        );
        assert_eq!(found.version.as_deref(), Some("7"));
    }

    #[test]
    fn an_overlong_id_is_replaced_by_its_digest() {
        let long = "x".repeat(MAX_ID_BYTES + 1);
        let f = fields(Some(Locator::Header("x-id".into())), None);
        let id = who(&Scheme::GitHub, &f, &[("x-id", &long)], "")
            .event_id
            .unwrap();
        assert!(id.starts_with("sha256:") && id.len() == 7 + 64, "{id}");
        let again = who(&Scheme::GitHub, &f, &[("x-id", &long)], "").event_id;
        assert_eq!(again, Some(id));
    }

    #[test]
    fn slack_and_discord_handshakes_are_answered() {
        let body = br#"{"type":"url_verification","challenge":"3eZbrw1a","token":"t"}"#;
        assert_eq!(
            handshake(&Scheme::Slack, body),
            Some(serde_json::json!({"challenge": "3eZbrw1a"}))
        );
        assert_eq!(
            handshake(&Scheme::Slack, br#"{"type":"event_callback"}"#),
            None
        );
        assert_eq!(handshake(&Scheme::GitHub, body), None);
        assert_eq!(
            handshake(&Scheme::Discord, br#"{"type":1,"id":"1"}"#),
            Some(serde_json::json!({"type": 1}))
        );
    }

    #[test]
    fn credentials_and_signatures_are_never_kept() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer x"),
            ("stripe-signature", "t=1,v1=ab"),
            ("x-hub-signature-256", "sha256=ab"),
            ("x-shopify-hmac-sha256", "ab=="),
            ("x-gitlab-token", "t"),
            ("x-my-mac", "ab"),
            ("content-type", "application/json"),
            ("x-github-event", "push"),
        ] {
            headers.insert(name, value.parse().unwrap());
        }
        let kept = kept_headers(&headers, Some("x-my-mac"));
        let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["content-type", "x-github-event"]);
    }

    #[test]
    fn ids_are_kept_though_their_name_says_token() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("i-twilio-idempotency-token", "idem-1"),
            ("x-twilio-signature", "c2ln"),
            ("cookie", "session=1"),
            ("set-cookie", "a=b"),
            ("proxy-authorization", "Basic x"),
            ("x-api-key", "k"),
            ("x-signature-ed25519", "ab"),
            ("webhook-signature", "v1,ab"),
            ("x-auth-token", "t"),
            ("x-webhook-secret", "s"),
            ("x-request-id", "r-1"),
        ] {
            headers.insert(name, value.parse().unwrap());
        }
        let kept = kept_headers(&headers, None);
        let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["i-twilio-idempotency-token", "x-request-id"]);
    }
}
