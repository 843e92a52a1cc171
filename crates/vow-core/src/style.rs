//! How an endpoint wants its deliveries signed.
//!
//! Standard Webhooks is the default. The two seed styles exist so that receivers written from the
//! seeds' own code verify vow's deliveries unchanged: `x-signature: sha256=<hex>` with
//! `x-delivery-id` (seed 000), and `x-signature: t=<unix>,v1=<hex>` (seed 003). Both seed styles
//! key the HMAC with the secret text exactly as configured.

use std::fmt;
use std::str::FromStr;

/// An endpoint's signature style.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SignatureStyle {
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>` (+ `svix-*` aliases).
    #[default]
    StandardWebhooks,
    /// Seed 000: `x-signature: sha256=<hex HMAC(body)>`, `x-delivery-id`.
    SeedSha256,
    /// Seed 003: `x-signature: t=<unix>,v1=<hex HMAC("t.body")>`.
    SeedTimestamped,
}

impl SignatureStyle {
    /// Every style, for listing in error messages.
    pub const ALL: [SignatureStyle; 3] = [
        SignatureStyle::StandardWebhooks,
        SignatureStyle::SeedSha256,
        SignatureStyle::SeedTimestamped,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SignatureStyle::StandardWebhooks => "standard-webhooks",
            SignatureStyle::SeedSha256 => "sha256",
            SignatureStyle::SeedTimestamped => "timestamped",
        }
    }
}

/// A string, one of [`SignatureStyle::ALL`]'s names.
#[cfg(feature = "utoipa")]
impl utoipa::PartialSchema for SignatureStyle {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(Self::ALL.map(Self::as_str)))
            .into()
    }
}

#[cfg(feature = "utoipa")]
impl utoipa::ToSchema for SignatureStyle {}

impl fmt::Display for SignatureStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a signature style.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown signature style {0:?}; expected one of standard-webhooks, sha256, timestamped")]
pub struct UnknownStyle(pub String);

impl FromStr for SignatureStyle {
    type Err = UnknownStyle;
    fn from_str(s: &str) -> Result<Self, UnknownStyle> {
        Self::ALL
            .into_iter()
            .find(|style| style.as_str() == s)
            .ok_or_else(|| UnknownStyle(s.to_string()))
    }
}

impl serde::Serialize for SignatureStyle {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for SignatureStyle {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_style_round_trips_through_its_name() {
        for style in SignatureStyle::ALL {
            assert_eq!(style.as_str().parse::<SignatureStyle>(), Ok(style));
        }
        assert!("hmac".parse::<SignatureStyle>().is_err());
        assert_eq!(SignatureStyle::default(), SignatureStyle::StandardWebhooks);
    }
}
