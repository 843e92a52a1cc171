//! [`Rejection`]: why a delivery was refused before anything was stored, with its HTTP class
//! (400 unreadable, 401 not authentic or not fresh, 500 misconfigured) and a stable code. No
//! text here holds a secret, a signature or the body.

use std::fmt;

use vow_signature::provider::{Error as SignatureError, ErrorKind};

/// The longest event id or account accepted, in bytes.
pub const MAX_IDENTITY_LEN: usize = 255;

/// Which part of the identity a [`Rejection`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// The event id.
    EventId,
    /// The account.
    Account,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::EventId => "event id",
            Self::Account => "account",
        })
    }
}

/// Why [`crate::Receiver::accept`] refused a delivery. Nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// Verification failed: a missing or malformed header (400), a wrong signature or a stale
    /// timestamp (401), or unusable keys (500).
    #[error(transparent)]
    Signature(#[from] SignatureError),
    /// The identity is read from the body, which is authentic but not JSON.
    #[error("the body is not JSON, so its {0} cannot be read")]
    BodyNotJson(Field),
    /// The identity's value is neither a string nor an integer (or its header is not UTF-8).
    #[error("the {0} is neither text nor an integer")]
    NotText(Field),
    /// The identity's value is longer than [`MAX_IDENTITY_LEN`] bytes.
    #[error("the {0} is longer than {MAX_IDENTITY_LEN} bytes")]
    TooLong(Field),
}

impl Rejection {
    /// The HTTP class: the signature error's own, else [`ErrorKind::BadRequest`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Signature(e) => e.kind(),
            Self::BodyNotJson(_) | Self::NotText(_) | Self::TooLong(_) => ErrorKind::BadRequest,
        }
    }

    /// The HTTP status code: 400, 401 or 500.
    pub fn status(&self) -> u16 {
        self.kind().status()
    }

    /// A stable snake_case code, e.g. `"signature_mismatch"` or `"malformed_event_id"`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Signature(e) => e.reason(),
            Self::BodyNotJson(_) => "body_not_json",
            Self::NotText(Field::EventId) | Self::TooLong(Field::EventId) => "malformed_event_id",
            Self::NotText(Field::Account) | Self::TooLong(Field::Account) => "malformed_account",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_failures_keep_their_class_and_code_and_the_rest_are_400() {
        let missing = Rejection::from(SignatureError::MissingHeader("webhook-signature".into()));
        assert_eq!(
            (missing.status(), missing.reason()),
            (400, "missing_header")
        );
        assert_eq!(missing.to_string(), "missing `webhook-signature` header");
        let wrong = Rejection::from(SignatureError::NoMatchingSignature);
        assert_eq!(
            (wrong.status(), wrong.reason()),
            (401, "signature_mismatch")
        );
        assert_eq!(Rejection::from(SignatureError::NoSecrets).status(), 500);
        let cases = [
            (Rejection::BodyNotJson(Field::EventId), "body_not_json"),
            (Rejection::NotText(Field::Account), "malformed_account"),
            (Rejection::TooLong(Field::EventId), "malformed_event_id"),
        ];
        for (rejection, reason) in cases {
            assert_eq!((rejection.status(), rejection.reason()), (400, reason));
        }
        assert_eq!(
            Rejection::TooLong(Field::EventId).to_string(),
            "the event id is longer than 255 bytes"
        );
    }
}
