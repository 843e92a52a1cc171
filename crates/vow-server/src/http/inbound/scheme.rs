//! A source's stored scheme (its name and, for the generic HMAC, its settings) as the
//! [`Scheme`] `vow_signature` verifies with. One conversion serves the API, which refuses a
//! configuration that cannot work, and the ingest route, which answers 500 for one that
//! somehow does not.

use vow_signature::provider::{HmacConfig, Scheme, Template};
use vow_store::inbound::{HmacSettings, SourceFields};

/// Why a stored or submitted scheme cannot be used: the field at fault and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", field.join("."))]
pub struct SchemeError {
    /// Where, as body pointer segments after `body` (`["scheme"]`, `["hmac", "template"]`).
    pub field: Vec<&'static str>,
    /// What is wrong.
    pub message: String,
}

impl SchemeError {
    fn at(field: &[&'static str], message: impl ToString) -> Self {
        Self {
            field: field.to_vec(),
            message: message.to_string(),
        }
    }
}

/// The scheme `name` (with `hmac`'s settings when it is `hmac`) names.
pub fn parse(name: &str, hmac: Option<&HmacSettings>) -> Result<Scheme, SchemeError> {
    match (name, hmac) {
        ("hmac", Some(settings)) => hmac_config(settings).map(Scheme::Hmac),
        ("hmac", None) => Err(SchemeError::at(
            &["hmac"],
            "the generic `hmac` scheme needs its settings",
        )),
        (_, Some(_)) => Err(SchemeError::at(
            &["hmac"],
            "only the `hmac` scheme takes settings",
        )),
        (name, None) => name
            .parse()
            .map_err(|e: vow_signature::provider::UnknownScheme| SchemeError::at(&["scheme"], e)),
    }
}

/// The scheme of a stored source.
pub fn of(fields: &SourceFields) -> Result<Scheme, SchemeError> {
    parse(&fields.scheme, fields.hmac.as_ref())
}

/// The generic HMAC `settings` describe, checked (`HmacConfig::validate`).
fn hmac_config(s: &HmacSettings) -> Result<HmacConfig, SchemeError> {
    let bad = |field| move |e: vow_signature::Error| SchemeError::at(&["hmac", field], e);
    let mut config = HmacConfig::new(&s.header)
        .with_prefix(s.prefix.as_deref().unwrap_or_default())
        .with_encoding(s.encoding.parse().map_err(bad("encoding"))?)
        .with_algorithm(s.algorithm.parse().map_err(bad("algorithm"))?)
        .with_template(Template::parse(&s.template).map_err(bad("template"))?);
    if let Some(header) = &s.timestamp_header {
        config = config.with_timestamp_header(header);
    }
    if let Some(header) = &s.id_header {
        config = config.with_id_header(header);
    }
    config.validate().map_err(bad("header"))?;
    Ok(config)
}

/// `settings` as stored: header names lowercase, an empty prefix as none.
pub fn normalize(settings: HmacSettings) -> HmacSettings {
    let lower = |h: Option<String>| h.map(|h| h.to_ascii_lowercase());
    HmacSettings {
        header: settings.header.to_ascii_lowercase(),
        prefix: settings.prefix.filter(|p| !p.is_empty()),
        timestamp_header: lower(settings.timestamp_header),
        id_header: lower(settings.id_header),
        ..settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(template: &str) -> HmacSettings {
        HmacSettings {
            header: "X-Sig".into(),
            prefix: Some(String::new()),
            encoding: "base64".into(),
            algorithm: "sha512".into(),
            template: template.into(),
            timestamp_header: Some("X-TS".into()),
            id_header: None,
        }
    }

    #[test]
    fn named_schemes_parse_by_name_and_the_generic_one_needs_its_settings() {
        assert_eq!(parse("github", None), Ok(Scheme::GitHub));
        assert_eq!(parse("svix", None), Ok(Scheme::StandardWebhooks));
        assert_eq!(parse("nope", None).unwrap_err().field, ["scheme"]);
        assert_eq!(parse("hmac", None).unwrap_err().field, ["hmac"]);
        let s = settings("{timestamp}.{body}");
        assert_eq!(parse("stripe", Some(&s)).unwrap_err().field, ["hmac"]);
        match parse("hmac", Some(&normalize(s))).unwrap() {
            Scheme::Hmac(config) => {
                assert_eq!(config.signature_header(), "x-sig");
                assert_eq!(config.timestamp_header(), Some("x-ts"));
                assert_eq!(config.prefix(), None);
            }
            other => panic!("expected the generic HMAC, got {other:?}"),
        }
    }

    #[test]
    fn a_generic_config_that_cannot_work_names_its_field() {
        let err = parse("hmac", Some(&settings("{id}.{body}"))).unwrap_err();
        assert_eq!(err.field, ["hmac", "header"]);
        let err = parse("hmac", Some(&settings("{nope}"))).unwrap_err();
        assert_eq!(err.field, ["hmac", "template"]);
        let hexed = HmacSettings {
            encoding: "base32".into(),
            ..settings("{body}")
        };
        assert_eq!(
            parse("hmac", Some(&hexed)).unwrap_err().field,
            ["hmac", "encoding"]
        );
    }
}
