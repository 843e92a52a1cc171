//! Custom headers an endpoint sends with every delivery: validation, redaction, patching.
//!
//! Names must be valid HTTP header names and may not shadow what vow itself sends (the
//! signature headers, framing headers). Values of credential-bearing headers (`Authorization`,
//! cookies, API keys) are never returned: `GET …/headers` lists their names under `sensitive`.

use std::collections::BTreeMap;

use axum::http::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use super::validate::Problems;
use crate::error::ApiResult;

/// Headers vow sets itself; an endpoint may not override them.
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "x-signature",
    "x-delivery-id",
];

/// Prefixes of headers vow sets itself.
const RESERVED_PREFIXES: &[&str] = &["webhook-", "svix-", "vow-"];

/// Headers whose values are secrets.
const SENSITIVE: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
    "x-auth-token",
];

fn is_sensitive(name: &str) -> bool {
    SENSITIVE.contains(&name.to_ascii_lowercase().as_str())
}

/// Records a problem for every invalid or reserved header.
pub fn check_headers(p: &mut Problems, loc: &[&str], headers: &BTreeMap<String, String>) {
    for (name, value) in headers {
        let at: Vec<&str> = loc.iter().copied().chain([name.as_str()]).collect();
        let lower = name.to_ascii_lowercase();
        p.require(
            HeaderName::from_bytes(name.as_bytes()).is_ok(),
            &at,
            "is not a valid HTTP header name",
            "value_error.header_name",
        );
        p.require(
            !RESERVED.contains(&lower.as_str())
                && !RESERVED_PREFIXES.iter().any(|pre| lower.starts_with(pre)),
            &at,
            "is set by vow itself and cannot be overridden",
            "value_error.header_reserved",
        );
        p.require(
            HeaderValue::from_str(value).is_ok(),
            &at,
            "value must be visible ASCII without control characters",
            "value_error.header_value",
        );
    }
}

/// `EndpointHeadersIn`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = EndpointHeadersIn)]
pub struct HeadersIn {
    headers: BTreeMap<String, String>,
}

impl HeadersIn {
    /// The validated replacement set.
    pub fn validate(self) -> ApiResult<BTreeMap<String, String>> {
        let mut p = Problems::default();
        check_headers(&mut p, &["body", "headers"], &self.headers);
        p.finish()?;
        Ok(self.headers)
    }
}

/// `EndpointHeadersPatchIn`: a `null` value removes the header.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = EndpointHeadersPatchIn)]
pub struct HeadersPatchIn {
    headers: BTreeMap<String, Option<String>>,
}

impl HeadersPatchIn {
    /// `current` with the patch applied and validated. Names match case-insensitively.
    pub fn apply_to(
        self,
        mut current: BTreeMap<String, String>,
    ) -> ApiResult<BTreeMap<String, String>> {
        let mut set = BTreeMap::new();
        for (name, value) in self.headers {
            current.retain(|k, _| !k.eq_ignore_ascii_case(&name));
            if let Some(v) = value {
                set.insert(name, v);
            }
        }
        let mut p = Problems::default();
        check_headers(&mut p, &["body", "headers"], &set);
        p.finish()?;
        current.extend(set);
        Ok(current)
    }
}

/// `EndpointHeadersOut`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = EndpointHeadersOut)]
pub struct HeadersOut {
    headers: BTreeMap<String, String>,
    sensitive: Vec<String>,
}

impl HeadersOut {
    /// Splits headers into shown ones and the names of redacted sensitive ones.
    pub fn redacted(all: &BTreeMap<String, String>) -> Self {
        let (sensitive, shown): (BTreeMap<_, _>, BTreeMap<_, _>) = all
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .partition(|(k, _)| is_sensitive(k));
        Self {
            headers: shown,
            sensitive: sensitive.into_keys().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(headers: &[(&str, &str)]) -> usize {
        let map = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut p = Problems::default();
        check_headers(&mut p, &["body", "headers"], &map);
        match p.finish() {
            Ok(()) => 0,
            Err(crate::error::ApiError::Validation(items)) => items.len(),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn ordinary_headers_are_accepted() {
        assert_eq!(
            problems(&[("X-Tenant", "42"), ("Authorization", "Bearer x")]),
            0
        );
    }

    #[test]
    fn reserved_and_malformed_headers_are_refused() {
        assert_eq!(problems(&[("webhook-signature", "x")]), 1);
        assert_eq!(problems(&[("Content-Type", "text/plain")]), 1);
        assert_eq!(problems(&[("bad name", "x")]), 1);
        assert_eq!(problems(&[("X-Ok", "line\nbreak")]), 1);
    }

    #[test]
    fn sensitive_values_are_redacted() {
        let all = BTreeMap::from([
            ("Authorization".to_string(), "Bearer s3cret".to_string()),
            ("X-Tenant".to_string(), "42".to_string()),
        ]);
        let out = HeadersOut::redacted(&all);
        assert_eq!(out.sensitive, vec!["Authorization".to_string()]);
        assert!(!serde_json::to_string(&out).unwrap().contains("s3cret"));
    }
}
