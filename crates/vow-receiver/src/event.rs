//! What a verified delivery is, as the claims see it: its [`Identity`] (source, account, event
//! id), the [`PayloadDigest`] of its raw bytes, the [`Delivery`] that carries both with the body,
//! and the [`Decision`] a claim comes to.

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use sha2::{Digest as _, Sha256};
use vow_signature::provider::Verified;

/// Who says what happened: the scope under which an event id is unique. Providers reuse ids
/// across accounts (and two sources know nothing of each other), so the claim is on all three.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    source: String,
    account: String,
    event_id: String,
}

impl Identity {
    /// The identity of event `event_id` of `account` (`""` when the source has none) at
    /// `source`.
    pub fn new(source: &str, account: &str, event_id: &str) -> Self {
        Self {
            source: source.to_owned(),
            account: account.to_owned(),
            event_id: event_id.to_owned(),
        }
    }

    /// The receiver's source name, e.g. `"stripe"`.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The account within the source, `""` when there is none.
    pub fn account(&self) -> &str {
        &self.account
    }

    /// The provider's event id.
    pub fn event_id(&self) -> &str {
        &self.event_id
    }
}

/// SHA-256 of a delivery's raw body bytes, stored as 64 lowercase hex digits. Tells a
/// redelivery (same bytes) from another payload under the same id. Never used as an identity:
/// two events can have identical bodies.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PayloadDigest([u8; 32]);

impl PayloadDigest {
    /// The digest of `body`.
    pub fn of(body: &[u8]) -> Self {
        Self(Sha256::digest(body).into())
    }

    /// 64 lowercase hex digits.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Debug for PayloadDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PayloadDigest({})", self.hex())
    }
}

/// Text that is not 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a payload digest is 64 hex digits")]
pub struct NotADigest;

impl FromStr for PayloadDigest {
    type Err = NotADigest;

    /// Parses [`PayloadDigest::hex`] (either case).
    fn from_str(s: &str) -> Result<Self, NotADigest> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).map_err(|_| NotADigest)?;
        Ok(Self(out))
    }
}

/// What claiming an identity came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The identity was free and is now claimed in the caller's transaction: make the business
    /// change in it, then commit both.
    Claimed,
    /// The identity is claimed with the same payload digest: a redelivery. Answer 2xx and do
    /// nothing.
    Duplicate,
    /// The identity is claimed with another payload digest: keep the new payload aside (in a
    /// transaction of its own), do not apply it, answer 202.
    Quarantined,
}

impl Decision {
    /// The decision for a delivery with digest `new` whose identity is already claimed with
    /// `stored`.
    pub fn on_conflict(stored: &PayloadDigest, new: &PayloadDigest) -> Self {
        if stored == new {
            Self::Duplicate
        } else {
            Self::Quarantined
        }
    }
}

/// A delivery that passed verification: its identity (when it has an event id), the digest and
/// exact bytes of its body, what verification learned, and when it arrived. Only
/// [`crate::Receiver::accept`] makes one, so holding one means the bytes are authentic.
#[derive(Clone)]
pub struct Delivery {
    pub(crate) identity: Option<Identity>,
    pub(crate) digest: PayloadDigest,
    pub(crate) body: Bytes,
    pub(crate) verified: Verified,
    pub(crate) received_at: DateTime<Utc>,
}

impl Delivery {
    /// The identity to claim; `None` when the delivery carries no event id: it is then processed
    /// every time, never deduplicated by its body.
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_ref()
    }

    /// The digest of [`Delivery::body`].
    pub fn digest(&self) -> &PayloadDigest {
        &self.digest
    }

    /// The exact bytes that were verified: parse these.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The signed timestamp and message id, when the scheme has them.
    pub fn verified(&self) -> &Verified {
        &self.verified
    }

    /// When the delivery arrived (the receiver's clock).
    pub fn received_at(&self) -> DateTime<Utc> {
        self.received_at
    }
}

impl fmt::Debug for Delivery {
    /// Shows the body's length only: payloads may hold personal data.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("identity", &self.identity)
            .field("digest", &self.digest)
            .field("body_len", &self.body.len())
            .field("received_at", &self.received_at)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_the_sha256_of_the_raw_bytes_in_lowercase_hex() {
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(PayloadDigest::of(b"").hex(), empty);
        assert_eq!(empty.parse::<PayloadDigest>(), Ok(PayloadDigest::of(b"")));
        assert_eq!(
            empty.to_uppercase().parse::<PayloadDigest>(),
            Ok(PayloadDigest::of(b""))
        );
        for bad in ["", "e3b0", &format!("{empty}00"), &empty.replace('e', "g")] {
            assert_eq!(bad.parse::<PayloadDigest>(), Err(NotADigest), "{bad}");
        }
    }

    #[test]
    fn bytes_that_differ_only_in_whitespace_are_another_payload() {
        let a = PayloadDigest::of(br#"{"a":1}"#);
        let b = PayloadDigest::of(br#"{"a": 1}"#);
        assert_eq!(Decision::on_conflict(&a, &a), Decision::Duplicate);
        assert_eq!(Decision::on_conflict(&a, &b), Decision::Quarantined);
    }

    #[test]
    fn debug_of_a_delivery_shows_the_body_length_not_the_body() {
        let delivery = Delivery {
            identity: Some(Identity::new("s", "", "evt_1")),
            digest: PayloadDigest::of(b"secret-ish"),
            body: Bytes::from_static(b"secret-ish"),
            verified: Verified::default(),
            received_at: DateTime::UNIX_EPOCH,
        };
        let shown = format!("{delivery:?}");
        assert!(!shown.contains("secret-ish"), "{shown}");
        assert!(
            shown.contains("body_len: 10") && shown.contains("evt_1"),
            "{shown}"
        );
    }
}
