//! Extractors that turn bad input into precise [`ApiError`]s instead of axum's plain-text
//! rejections: JSON bodies (400 for syntax, 413 over the limit, 415 for another media type, 422
//! naming the field for wrong types, missing fields and fields vow does not have, unless they
//! are `null`) and query strings (422 naming the parameter).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ValidationItem};

/// A JSON body, deserialized with field-precise errors.
pub struct ValidJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ValidJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let ValidJsonBytes(value, _) = ValidJsonBytes::from_request(req, state).await?;
        Ok(ValidJson(value))
    }
}

/// A JSON body read and checked as [`ValidJson`] does, with its raw bytes kept too (an
/// `Idempotency-Key` fingerprint covers the body as sent).
pub struct ValidJsonBytes<T>(pub T, pub Bytes);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ValidJsonBytes<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = read_body(req, state).await?;
        parse_json(&bytes).map(|value| ValidJsonBytes(value, bytes))
    }
}

/// A JSON body that may be left out entirely (an empty body reads as `None`), with its raw
/// bytes (for an `Idempotency-Key` fingerprint).
pub struct MaybeJson<T>(pub Option<T>, pub Bytes);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for MaybeJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = read_body(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(MaybeJson(None, bytes));
        }
        parse_json(&bytes).map(|v| MaybeJson(Some(v), bytes))
    }
}

/// Checks the media type and reads the body within the configured limit.
async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    {
        if let Some(ct) = req.headers().get(CONTENT_TYPE) {
            let ct = ct.to_str().unwrap_or_default().to_ascii_lowercase();
            let essence = ct.split(';').next().unwrap_or_default().trim();
            if !(essence == "application/json" || essence.ends_with("+json")) {
                return Err(ApiError::UnsupportedMediaType(format!(
                    "expected a JSON body (content-type: application/json), got {essence:?}"
                )));
            }
        }
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map_or(usize::MAX, |l| l.0);
        Bytes::from_request(req, state)
            .await
            .map_err(|e| body_rejection(e, limit))
    }
}

/// The configured body limit, put in request extensions by the router so rejections can say it.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit(pub usize);

fn body_rejection(e: BytesRejection, limit: usize) -> ApiError {
    if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge { limit }
    } else {
        ApiError::BadRequest {
            code: "invalid_body",
            detail: format!("could not read the request body: {e}"),
        }
    }
}

/// Deserializes JSON, mapping syntax errors to 400 and data errors to 422 at the field's path.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::BadRequest {
            code: "invalid_json",
            detail: "the request body is empty; expected a JSON object".into(),
        });
    }
    let mut ignored = Vec::new();
    let result: Result<T, _> = {
        let mut note = |path: serde_ignored::Path<'_>| ignored.push(ignored_segments(&path));
        let mut json = serde_json::Deserializer::from_slice(bytes);
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(&mut json, &mut note))
    };
    let err = match result {
        Ok(v) if ignored.is_empty() => return Ok(v),
        Ok(v) => return refuse_unsupported(bytes, &ignored).map(|()| v),
        Err(err) => err,
    };
    let inner = err.inner();
    if !inner.is_data() {
        return Err(ApiError::BadRequest {
            code: "invalid_json",
            detail: format!("the request body is not valid JSON: {inner}"),
        });
    }
    let mut loc = vec!["body".to_string()];
    loc.extend(path_segments(err.path()));
    let msg = strip_position(&inner.to_string());
    let kind = if let Some(field) = missing_field(&msg) {
        loc.push(field.to_string());
        "value_error.missing"
    } else if msg.starts_with("invalid type") {
        "type_error"
    } else {
        "value_error"
    };
    Err(ApiError::Validation(vec![ValidationItem {
        loc,
        msg,
        kind: kind.into(),
    }]))
}

/// A field the target type does not have, as its path from the body's root.
fn ignored_segments(path: &serde_ignored::Path<'_>) -> Vec<String> {
    use serde_ignored::Path;
    let (parent, segment) = match path {
        Path::Root => return Vec::new(),
        Path::Seq { parent, index } => (parent, Some(index.to_string())),
        Path::Map { parent, key } => (parent, Some(key.clone())),
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => (parent, None),
    };
    let mut segments = ignored_segments(parent);
    segments.extend(segment);
    segments
}

