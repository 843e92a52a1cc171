//! What makes two requests "the same": a SHA-256 over a canonical form of the method, the
//! route's target (its template with the path's other parameters filled in), the query
//! parameters that change what the route does, and the body, tagged with the version of that
//! form, so the form can change without invalidating stored keys (a record is judged by the
//! rules of its own version: [`v1`]).
//!
//! The body's canonical form is canonical JSON ([`crate::canonical`]: keys sorted, no
//! whitespace, minimal escaping, every number in an exact canonical spelling, so `1`, `1.0`,
//! `1e0` and `10e-1` are equal and any two different values differ); a body that is not JSON is
//! its exact bytes. The query is the caller's canonical text (`name=value` pairs, percent-encoded,
//! sorted by name, joined by `&`; empty when the route reads none).
//!
//! A record keeps the request's canonical text (the query, then the body) to tell a reuse what
//! differs: [`differences`] names the JSON pointers of the body and, as `?name`, the query
//! parameters.

mod pointers;
mod v1;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::Json;
use pointers::canonical_differences;

/// The version of the canonical form [`Fingerprint::of`] computes: 2 reads numbers exactly and
/// covers the query; 1 read numbers through `f64` ([`v1`]).
pub const FINGERPRINT_VERSION: u16 = 2;

/// A request's fingerprint and the version of the canonical form it was computed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    /// [`FINGERPRINT_VERSION`] when it was computed.
    pub version: u16,
    /// SHA-256 of the canonical request.
    pub digest: [u8; 32],
}

impl Fingerprint {
    /// The fingerprint of a request without a query: `method` (e.g. `POST`), the route's target
    /// (e.g. `/api/v1/app/{app_id}/msg`, not the concrete path: the scope already holds the
    /// application) and the raw body.
    pub fn of(method: &str, route: &str, body: &[u8]) -> Self {
        Self::of_request(method, route, "", body).0
    }

    /// [`Fingerprint::of`] and [`canonical_body`] together, parsing the body once.
    pub fn with_canonical_body(method: &str, route: &str, body: &[u8]) -> (Self, String) {
        Self::of_request(method, route, "", body)
    }

    /// The fingerprint of a request with its canonical `query` (see the module docs), and the
    /// canonical text a record keeps for it (what [`differences`] compares), parsing the body
    /// once.
    pub fn of_request(method: &str, route: &str, query: &str, body: &[u8]) -> (Self, String) {
        let mut hash = Sha256::new();
        hash.update(method.to_ascii_uppercase().as_bytes());
        hash.update(b"\n");
        hash.update(route.as_bytes());
        if !query.is_empty() {
            hash.update(b"?");
            hash.update(query.as_bytes());
        }
        hash.update(b"\n");
        let text = match Json::parse(body) {
            Some(json) => {
                let text = json.to_text();
                hash.update(b"json\n");
                hash.update(text.as_bytes());
                text
            }
            None => {
                hash.update(b"bytes\n");
                hash.update(body);
                String::from_utf8_lossy(body).into_owned()
            }
        };
        let fingerprint = Self {
            version: FINGERPRINT_VERSION,
            digest: hash.finalize().into(),
        };
        (fingerprint, join(query, text))
    }

    /// The digest in hex, as stored.
    pub fn hex(&self) -> String {
        hex::encode(self.digest)
    }
}

/// A raw request body as a record keeps it, to tell a reuse which fields differ: canonical JSON
/// when it is JSON, else the text itself (invalid UTF-8 replaced).
pub fn canonical_body(raw: &[u8]) -> String {
    match Json::parse(raw) {
        Some(json) => json.to_text(),
        None => String::from_utf8_lossy(raw).into_owned(),
    }
}

/// `value` in canonical JSON.
pub fn canonical(value: &Value) -> String {
    canonical_body(value.to_string().as_bytes())
}

/// The canonical text a record keeps: the body alone when there is no query (and the body does
/// not start with `?`), else `?`, the query, a line feed, and the body. A query never holds a
/// line feed (it is percent-encoded).
fn join(query: &str, body: String) -> String {
    if query.is_empty() && !body.starts_with('?') {
        body
    } else {
        format!("?{query}\n{body}")
    }
}

