//! Validated names: the strings clients choose that vow stores and matches on.
//!
//! Each type is built by `parse`, which checks length and alphabet as the Svix API specifies
//! (`^[a-zA-Z0-9\-_.]+$`), so a value that exists is valid. Errors say what is wrong in words a
//! client can act on; the HTTP layer adds where (the field) it was.

use std::fmt;

/// Why a string is not a valid name of its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidName {
    /// Human-readable reason, e.g. "must be at most 256 characters".
    pub message: String,
    /// A machine-readable kind in Svix's style, e.g. `value_error.str.regex`.
    pub kind: &'static str,
}

impl InvalidName {
    fn new(kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            kind,
        }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Checks length (in characters, 1..=max) and the `[a-zA-Z0-9-_.]` alphabet.
fn check_name(s: &str, max: usize) -> Result<(), InvalidName> {
    if s.is_empty() {
        return Err(InvalidName::new(
            "value_error.any_str.min_length",
            "must not be empty",
        ));
    }
    if s.len() > max {
        return Err(InvalidName::new(
            "value_error.any_str.max_length",
            format!("must be at most {max} characters"),
        ));
    }
    if let Some(bad) = s.chars().find(|c| !is_name_char(*c)) {
        return Err(InvalidName::new(
            "value_error.str.regex",
            format!("may only contain letters, digits, '-', '_' and '.' (found {bad:?})"),
        ));
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, |$s:ident| $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Validates `s`.
            pub fn parse(s: impl Into<String>) -> Result<Self, InvalidName> {
                let $s: String = s.into();
                $check?;
                Ok(Self($s))
            }

            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The owned text.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        #[cfg(feature = "utoipa")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                <String as utoipa::PartialSchema>::schema()
            }
        }

        #[cfg(feature = "utoipa")]
        impl utoipa::ToSchema for $name {}

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Self::parse(String::deserialize(d)?).map_err(serde::de::Error::custom)
            }
        }
    };
}

name_type!(
    /// A client-chosen unique identifier for an application or endpoint (1–256 characters).
    Uid, |s| check_name(&s, 256)
);

name_type!(
    /// An event type name such as `invoice.paid`: 1–256 characters, hierarchical by `.`, so no
    /// segment may be empty (`a..b`, `.a` and `a.` are refused).
    EventTypeName, |s| check_name(&s, 256).and_then(|()| {
        if s.split('.').any(str::is_empty) {
            Err(InvalidName::new(
                "value_error.str.regex",
                "must not start or end with '.' or contain an empty segment ('..')",
            ))
        } else {
            Ok(())
        }
    })
);

name_type!(
    /// A message channel endpoints can filter by (1–128 characters).
    Channel, |s| check_name(&s, 128)
);

name_type!(
    /// An endpoint's destination: an absolute `http` or `https` URL with a host, at most 65,536
    /// bytes. Whether the address it resolves to may be reached is decided at delivery time.
    EndpointUrl, |s| check_url(&s)
);

fn check_url(s: &str) -> Result<(), InvalidName> {
    if s.is_empty() {
        return Err(InvalidName::new(
            "value_error.any_str.min_length",
            "must not be empty",
        ));
    }
    if s.len() > 65_536 {
        return Err(InvalidName::new(
            "value_error.any_str.max_length",
            "must be at most 65536 characters",
        ));
    }
    let url = url::Url::parse(s)
        .map_err(|e| InvalidName::new("value_error.url", format!("is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(InvalidName::new(
            "value_error.url.scheme",
            format!("must use http or https, not {:?}", url.scheme()),
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(InvalidName::new("value_error.url.host", "must have a host"));
    }
    Ok(())
}

/// Whether a uid could be confused with an id; the API refuses such uids so that `{app_id}` in
/// a path is never ambiguous.
pub fn looks_like_an_id(s: &str) -> bool {
    crate::id::kind_of_id(s).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_take_the_svix_alphabet() {
        assert!(Uid::parse("unique-app_identifier.1").is_ok());
        assert_eq!(
            Uid::parse("").unwrap_err().kind,
            "value_error.any_str.min_length"
        );
        assert_eq!(Uid::parse("a b").unwrap_err().kind, "value_error.str.regex");
        assert!(Uid::parse("x".repeat(256)).is_ok());
        assert!(Uid::parse("x".repeat(257)).is_err());
    }

    #[test]
    fn event_type_names_are_hierarchical_by_dots() {
        assert!(EventTypeName::parse("invoice.paid").is_ok());
        assert!(EventTypeName::parse("user_v2.created-now").is_ok());
        for bad in ["", ".a", "a.", "a..b", "a/b", "a b", "ä"] {
            assert!(EventTypeName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn channels_are_at_most_128_characters() {
        assert!(Channel::parse("project_123").is_ok());
        assert!(Channel::parse("c".repeat(129)).is_err());
    }

    #[test]
    fn endpoint_urls_must_be_http_or_https_with_a_host() {
        assert!(EndpointUrl::parse("https://example.com/hook").is_ok());
        assert!(EndpointUrl::parse("http://127.0.0.1:8080/x").is_ok());
        let e = EndpointUrl::parse("ftp://example.com").unwrap_err();
        assert_eq!(e.kind, "value_error.url.scheme");
        assert!(EndpointUrl::parse("not a url").is_err());
        assert!(EndpointUrl::parse("file:///etc/passwd").is_err());
        assert!(EndpointUrl::parse("").is_err());
    }

    #[test]
    fn deserializing_validates() {
        let r: Result<EventTypeName, _> = serde_json::from_str("\"a..b\"");
        assert!(r.is_err());
    }
}
