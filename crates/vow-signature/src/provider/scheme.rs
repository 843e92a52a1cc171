//! [`Scheme`]: which provider's signature an inbound source expects, with
//! its stable configuration name, the check of a secret against it, and
//! where its provider puts the event id ([`Scheme::event_id_at`], one
//! exhaustive table: a new scheme does not compile until it says).

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::error::KeyError;
use crate::provider::hmac::HmacConfig;
use crate::provider::{discord, standard_webhooks, text_key};

/// An inbound signature scheme.
///
/// Every scheme but [`Scheme::Hmac`] is fixed by its provider and has a
/// name ([`Scheme::as_str`], parsed back by [`FromStr`]); the generic HMAC
/// carries its [`HmacConfig`] and is built directly. What each secret is:
///
/// * Standard Webhooks: a `whsec_…` secret or a `whpk_…` public key;
/// * Discord: the application public key, 64 hex digits;
/// * every other scheme: the secret text as the provider shows it (Stripe's
///   `whsec_…`, Paddle's `pdl_ntfset_…`, Twilio's auth token, …), used as
///   the HMAC key byte for byte, never decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scheme {
    /// Standard Webhooks / Svix: `webhook-*` (or `svix-*`) headers, `v1`
    /// HMAC and `v1a` ed25519, several entries for rotation.
    StandardWebhooks,
    /// Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=…]` over `t.body`.
    Stripe,
    /// GitHub: `X-Hub-Signature-256: sha256=<hex>` over the body.
    GitHub,
    /// Shopify: `X-Shopify-Hmac-Sha256: <base64>` over the body.
    Shopify,
    /// Slack: `X-Slack-Signature: v0=<hex>` over `v0:ts:body`, with
    /// `X-Slack-Request-Timestamp`.
    Slack,
    /// Square: `x-square-hmacsha256-signature: <base64>` over URL ‖ body.
    Square,
    /// Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=…]` over `ts:body`.
    Paddle,
    /// Linear: `Linear-Signature: <hex>` over the body, `webhookTimestamp`
    /// (ms) in the body.
    Linear,
    /// Twilio: `X-Twilio-Signature: <base64 HMAC-SHA1>` over URL ‖ sorted
    /// form params, or URL with `bodySHA256` for JSON bodies.
    Twilio,
    /// Discord: `X-Signature-Ed25519` (hex ed25519) over
    /// `X-Signature-Timestamp` ‖ body.
    Discord,
    /// vow's seed 000 style: `x-signature: sha256=<hex>` over the body.
    SeedSha256,
    /// vow's seed 003 style: `x-signature: t=<unix>,v1=<hex>` over `t.body`.
    SeedTimestamped,
    /// A generic HMAC, configured by the source.
    Hmac(HmacConfig),
}

impl Scheme {
    /// Every scheme that has a name of its own (all but [`Scheme::Hmac`]).
    pub const NAMED: [Scheme; 12] = [
        Scheme::StandardWebhooks,
        Scheme::Stripe,
        Scheme::GitHub,
        Scheme::Shopify,
        Scheme::Slack,
        Scheme::Square,
        Scheme::Paddle,
        Scheme::Linear,
        Scheme::Twilio,
        Scheme::Discord,
        Scheme::SeedSha256,
        Scheme::SeedTimestamped,
    ];

    /// The stable configuration name, e.g. `"github"`. The seed styles use
    /// the names of vow's outbound signature styles (`sha256`,
    /// `timestamped`); the generic HMAC is `"hmac"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::StandardWebhooks => "standard-webhooks",
            Self::Stripe => "stripe",
            Self::GitHub => "github",
            Self::Shopify => "shopify",
            Self::Slack => "slack",
            Self::Square => "square",
            Self::Paddle => "paddle",
            Self::Linear => "linear",
            Self::Twilio => "twilio",
            Self::Discord => "discord",
            Self::SeedSha256 => "sha256",
            Self::SeedTimestamped => "timestamped",
            Self::Hmac(_) => "hmac",
        }
    }

    /// Checks that `secret` can be used by this scheme (see the type docs),
    /// e.g. when a source is configured; `verify` applies the same rule.
    pub fn check_secret(&self, secret: &str) -> Result<(), KeyError> {
        match self {
            Self::StandardWebhooks => standard_webhooks::parse_key(secret).map(drop),
            Self::Discord => discord::parse_key(secret).map(drop),
            _ => text_key(secret).map(drop),
        }
    }
}