/// Fields vow does not have are refused, each named, unless they are `null` (what a client
/// sends for a field it leaves unset): a field vow would drop silently is a request it would
/// not carry out as asked (a Svix field vow does not support, or a misspelt one).
fn refuse_unsupported(bytes: &[u8], ignored: &[Vec<String>]) -> Result<(), ApiError> {
    let body: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ApiError::BadRequest {
            code: "invalid_json",
            detail: format!("the request body is not valid JSON: {e}"),
        })?;
    let items: Vec<ValidationItem> = ignored
        .iter()
        .filter(|path| {
            let value = path.iter().try_fold(&body, |v, key| match v {
                serde_json::Value::Array(items) => {
                    key.parse().ok().and_then(|i: usize| items.get(i))
                }
                other => other.get(key),
            });
            value.is_some_and(|v| !v.is_null())
        })
        .map(|path| ValidationItem {
            loc: std::iter::once("body".to_string())
                .chain(path.iter().cloned())
                .collect(),
            msg: "vow does not support this field; leave it out".into(),
            kind: "value_error.unsupported_field".into(),
        })
        .collect();
    if items.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Validation(items))
    }
}

fn path_segments(path: &serde_path_to_error::Path) -> Vec<String> {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|seg| match seg {
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Map { key } => Some(key.clone()),
            Segment::Enum { variant } => Some(variant.clone()),
            Segment::Unknown => None,
        })
        .collect()
}

/// serde_json appends " at line L column C"; the loc already says where.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

fn missing_field(msg: &str) -> Option<&str> {
    msg.strip_prefix("missing field `")?.strip_suffix('`')
}

/// A query string, deserialized with repeated keys allowed (`event_types=a&event_types=b`),
/// rejecting with 422 naming the parameter.
pub struct ValidQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ValidQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_html_form::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(ValidQuery)
            .map_err(|err| {
                let mut loc = vec!["query".to_string()];
                loc.extend(path_segments(err.path()));
                let msg = err.inner().to_string();
                if let Some(field) = missing_field(&msg) {
                    loc.push(field.to_string());
                }
                ApiError::Validation(vec![ValidationItem {
                    loc,
                    msg,
                    kind: "value_error".into(),
                }])
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct In {
        name: String,
        n: Option<u16>,
    }

    fn locs(e: ApiError) -> (Vec<String>, String) {
        match e {
            ApiError::Validation(items) => (items[0].loc.clone(), items[0].kind.clone()),
            other => panic!("expected validation, got {other:?}"),
        }
    }

    #[test]
    fn syntax_errors_are_400() {
        for body in ["{", "{\"name\": }", "nul", "   "] {
            let e = parse_json::<In>(body.as_bytes()).unwrap_err();
            assert_eq!(e.status(), 400, "{body}");
        }
    }

    #[test]
    fn a_missing_field_is_named() {
        let (loc, kind) = locs(parse_json::<In>(b"{}").unwrap_err());
        assert_eq!(loc, ["body", "name"]);
        assert_eq!(kind, "value_error.missing");
    }

    #[test]
    fn an_unsupported_field_is_named_unless_null() {
        let e = parse_json::<In>(br#"{"name":"a","tags":["x"],"nested":{"a":1}}"#).unwrap_err();
        let ApiError::Validation(items) = e else {
            panic!("expected validation");
        };
        let locs: Vec<_> = items.iter().map(|i| i.loc.join(".")).collect();
        assert_eq!(locs, ["body.tags", "body.nested"]);
        assert!(items
            .iter()
            .all(|i| i.kind == "value_error.unsupported_field"));
        let ok = parse_json::<In>(br#"{"name":"a","tags":null}"#).unwrap();
        assert_eq!(ok.name, "a");
    }

    #[test]
    fn a_wrong_type_is_named() {
        let (loc, kind) = locs(parse_json::<In>(br#"{"name":"a","n":"x"}"#).unwrap_err());
        assert_eq!(loc, ["body", "n"]);
        assert_eq!(kind, "type_error");
        let (loc, _) = locs(parse_json::<In>(br#"{"name":"a","n":70000}"#).unwrap_err());
        assert_eq!(loc, ["body", "n"]);
    }
}
