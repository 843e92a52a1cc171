//! Standard Webhooks and Svix as an inbound scheme: the `webhook-*` headers
//! (or Svix's `svix-*` names, header by header, as the Svix libraries read
//! them), verified by the crate's own [`Verifier`] with `whsec_` (`v1`) and
//! `whpk_` (`v1a`) keys. Returns the timestamp and the `webhook-id`.

use crate::error::KeyError;
use crate::header::{
    header_str, parse_timestamp, WebhookHeaders, WEBHOOK_ID, WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP,
};
use crate::key::VerifyingKey;
use crate::provider::{Error, Headers, Request, Verified};
use crate::standard::Verifier;

/// Svix's names for the three headers, in the order of the standard ones.
const SVIX: [(&str, &str); 3] = [
    (WEBHOOK_ID, "svix-id"),
    (WEBHOOK_TIMESTAMP, "svix-timestamp"),
    (WEBHOOK_SIGNATURE, "svix-signature"),
];

/// Parses a `whsec_…` (or bare base64) secret or a `whpk_…` public key.
pub(crate) fn parse_key(text: &str) -> Result<VerifyingKey, KeyError> {
    text.parse()
}

pub(crate) fn verify<H: Headers + ?Sized>(
    keys: Vec<VerifyingKey>,
    request: &Request<'_, H>,
    now: u64,
    tolerance_secs: u64,
) -> Result<Verified, Error> {
    let [id, timestamp, signature] =
        SVIX.map(|(name, svix)| request.header(name).or_else(|| request.header(svix)));
    let headers = WebhookHeaders::new(id, timestamp, signature);
    // The id is returned as text, so a non-UTF-8 one is malformed up front.
    let id = headers
        .id
        .map(|raw| header_str(WEBHOOK_ID, raw))
        .transpose()?;
    Verifier::new(keys)
        .with_tolerance_secs(tolerance_secs)
        .verify_at(&headers, request.body(), now)?;
    let timestamp = headers
        .timestamp
        .map(|raw| parse_timestamp(WEBHOOK_TIMESTAMP, raw))
        .transpose()?;
    Ok(Verified {
        timestamp,
        id: id.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svix_names_pair_with_the_standard_ones() {
        assert!(SVIX.iter().all(
            |(standard, svix)| standard.strip_prefix("webhook-") == svix.strip_prefix("svix-")
        ));
    }

    #[test]
    fn accepts_symmetric_secrets_and_public_keys_but_not_secret_keys() {
        assert!(parse_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_ok());
        assert!(parse_key("whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=").is_ok());
        assert!(parse_key("whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbc=").is_err());
    }
}
