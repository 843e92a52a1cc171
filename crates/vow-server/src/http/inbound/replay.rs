//! What a source's scheme guarantees against replays, and the replay guard's default (issue
//! 13, ADR 7 "Replay guard"). Pure functions of the source's fields and scheme, so each rule
//! is unit-tested here; the API shows [`Protection`] on every source.
//!
//! A captured delivery sent again is stopped by what the signature covers: a signed timestamp
//! refuses it once older than the tolerance (401); a signed event id (and account) makes it a
//! duplicate of the event it repeats (200, nothing new), for as long as the event row stays.
//! Where the signature covers neither (GitHub, Twilio; Shopify; Linear's and others' ids when
//! they come from a header), only the guard stops a copy sent with a new id header: the digest
//! of the signed content ([`vow_signature::provider::content_digest`]) accepted less than the
//! window ago refuses it (409). Its default per scheme ([`default_window_secs`]):
//! - signed id: off (not needed);
//! - signed timestamp, unsigned id (Linear; Stripe and the like with an id header): twice the
//!   tolerance, the whole time the timestamp is accepted, so every replay is refused. The
//!   timestamp is in the signed content: identical content is the same delivery;
//! - neither, GitHub and Twilio: [`LONG_WINDOW_SECS`]. Their bodies carry per-event state
//!   (GitHub's objects with their times, Twilio's call or message sid and status), so identical
//!   bytes are the same event, and their own redeliveries reuse the id, a duplicate decided
//!   before the guard;
//! - neither, Shopify, vow's `sha256` style and the generic HMAC: off. Shopify sends the same
//!   resource JSON under several topics (the topic is an unsigned header): two legitimate
//!   events with the same bytes. The others' bodies are whatever their sender writes.
//!
//! A source sets `replayWindowSecs` to choose (0 = off).

use serde::Serialize;
use vow_signature::provider::{content_digest, Headers, Request, Scheme};
use vow_store::inbound::{ReplayGuard, SourceFields};

use super::identity::identity_is_signed;

/// The default window of GitHub and Twilio sources: 30 days, the default inbound retention.
pub const LONG_WINDOW_SECS: u32 = 30 * 86_400;

/// Whether `scheme` signs a timestamp that verification holds to the tolerance.
fn signs_timestamp(scheme: &Scheme) -> bool {
    match scheme {
        Scheme::StandardWebhooks
        | Scheme::Stripe
        | Scheme::Slack
        | Scheme::Paddle
        | Scheme::Linear
        | Scheme::Discord
        | Scheme::SeedTimestamped => true,
        Scheme::Hmac(config) => config.timestamp_header().is_some(),
        _ => false,
    }
}

/// The guard's window when the source does not set one; 0 = off (see the module docs).
pub fn default_window_secs(fields: &SourceFields, scheme: &Scheme) -> u32 {
    if identity_is_signed(fields, scheme) {
        0
    } else if signs_timestamp(scheme) {
        fields.tolerance_secs.saturating_mul(2)
    } else if matches!(scheme, Scheme::GitHub | Scheme::Twilio) {
        LONG_WINDOW_SECS
    } else {
        0
    }
}

/// The window in force: the source's own, else the scheme's default; `None` = off.
pub fn window_secs(fields: &SourceFields, scheme: &Scheme) -> Option<u32> {
    let secs = fields
        .replay_window_secs
        .unwrap_or_else(|| default_window_secs(fields, scheme));
    (secs > 0).then_some(secs)
}

/// The guard for one verified `request` to a source with `fields`, when it is on.
pub fn guard<H: Headers + ?Sized>(
    fields: &SourceFields,
    scheme: &Scheme,
    request: &Request<'_, H>,
) -> Option<ReplayGuard> {
    let secs = window_secs(fields, scheme)?;
    Some(ReplayGuard {
        digest: hex::encode(content_digest(scheme, request)),
        window: chrono::Duration::seconds(secs.into()),
    })
}

/// What becomes of a captured delivery sent again, as the API says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Replays {
    /// The signed id makes it a duplicate of the event it repeats.
    Duplicate,
    /// Refused whenever sent: by the guard while the timestamp is accepted, then by the
    /// timestamp.
    Refused,
    /// Refused by the guard within its window; accepted as a new event after it.
    RefusedWithinWindow,
    /// Accepted as a new event within the tolerance (a new id header); refused after it.
    AcceptedWithinTolerance,
    /// Accepted as a new event whenever sent with a new id header.
    Accepted,
}

