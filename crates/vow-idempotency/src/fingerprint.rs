//! What makes two requests "the same": a SHA-256 over a canonical form of the method, the route
//! template and the body, tagged with the version of that canonical form, so the form can change
//! later without invalidating stored keys (a stored fingerprint is compared only with one of
//! its own version).
//!
//! Canonical JSON: object keys sorted by their UTF-8 bytes (that is, by code point), no
//! insignificant whitespace, strings with serde_json's minimal escaping, and numbers normalised: an integer
//! written as `1.0` or `1e0` is `1`; any other number is its shortest round-trip form. A body
//! that is not JSON is fingerprinted as its exact bytes.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The version of the canonical form [`Fingerprint::of`] computes.
pub const FINGERPRINT_VERSION: u16 = 1;

/// A request's fingerprint and the version of the canonical form it was computed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    /// [`FINGERPRINT_VERSION`] when it was computed.
    pub version: u16,
    /// SHA-256 of the canonical request.
    pub digest: [u8; 32],
}

impl Fingerprint {
    /// The fingerprint of a request: `method` (e.g. `POST`), the route template (e.g.
    /// `/api/v1/app/{app_id}/msg`, not the concrete path: the scope already holds the ids) and
    /// the raw body.
    pub fn of(method: &str, route: &str, body: &[u8]) -> Self {
        Self::with_canonical_body(method, route, body).0
    }

    /// [`Fingerprint::of`] and [`canonical_body`] together, parsing the body once.
    pub fn with_canonical_body(method: &str, route: &str, body: &[u8]) -> (Self, String) {
        let mut hash = Sha256::new();
        hash.update(method.to_ascii_uppercase().as_bytes());
        hash.update(b"\n");
        hash.update(route.as_bytes());
        hash.update(b"\n");
        let text = match serde_json::from_slice::<Value>(body) {
            Ok(json) => {
                let text = canonical(&json);
                hash.update(b"json\n");
                hash.update(text.as_bytes());
                text
            }
            Err(_) => {
                hash.update(b"bytes\n");
                hash.update(body);
                String::from_utf8_lossy(body).into_owned()
            }
        };
        let fingerprint = Self {
            version: FINGERPRINT_VERSION,
            digest: hash.finalize().into(),
        };
        (fingerprint, text)
    }

    /// The digest in hex, as stored.
    pub fn hex(&self) -> String {
        hex::encode(self.digest)
    }
}

/// A raw request body as a record keeps it, to tell a reuse which fields differ: canonical JSON
/// when it is JSON, else the text itself (invalid UTF-8 replaced).
pub fn canonical_body(raw: &[u8]) -> String {
    serde_json::from_slice::<Value>(raw)
        .map(|json| canonical(&json))
        .unwrap_or_else(|_| String::from_utf8_lossy(raw).into_owned())
}

/// `value` in canonical JSON.
pub fn canonical(value: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    write_canonical(value, &mut out);
    // serde_json writes UTF-8, and so does everything else here.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Writes straight into bytes: a string goes through serde_json's escaper once, with no
/// `Value` built around it and no `fmt` machinery (this runs on every keyed request's body).
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(k, out);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(v, out);
            }
            out.push(b']');
        }
        Value::Number(n) => out.extend_from_slice(normalise(n).as_bytes()),
        Value::String(text) => write_json(text, out),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Null => out.extend_from_slice(b"null"),
    }
}

/// A string as serde_json writes it (minimal escaping).
fn write_json(text: &str, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail, and a string always serialises.
    let _ = serde_json::to_writer(&mut *out, text);
}

/// An integral number as an integer, any other in its shortest round-trip form.
fn normalise(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    // Integral and exactly representable as i64: `1.0`, `1e2`, `-0.0` (as `0`).
    if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        return format!("{}", f as i64);
    }
    n.to_string()
}

/// The JSON pointers (RFC 6901) at which `a` and `b` differ: a member or item present in one and
/// not the other, or a different value where neither is a container of the same kind. Names
/// only, never values. Numbers compare in canonical form, so `1` and `1.0` are equal.
pub fn differences(a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff(a, b, &mut String::new(), &mut out);
    out
}