/// Where a delivery carries its event id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdLocation<'a> {
    /// A request header, named in lowercase (e.g. `x-github-delivery`).
    Header(&'a str),
    /// An RFC 6901 JSON pointer into the body (e.g. `/id`).
    Pointer(&'a str),
    /// The id the signature covers ([`Verified::id`](crate::provider::Verified::id)):
    /// Standard Webhooks' `webhook-id` (or `svix-id`), a generic HMAC's id header.
    Signed,
}

impl Scheme {
    /// Where this scheme's provider documents the event id of a delivery, in order of
    /// preference (the first one present wins); empty when it documents none.
    pub fn event_id_at(&self) -> &'static [IdLocation<'static>] {
        use IdLocation::{Header, Pointer, Signed};
        match self {
            Self::StandardWebhooks => &[Signed],
            Self::Hmac(config) if config.id_header().is_some() => &[Signed],
            Self::Hmac(_) => &[],
            Self::Stripe => &[Pointer("/id")],
            // An interaction's own snowflake id; the reviewed sources name no other.
            Self::Discord => &[Pointer("/id")],
            Self::GitHub => &[Header("x-github-delivery")],
            // The docs disagree: the event id marks duplicates, the webhook id is per delivery.
            Self::Shopify => &[Header("x-shopify-event-id"), Header("x-shopify-webhook-id")],
            Self::Slack | Self::Square | Self::Paddle => &[Pointer("/event_id")],
            Self::Linear => &[Header("linear-delivery")],
            Self::Twilio => &[Header("i-twilio-idempotency-token")],
            // vow's own outbound deliveries (both seed styles) send the message id there.
            Self::SeedSha256 | Self::SeedTimestamped => &[Header(crate::header::X_DELIVERY_ID)],
        }
    }

    /// Whether the scheme signs an id ([`IdLocation::Signed`] finds one).
    pub fn signs_id(&self) -> bool {
        self.event_id_at().contains(&IdLocation::Signed)
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a named scheme.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "unknown scheme {0:?}: expected standard-webhooks (or svix), stripe, github, shopify, slack, \
     square, paddle, linear, twilio, discord, sha256 or timestamped; the generic `hmac` scheme is \
     built from its configuration"
)]
pub struct UnknownScheme(pub String);

impl FromStr for Scheme {
    type Err = UnknownScheme;

    /// Parses [`Scheme::as_str`] names, and `svix` as Standard Webhooks.
    fn from_str(s: &str) -> Result<Self, UnknownScheme> {
        if s == "svix" {
            return Ok(Self::StandardWebhooks);
        }
        Self::NAMED
            .into_iter()
            .find(|scheme| scheme.as_str() == s)
            .ok_or_else(|| UnknownScheme(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_scheme_round_trips_through_its_name() {
        for scheme in Scheme::NAMED {
            assert_eq!(scheme.as_str().parse::<Scheme>(), Ok(scheme.clone()));
            assert_eq!(scheme.to_string(), scheme.as_str());
        }
        assert_eq!("svix".parse::<Scheme>(), Ok(Scheme::StandardWebhooks));
    }

    #[test]
    fn the_generic_hmac_and_unknown_names_do_not_parse() {
        for name in ["hmac", "GitHub", "", "stripe "] {
            assert_eq!(name.parse::<Scheme>(), Err(UnknownScheme(name.to_owned())));
        }
        assert_eq!(Scheme::Hmac(HmacConfig::new("x-sig")).as_str(), "hmac");
    }

    #[test]
    fn secrets_are_checked_by_the_rule_of_their_scheme() {
        assert_eq!(
            Scheme::GitHub.check_secret("It's a Secret to Everybody"),
            Ok(())
        );
        assert_eq!(Scheme::Stripe.check_secret(""), Err(KeyError::Empty));
        assert!(Scheme::StandardWebhooks
            .check_secret("not base64!")
            .is_err());
        assert!(Scheme::Discord
            .check_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .is_err());
        let public = crate::AsymmetricKey::from_seed(&[1u8; 32]).public_key();
        assert_eq!(
            Scheme::Discord.check_secret(&hex::encode(public.to_bytes())),
            Ok(())
        );
    }
}