/// `replayProtection` of a source: what its scheme signs and what the guard adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Protection {
    /// A timestamp is signed and held to `toleranceSecs` (both directions).
    pub signed_timestamp: bool,
    /// The event id and its account are signed: a replay is a duplicate.
    pub signed_event_id: bool,
    /// The guard's window in force, in seconds; `None` = off.
    pub digest_window_secs: Option<u32>,
    /// The upshot.
    pub replays: Replays,
}

/// The protection of a source with `fields` and `scheme`.
pub fn protection(fields: &SourceFields, scheme: &Scheme) -> Protection {
    let signed_timestamp = signs_timestamp(scheme);
    let signed_event_id = identity_is_signed(fields, scheme);
    let window = window_secs(fields, scheme);
    let covers_tolerance = window.is_some_and(|w| w >= fields.tolerance_secs.saturating_mul(2));
    let replays = match (signed_event_id, signed_timestamp, window) {
        (true, _, _) => Replays::Duplicate,
        (false, true, Some(_)) if covers_tolerance => Replays::Refused,
        (false, _, Some(_)) => Replays::RefusedWithinWindow,
        (false, true, None) => Replays::AcceptedWithinTolerance,
        (false, false, None) => Replays::Accepted,
    };
    Protection {
        signed_timestamp,
        signed_event_id,
        digest_window_secs: window,
        replays,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vow_signature::provider::HmacConfig;
    use vow_store::inbound::Locator;

    fn fields(window: Option<u32>) -> SourceFields {
        SourceFields {
            replay_window_secs: window,
            ..super::super::identity::tests::fields(None, None)
        }
    }

    #[test]
    fn the_default_follows_what_each_scheme_signs() {
        let plain = fields(None);
        let window = |scheme: &Scheme| default_window_secs(&plain, scheme);
        for scheme in [
            Scheme::Stripe,
            Scheme::StandardWebhooks,
            Scheme::Slack,
            Scheme::Square,
        ] {
            assert_eq!(window(&scheme), 0, "{scheme}: the signed id suffices");
        }
        assert_eq!(window(&Scheme::Linear), 600, "twice the tolerance");
        assert_eq!(window(&Scheme::GitHub), LONG_WINDOW_SECS);
        assert_eq!(window(&Scheme::Twilio), LONG_WINDOW_SECS);
        assert_eq!(
            window(&Scheme::Shopify),
            0,
            "one body goes out under several topics"
        );
        assert_eq!(window(&Scheme::SeedSha256), 0);
        assert_eq!(window(&Scheme::Hmac(HmacConfig::new("x-sig"))), 0);
        let stripe_by_header = SourceFields {
            event_id: Some(Locator::Header("x-id".into())),
            ..fields(None)
        };
        assert_eq!(default_window_secs(&stripe_by_header, &Scheme::Stripe), 600);
    }

    #[test]
    fn a_source_may_choose_its_window_or_turn_the_guard_off() {
        assert_eq!(window_secs(&fields(Some(0)), &Scheme::GitHub), None);
        assert_eq!(window_secs(&fields(Some(60)), &Scheme::Stripe), Some(60));
        assert_eq!(window_secs(&fields(None), &Scheme::Shopify), None);
    }

    #[test]
    fn the_protection_says_what_becomes_of_a_replay() {
        let of = |f: &SourceFields, s: &Scheme| protection(f, s).replays;
        assert_eq!(of(&fields(None), &Scheme::Stripe), Replays::Duplicate);
        assert_eq!(of(&fields(None), &Scheme::Linear), Replays::Refused);
        assert_eq!(
            of(&fields(Some(10)), &Scheme::Linear),
            Replays::RefusedWithinWindow
        );
        assert_eq!(
            of(&fields(Some(0)), &Scheme::Linear),
            Replays::AcceptedWithinTolerance
        );
        assert_eq!(
            of(&fields(None), &Scheme::GitHub),
            Replays::RefusedWithinWindow
        );
        assert_eq!(of(&fields(None), &Scheme::Shopify), Replays::Accepted);
        let github = protection(&fields(None), &Scheme::GitHub);
        assert_eq!(github.digest_window_secs, Some(LONG_WINDOW_SECS));
        assert!(!github.signed_timestamp && !github.signed_event_id);
    }

    #[test]
    fn the_guard_carries_the_digest_of_the_signed_content() {
        let headers: [(&str, &str); 0] = [];
        let request = Request::new(&headers[..], b"{}", "https://h/in/src_1");
        let on = guard(&fields(None), &Scheme::GitHub, &request).unwrap();
        use sha2::Digest as _;
        assert_eq!(on.digest, hex::encode(sha2::Sha256::digest(b"{}")));
        assert_eq!(
            on.window,
            chrono::Duration::seconds(LONG_WINDOW_SECS.into())
        );
        assert_eq!(guard(&fields(None), &Scheme::Stripe, &request), None);
    }
}