fn diff(a: &Value, b: &Value, at: &mut String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort_unstable();
            keys.dedup();
            for k in keys {
                let len = at.len();
                at.push('/');
                at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(v), Some(w)) => diff(v, w, at, out),
                    _ => out.push(at.clone()),
                }
                at.truncate(len);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let len = at.len();
                at.push('/');
                at.push_str(&i.to_string());
                match (x.get(i), y.get(i)) {
                    (Some(v), Some(w)) => diff(v, w, at, out),
                    _ => out.push(at.clone()),
                }
                at.truncate(len);
            }
        }
        (x, y) if canonical(x) != canonical(y) => out.push(at.clone()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const ROUTE: &str = "/api/v1/app/{app_id}/msg";

    #[test]
    fn key_order_whitespace_and_number_spelling_do_not_change_the_fingerprint() {
        let a = br#"{"eventType":"a.b","payload":{"n":1,"x":[1,2]}}"#;
        let b = b"{ \"payload\": { \"x\": [1.0, 2e0], \"n\": 1 },\n  \"eventType\": \"a.b\" }";
        assert_eq!(
            Fingerprint::of("POST", ROUTE, a),
            Fingerprint::of("post", ROUTE, b)
        );
        assert_eq!(
            canonical(&serde_json::from_slice(b).unwrap()),
            r#"{"eventType":"a.b","payload":{"n":1,"x":[1,2]}}"#
        );
    }

    #[test]
    fn a_different_value_method_route_or_array_order_changes_it() {
        let base = Fingerprint::of("POST", ROUTE, br#"{"a":[1,2]}"#);
        for other in [
            Fingerprint::of("POST", ROUTE, br#"{"a":[2,1]}"#),
            Fingerprint::of("POST", ROUTE, br#"{"a":[1,2],"b":null}"#),
            Fingerprint::of("PUT", ROUTE, br#"{"a":[1,2]}"#),
            Fingerprint::of("POST", "/api/v1/app", br#"{"a":[1,2]}"#),
            Fingerprint::of("POST", ROUTE, br#"{"a":[1,2.5]}"#),
        ] {
            assert_ne!(base, other);
        }
        assert_eq!(base.version, FINGERPRINT_VERSION);
        assert_eq!(base.hex().len(), 64);
    }

    #[test]
    fn a_body_that_is_not_json_is_fingerprinted_by_its_bytes() {
        let a = Fingerprint::of("POST", ROUTE, b"not json");
        assert_eq!(a, Fingerprint::of("POST", ROUTE, b"not json"));
        assert_ne!(a, Fingerprint::of("POST", ROUTE, b"not  json"));
        // The same text as JSON and as bytes are different inputs.
        assert_ne!(
            Fingerprint::of("POST", ROUTE, b"\"s\""),
            Fingerprint::of("POST", ROUTE, b"\"s")
        );
    }

    #[test]
    fn a_kept_body_is_canonical_json_or_else_its_text() {
        assert_eq!(
            canonical_body(br#"{ "b": 1.0, "a": [] }"#),
            r#"{"a":[],"b":1}"#
        );
        assert_eq!(canonical_body(b"not json \xff"), "not json \u{fffd}");
    }

    #[test]
    fn strings_keep_serde_jsons_minimal_escaping() {
        let v: Value =
            serde_json::from_str(r#"{"k\"/":["\u00e9\n\u0001\/",true,false,null,-0.0,2.5]}"#)
                .unwrap();
        assert_eq!(
            canonical(&v),
            "{\"k\\\"/\":[\"\u{e9}\\n\\u0001/\",true,false,null,0,2.5]}"
        );
    }

    #[test]
    fn one_parse_gives_the_same_fingerprint_and_kept_body_as_two() {
        for raw in [
            &br#"{ "b": 1.0, "a": [{"z": 2e0, "y": null}] }"#[..],
            b"not json \xff",
            b"",
            b"\"s\"",
        ] {
            assert_eq!(
                Fingerprint::with_canonical_body("post", ROUTE, raw),
                (Fingerprint::of("POST", ROUTE, raw), canonical_body(raw))
            );
        }
    }

    #[test]
    fn differences_name_the_pointers_and_never_the_values() {
        let a = json!({"eventType": "a.b", "payload": {"amount": 10, "tags": ["x"], "a/b~c": 1},
                       "channels": ["c1"]});
        let b = json!({"eventType": "a.b", "payload": {"amount": 11, "tags": ["x", "y"], "a/b~c": 1.0},
                       "eventId": "evt_1"});
        assert_eq!(
            differences(&a, &b),
            vec![
                "/channels",
                "/eventId",
                "/payload/amount",
                "/payload/tags/1"
            ]
        );
        assert!(differences(&a, &a).is_empty());
        let escaped = differences(&json!({"a/b~c": 1}), &json!({"a/b~c": 2}));
        assert_eq!(escaped, vec!["/a~1b~0c"]);
        assert_eq!(differences(&json!(1), &json!("1")), vec![""]);
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            "[a-z]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-d]{1,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn canonical_json_parses_back_to_the_same_value(v in arb_json()) {
            let text = canonical(&v);
            let back: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&back, &v);
            prop_assert_eq!(canonical(&back), text);
        }

        #[test]
        fn no_differences_exactly_when_fingerprints_match(a in arb_json(), b in arb_json()) {
            let same = Fingerprint::of("POST", ROUTE, a.to_string().as_bytes())
                == Fingerprint::of("POST", ROUTE, b.to_string().as_bytes());
            prop_assert_eq!(differences(&a, &b).is_empty(), same);
        }
    }
}
