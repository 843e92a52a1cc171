//! Where each provider puts its event id ([`Scheme::event_id_at`]), one test per provider, as
//! `shared/reference/provider-signatures.md` ("Id for dedupe") and ADR 0007 name it.

use vow_signature::provider::{HmacConfig, IdLocation, Scheme};

use IdLocation::{Header, Pointer, Signed};

fn at(scheme: Scheme) -> &'static [IdLocation<'static>] {
    scheme.event_id_at()
}

#[test]
fn standard_webhooks_uses_the_signed_webhook_id() {
    assert_eq!(at(Scheme::StandardWebhooks), [Signed]);
    assert!(Scheme::StandardWebhooks.signs_id());
}

#[test]
fn stripe_uses_the_event_id_in_the_body() {
    assert_eq!(at(Scheme::Stripe), [Pointer("/id")]);
}

#[test]
fn github_uses_the_delivery_guid() {
    assert_eq!(at(Scheme::GitHub), [Header("x-github-delivery")]);
}

#[test]
fn shopify_uses_the_event_id_then_the_webhook_id() {
    let expected = [Header("x-shopify-event-id"), Header("x-shopify-webhook-id")];
    assert_eq!(at(Scheme::Shopify), expected);
}

#[test]
fn slack_square_and_paddle_use_event_id_in_the_body() {
    for scheme in [Scheme::Slack, Scheme::Square, Scheme::Paddle] {
        assert_eq!(scheme.event_id_at(), [Pointer("/event_id")], "{scheme}");
    }
}

#[test]
fn linear_uses_its_delivery_header() {
    assert_eq!(at(Scheme::Linear), [Header("linear-delivery")]);
}

#[test]
fn twilio_uses_its_idempotency_token() {
    assert_eq!(at(Scheme::Twilio), [Header("i-twilio-idempotency-token")]);
}

#[test]
fn discord_uses_the_interaction_id_in_the_body() {
    assert_eq!(at(Scheme::Discord), [Pointer("/id")]);
}

#[test]
fn the_seed_styles_use_the_delivery_id_vow_sends() {
    for scheme in [Scheme::SeedSha256, Scheme::SeedTimestamped] {
        assert_eq!(scheme.event_id_at(), [Header("x-delivery-id")], "{scheme}");
    }
}

#[test]
fn a_generic_hmac_has_a_signed_id_only_with_an_id_header() {
    let plain = Scheme::Hmac(HmacConfig::new("x-sig"));
    assert_eq!(plain.event_id_at(), []);
    assert!(!plain.signs_id());
    let with_id = Scheme::Hmac(HmacConfig::new("x-sig").with_id_header("x-id"));
    assert_eq!(with_id.event_id_at(), [Signed]);
    assert!(with_id.signs_id());
}

#[test]
fn only_schemes_that_sign_an_id_say_so() {
    for scheme in Scheme::NAMED {
        let signed = scheme.event_id_at().contains(&Signed);
        assert_eq!(signed, scheme == Scheme::StandardWebhooks, "{scheme}");
        assert_eq!(scheme.signs_id(), signed, "{scheme}");
    }
}
