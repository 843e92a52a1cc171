//! The `Idempotency-Key` header: an RFC 9651 sf-string (`"abc"`), as the draft specifies, or a
//! bare value (`abc`), as most clients send it. A bare value is not held to the sf-token grammar:
//! Stripe-style UUID keys start with a digit, which a token may not. Either way the key is 1 to
//! 255 visible ASCII characters.

use sha2::{Digest, Sha256};

/// The longest key accepted, in characters.
pub const MAX_KEY_LEN: usize = 255;

/// A valid key: what the client chose, unquoted.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

/// Why a header is not a usable key. Each message names the problem, never the key itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The header is empty, or an empty string `""`.
    #[error("Idempotency-Key is empty; it must be 1 to {MAX_KEY_LEN} visible ASCII characters")]
    Empty,
    /// More than [`MAX_KEY_LEN`] characters.
    #[error("Idempotency-Key is {0} characters long; at most {MAX_KEY_LEN} are allowed")]
    TooLong(usize),
    /// A character outside visible ASCII (`!` to `~`), e.g. a space, a control or non-ASCII.
    #[error("Idempotency-Key has a character at position {0} that is not visible ASCII")]
    Invisible(usize),
    /// A quoted string that does not close, has text after its closing quote, or escapes
    /// something other than `"` or `\`.
    #[error("Idempotency-Key is not a valid quoted string (RFC 9651 sf-string)")]
    BadQuoting,
    /// The header appears more than once.
    #[error("Idempotency-Key appears more than once")]
    Repeated,
}

impl IdempotencyKey {
    /// Reads the header's value (surrounding spaces are ignored, as HTTP does).
    pub fn parse(header: &str) -> Result<Self, KeyError> {
        let value = header.trim_matches(|c| c == ' ' || c == '\t');
        let key = match value.strip_prefix('"') {
            Some(quoted) => unquote(quoted)?,
            None => value.to_owned(),
        };
        if key.is_empty() {
            return Err(KeyError::Empty);
        }
        if let Some(at) = key.bytes().position(|b| !b.is_ascii_graphic()) {
            return Err(KeyError::Invisible(at));
        }
        if key.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong(key.len()));
        }
        Ok(Self(key))
    }

    /// Reads every value a request carries for the header: none is `Ok(None)`; more than one
    /// is [`KeyError::Repeated`].
    pub fn from_values<'a>(
        mut values: impl Iterator<Item = &'a [u8]>,
    ) -> Result<Option<Self>, KeyError> {
        let Some(first) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(KeyError::Repeated);
        }
        let text = std::str::from_utf8(first).map_err(|e| KeyError::Invisible(e.valid_up_to()))?;
        Self::parse(text).map(Some)
    }

    /// The key as the client chose it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// SHA-256 of the key, hex: what logs carry instead of the key.
    pub fn hash(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }
}

/// Keys are secrets of a sort (they can name a customer's operation): debug output shows the
/// hash only.
impl std::fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IdempotencyKey(sha256:{})", &self.hash()[..16])
    }
}

/// The inside of an sf-string after its opening quote: `\"` and `\\` are the only escapes, and
/// the closing quote must end the value.
fn unquote(rest: &str) -> Result<String, KeyError> {
    let mut out = String::with_capacity(rest.len());
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('"' | '\\')) => out.push(e),
                _ => return Err(KeyError::BadQuoting),
            },
            '"' => {
                return if chars.as_str().is_empty() {
                    Ok(out)
                } else {
                    Err(KeyError::BadQuoting)
                }
            }
            c => out.push(c),
        }
    }
    Err(KeyError::BadQuoting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_bare_token_and_an_sf_string_give_the_same_key() {
        let bare = IdempotencyKey::parse("8e03978e-40d5-43e8-bc93-6894a57f9324").unwrap();
        let quoted = IdempotencyKey::parse("\"8e03978e-40d5-43e8-bc93-6894a57f9324\"").unwrap();
        assert_eq!(bare, quoted);
        assert_eq!(bare.as_str(), "8e03978e-40d5-43e8-bc93-6894a57f9324");
    }

    #[test]
    fn escapes_in_a_quoted_key_are_undone() {
        let k = IdempotencyKey::parse(r#""a\"b\\c""#).unwrap();
        assert_eq!(k.as_str(), r#"a"b\c"#);
    }

    #[test]
    fn each_kind_of_bad_header_has_its_own_error() {
        let cases = [
            ("", KeyError::Empty),
            ("   ", KeyError::Empty),
            ("\"\"", KeyError::Empty),
            ("a b", KeyError::Invisible(1)),
            ("\"a b\"", KeyError::Invisible(1)),
            ("caf\u{e9}", KeyError::Invisible(3)),
            ("\"abc", KeyError::BadQuoting),
            ("\"abc\"def", KeyError::BadQuoting),
            (r#""a\nb""#, KeyError::BadQuoting),
        ];
        for (header, want) in cases {
            assert_eq!(IdempotencyKey::parse(header), Err(want), "{header:?}");
        }
        let long = "k".repeat(256);
        assert_eq!(IdempotencyKey::parse(&long), Err(KeyError::TooLong(256)));
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
    }

    #[test]
    fn a_repeated_header_is_refused_and_a_missing_one_is_none() {
        let none: [&[u8]; 0] = [];
        assert_eq!(IdempotencyKey::from_values(none.into_iter()), Ok(None));
        let two: [&[u8]; 2] = [b"a", b"b"];
        assert_eq!(
            IdempotencyKey::from_values(two.into_iter()),
            Err(KeyError::Repeated)
        );
        let bad_utf8: [&[u8]; 1] = [b"ab\xff"];
        assert_eq!(
            IdempotencyKey::from_values(bad_utf8.into_iter()),
            Err(KeyError::Invisible(2))
        );
    }

    #[test]
    fn debug_and_errors_never_show_the_key() {
        let k = IdempotencyKey::parse("order-1234-secret").unwrap();
        assert!(!format!("{k:?}").contains("order-1234"));
        let e = IdempotencyKey::parse("order 1234").unwrap_err();
        assert!(!e.to_string().contains("order"));
        assert_eq!(k.hash().len(), 64);
    }

    proptest! {
        #[test]
        fn every_visible_ascii_key_round_trips_bare_and_quoted(key in "[!-~]{1,255}") {
            let quoted = format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""));
            let parsed = IdempotencyKey::parse(&quoted).unwrap();
            prop_assert_eq!(parsed.as_str(), key.as_str());
            if !key.starts_with('"') {
                let bare = IdempotencyKey::parse(&key).unwrap();
                prop_assert_eq!(bare.as_str(), key.as_str());
            }
        }
    }
}
