//! Signed-content templates of the generic HMAC scheme: text with
//! `{timestamp}`, `{id}`, `{body}` and `{url}` placeholders, parsed once
//! into parts that the HMAC engine feeds to the MAC without building the
//! content in memory.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// One piece of a signed-content template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    Literal(Cow<'static, str>),
    Timestamp,
    Id,
    Body,
    Url,
}

impl Part {
    fn from_placeholder(name: &str) -> Option<Self> {
        match name {
            "timestamp" => Some(Self::Timestamp),
            "id" => Some(Self::Id),
            "body" => Some(Self::Body),
            "url" => Some(Self::Url),
            _ => None,
        }
    }

    fn placeholder(&self) -> &'static str {
        match self {
            Self::Literal(_) => "",
            Self::Timestamp => "timestamp",
            Self::Id => "id",
            Self::Body => "body",
            Self::Url => "url",
        }
    }
}

/// What gets signed, as text with placeholders: `{timestamp}` and `{id}`
/// (the raw values of the configured headers), `{body}` (the exact body
/// bytes) and `{url}` (the full request URL). Everything else is literal,
/// e.g. `{timestamp}.{body}` or `v0:{timestamp}:{body}`.
///
/// Parsing rejects unknown placeholders, stray braces, and templates
/// without `{body}` (an unsigned body would verify anything).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(pub(crate) Cow<'static, [Part]>);

impl Template {
    /// Parses a template (see the type docs).
    pub fn parse(text: &str) -> Result<Self, Error> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find(['{', '}']) {
            if i > 0 {
                parts.push(Part::Literal(Cow::Owned(rest[..i].to_owned())));
            }
            let tail = &rest[i..];
            if tail.starts_with('}') {
                return Err(Error::InvalidConfig("unmatched `}` in template"));
            }
            let end = tail
                .find('}')
                .ok_or(Error::InvalidConfig("unclosed `{` in template"))?;
            let part = Part::from_placeholder(&tail[1..end]).ok_or(Error::InvalidConfig(
                "unknown template placeholder: expected {timestamp}, {id}, {body} or {url}",
            ))?;
            parts.push(part);
            rest = &tail[end + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(Cow::Owned(rest.to_owned())));
        }
        if !parts.contains(&Part::Body) {
            return Err(Error::InvalidConfig("template must contain {body}"));
        }
        Ok(Self(Cow::Owned(parts)))
    }

    pub(crate) fn uses(&self, part: &Part) -> bool {
        self.0.contains(part)
    }
}

impl Default for Template {
    /// `{body}`.
    fn default() -> Self {
        BODY
    }
}

impl FromStr for Template {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Self::parse(s)
    }
}

impl fmt::Display for Template {
    /// Writes the template back in its text form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in self.0.iter() {
            match part {
                Part::Literal(text) => f.write_str(text)?,
                other => write!(f, "{{{}}}", other.placeholder())?,
            }
        }
        Ok(())
    }
}

/// `{body}`, the template of most providers.
pub(crate) const BODY: Template = Template(Cow::Borrowed(&[Part::Body]));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_round_trip_through_their_text_form() {
        for text in [
            "{body}",
            "{timestamp}.{body}",
            "v0:{timestamp}:{body}",
            "{url}{body}",
            "{id}.{timestamp}.{body}!",
        ] {
            assert_eq!(Template::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(Template::default().to_string(), "{body}");
    }

    #[test]
    fn templates_without_a_body_or_with_bad_braces_are_rejected() {
        for bad in [
            "",
            "{timestamp}",
            "{body",
            "body}",
            "{bodies}",
            "{}{body}",
            "{{body}}",
        ] {
            assert!(
                matches!(Template::parse(bad), Err(Error::InvalidConfig(_))),
                "{bad:?}"
            );
        }
    }
}