/// A kept canonical text split into its query and its body.
fn split(text: &str) -> (&str, &str) {
    match text.strip_prefix('?') {
        Some(rest) => rest.split_once('\n').unwrap_or((rest, "")),
        None => ("", text),
    }
}

/// Where two requests differ, from the canonical texts their records keep (version 2): `?name`
/// for each query parameter whose values differ, then the JSON pointers (RFC 6901) at which the
/// bodies differ: a member or item present in one and not the other, or a different value where
/// neither is a container of the same kind. Names only, never values. Numbers compare by value,
/// so `1` and `1.0` are equal. A body that is not JSON differs as a whole (`""`) unless it is the
/// same text.
pub fn differences(a: &str, b: &str) -> Vec<String> {
    let ((query_a, body_a), (query_b, body_b)) = (split(a), split(b));
    let mut out = query_differences(query_a, query_b);
    out.extend(canonical_differences(body_a, body_b));
    out
}

/// [`differences`] for a record of `version`, kept text `stored`, and a request's canonical text
/// (the current version's).
pub(crate) fn differences_across(version: u16, stored: &str, request: &str) -> Vec<String> {
    match version {
        1 => v1::differences(stored, split(request).1),
        _ => differences(stored, request),
    }
}

/// `?name` for each parameter whose values differ between two canonical queries.
fn query_differences(a: &str, b: &str) -> Vec<String> {
    if a == b {
        return Vec::new();
    }
    let params = |q: &str| -> Vec<(String, String)> {
        q.split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (name, value) = p.split_once('=').unwrap_or((p, ""));
                (name.to_owned(), value.to_owned())
            })
            .collect()
    };
    let (a, b) = (params(a), params(b));
    let mut names: Vec<&String> = a.iter().chain(&b).map(|(n, _)| n).collect();
    names.sort_unstable();
    names.dedup();
    let values = |params: &[(String, String)], name: &str| -> Vec<String> {
        params
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    };
    names
        .into_iter()
        .filter(|name| values(&a, name) != values(&b, name))
        .map(|name| format!("?{name}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const ROUTE: &str = "/api/v1/app/{app_id}/msg";

    fn fp(body: &str) -> Fingerprint {
        Fingerprint::of("POST", ROUTE, body.as_bytes())
    }

    #[test]
    fn key_order_whitespace_and_number_spelling_do_not_change_the_fingerprint() {
        let a = br#"{"eventType":"a.b","payload":{"n":1,"x":[1,2]}}"#;
        let b = b"{ \"payload\": { \"x\": [1.0, 2e0], \"n\": 10e-1 },\n  \"eventType\": \"a.b\" }";
        assert_eq!(
            Fingerprint::of("POST", ROUTE, a),
            Fingerprint::of("post", ROUTE, b)
        );
        assert_eq!(
            canonical(&serde_json::from_slice(b).unwrap()),
            r#"{"eventType":"a.b","payload":{"n":1,"x":[1,2]}}"#
        );
        for one in ["1", "1.0", "1e0", "10e-1", "0.1e1", "100e-2"] {
            assert_eq!(fp(&format!(r#"{{"n":{one}}}"#)), fp(r#"{"n":1}"#), "{one}");
        }
        assert_eq!(fp(r#"{"n":-0}"#), fp(r#"{"n":0}"#));
    }

    #[test]
    fn numbers_are_exact_past_64_bits_and_f64() {
        let pairs = [
            ("18446744073709551616", "18446744073709551617"),
            ("123456789.123456789", "123456789.123456788"),
            ("1e400", "1e401"),
            ("0.1", "0.10000000000000000001"),
        ];
        for (a, b) in pairs {
            let (a, b) = (
                format!(r#"{{"amount":{a}}}"#),
                format!(r#"{{"amount":{b}}}"#),
            );
            assert_ne!(fp(&a), fp(&b), "{a} {b}");
            assert_eq!(
                differences(&canonical_body(a.as_bytes()), &canonical_body(b.as_bytes())),
                vec!["/amount"]
            );
        }
        assert_eq!(
            canonical_body(br#"{"a":18446744073709551617,"b":123456789.123456789123,"c":1E400}"#),
            r#"{"a":18446744073709551617,"b":123456789.123456789123,"c":1e400}"#
        );
    }

    #[test]
    fn a_different_value_method_route_query_or_array_order_changes_it() {
        let base = Fingerprint::of("POST", ROUTE, br#"{"a":[1,2]}"#);
        for other in [
            Fingerprint::of("POST", ROUTE, br#"{"a":[2,1]}"#),
            Fingerprint::of("POST", ROUTE, br#"{"a":[1,2],"b":null}"#),
            Fingerprint::of("PUT", ROUTE, br#"{"a":[1,2]}"#),
            Fingerprint::of("POST", "/api/v1/app", br#"{"a":[1,2]}"#),
            Fingerprint::of("POST", ROUTE, br#"{"a":[1,2.5]}"#),
            Fingerprint::of_request("POST", ROUTE, "with_content=false", br#"{"a":[1,2]}"#).0,
        ] {
            assert_ne!(base, other);
        }
        assert_eq!(base.version, FINGERPRINT_VERSION);
        assert_eq!(base.hex().len(), 64);
    }

    #[test]
    fn the_kept_text_holds_the_query_and_differences_name_its_parameters() {
        let body = br#"{"a":1}"#;
        let (_, plain) = Fingerprint::of_request("POST", ROUTE, "", body);
        let (_, quiet) = Fingerprint::of_request("POST", ROUTE, "with_content=false", body);
        assert_eq!(plain, r#"{"a":1}"#);
        assert_eq!(quiet, "?with_content=false\n{\"a\":1}");
        assert_eq!(differences(&plain, &quiet), vec!["?with_content"]);
        let (_, two) = Fingerprint::of_request("POST", ROUTE, "a=1&b=2", br#"{"a":2}"#);
        let (_, other) = Fingerprint::of_request("POST", ROUTE, "a=1&b=3", br#"{"a":1}"#);
        assert_eq!(differences(&two, &other), vec!["?b", "/a"]);
        assert!(differences(&quiet, &quiet).is_empty());
        // A body that starts with `?` is never taken for a query.
        let (_, odd) = Fingerprint::of_request("POST", ROUTE, "", b"?x\ny");
        assert_eq!(split(&odd), ("", "?x\ny"));
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
        assert!(differences("not json", "not json").is_empty());
        assert_eq!(differences("not json", "{}"), vec![""]);
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
        let diff = |a: &Value, b: &Value| differences(&canonical(a), &canonical(b));
        assert_eq!(
            diff(&a, &b),
            vec![
                "/channels",
                "/eventId",
                "/payload/amount",
                "/payload/tags/1"
            ]
        );
        assert!(diff(&a, &a).is_empty());
        let escaped = diff(&json!({"a/b~c": 1}), &json!({"a/b~c": 2}));
        assert_eq!(escaped, vec!["/a~1b~0c"]);
        assert_eq!(diff(&json!(1), &json!("1")), vec![""]);
        assert_eq!(
            diff(&json!({"a": [1]}), &json!({"a": {"0": 1}})),
            vec!["/a"]
        );
    }

    /// A JSON value whose numbers are `±D × 10^k` with `D` free of leading and trailing zeros,
    /// so two trees are equal exactly when the values are.
    #[derive(Debug, Clone, PartialEq)]
    enum Tree {
        Null,
        Bool(bool),
        Zero,
        Number(bool, String, i64),
        Text(String),
        Array(Vec<Tree>),
        Object(std::collections::BTreeMap<String, Tree>),
    }

    fn arb_tree() -> impl Strategy<Value = Tree> {
        let leaf = prop_oneof![
            Just(Tree::Null),
            any::<bool>().prop_map(Tree::Bool),
            Just(Tree::Zero),
            // Small integers and decimals, integers past 64 bits, long decimals, and exponents
            // far outside f64's range.
            (any::<bool>(), "[1-9]([0-9]{0,2}[1-9])?", -3i64..3)
                .prop_map(|(neg, d, k)| Tree::Number(neg, d, k)),
            (any::<bool>(), "[1-9]([0-9]{18,30}[1-9])?", -25i64..5)
                .prop_map(|(neg, d, k)| Tree::Number(neg, d, k)),
            (any::<bool>(), "[1-9][0-9]{0,3}", -500i64..500).prop_map(|(neg, d, k)| {
                Tree::Number(neg, d.trim_end_matches('0').to_owned(), k)
            }),
            "[a-z\u{e9}\"\\\\\n]{0,4}".prop_map(Tree::Text),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Tree::Array),
                prop::collection::btree_map("[a-d]{1,2}", inner, 0..4).prop_map(Tree::Object),
            ]
        })
    }

    /// `tree` as JSON text, each number spelled in one of many ways chosen by `seed`, with
    /// whitespace here and there.
    fn spell(tree: &Tree, seed: &mut u64) -> String {
        fn roll(seed: &mut u64, n: u64) -> u64 {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (*seed >> 33) % n
        }
        match tree {
            Tree::Null => "null".into(),
            Tree::Bool(b) => b.to_string(),
            Tree::Zero => ["0", "-0", "0.0", "0e7", "-0.00E-3"][roll(seed, 5) as usize].into(),
            Tree::Number(neg, d, k) => {
                // D followed by z zeros, its point after p digits, and the exponent that makes
                // it the value: D × 10^z × 10^(e - (len - p)) = D × 10^k.
                let z = roll(seed, 3) as usize;
                let digits = format!("{d}{}", "0".repeat(z));
                let p = 1 + roll(seed, digits.len() as u64) as usize;
                let (int, frac) = digits.split_at(p);
                let e = k - z as i64 + frac.len() as i64;
                let mut out = String::from(if *neg { "-" } else { "" });
                out.push_str(int);
                if !frac.is_empty() {
                    out.push('.');
                    out.push_str(frac);
                }
                if e != 0 || roll(seed, 2) == 0 {
                    let marks = if e < 0 { 2 } else { 3 };
                    out.push_str(["e", "E", "e+"][roll(seed, marks) as usize]);
                    out.push_str(&e.to_string());
                }
                out
            }
            Tree::Text(t) => serde_json::to_string(t).unwrap(),
            Tree::Array(items) => {
                let items: Vec<String> = items.iter().map(|i| spell(i, seed)).collect();
                format!("[{}]", items.join(", "))
            }
            Tree::Object(members) => {
                let mut members: Vec<String> = members
                    .iter()
                    .map(|(k, v)| {
                        format!("{}: {}", serde_json::to_string(k).unwrap(), spell(v, seed))
                    })
                    .collect();
                if roll(seed, 2) == 0 {
                    members.reverse();
                }
                format!("{{ {} }}", members.join(","))
            }
        }
    }

    proptest! {
        #[test]
        fn canonical_json_parses_back_to_itself(t in arb_tree(), seed in any::<u64>()) {
            let text = canonical_body(spell(&t, &mut seed.clone()).as_bytes());
            prop_assert!(Json::parse(text.as_bytes()).is_some(), "{}", text);
            prop_assert_eq!(canonical_body(text.as_bytes()), text);
        }

        #[test]
        fn every_spelling_of_a_value_has_its_fingerprint(t in arb_tree(), a in any::<u64>(), b in any::<u64>()) {
            let (x, y) = (spell(&t, &mut a.clone()), spell(&t, &mut b.clone()));
            prop_assert_eq!(fp(&x), fp(&y), "{} {}", x, y);
            prop_assert!(differences(&canonical_body(x.as_bytes()), &canonical_body(y.as_bytes())).is_empty());
        }

        #[test]
        fn no_differences_exactly_when_values_and_fingerprints_match(
            s in arb_tree(), t in arb_tree(), a in any::<u64>(), b in any::<u64>(),
        ) {
            let (x, y) = (spell(&s, &mut a.clone()), spell(&t, &mut b.clone()));
            let same = fp(&x) == fp(&y);
            prop_assert_eq!(same, s == t, "{} {}", x, y);
            let none = differences(&canonical_body(x.as_bytes()), &canonical_body(y.as_bytes())).is_empty();
            prop_assert_eq!(none, same, "{} {}", x, y);
        }
    }
}
