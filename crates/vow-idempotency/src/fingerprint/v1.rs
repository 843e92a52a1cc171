//! Version 1 of the canonical form, kept only to judge requests against records written with
//! it until they expire: numbers went through `f64` (an integer written as `1.0` or `1e0` was
//! `1`, any other number its shortest round-trip `f64`), and a body serde_json could not read
//! (not JSON, or a number out of `f64`'s range such as `1e400`) counted as its exact text.
//!
//! A version 1 record is judged by version 1's rules: its body against the request's body in
//! version 1's form, and nothing else (version 1 kept no query, and the path's other ids were only
//! in its digest).

use serde_json::Value;

use super::pointers::canonical_differences;

/// Where `request_body` (a version 2 canonical body) differs from `stored`, a version 1
/// canonical body, by version 1's rules: empty when version 1 took them for the same request.
pub(crate) fn differences(stored: &str, request_body: &str) -> Vec<String> {
    match serde_json::from_str::<Value>(request_body) {
        Ok(json) => canonical_differences(stored, &canonical(&json)),
        Err(_) if stored == request_body => Vec::new(),
        Err(_) => vec![String::new()],
    }
}

/// `value` in version 1's canonical form.
fn canonical(value: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    write(value, &mut out);
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                write(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(v, out);
            }
            out.push(b']');
        }
        Value::Number(n) => out.extend_from_slice(normalise(n).as_bytes()),
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// An integral number as an integer, any other in its shortest round-trip form.
fn normalise(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        return format!("{}", f as i64);
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_judged_in_version_1s_form() {
        // What version 1 stored for these bodies.
        let stored =
            canonical(&serde_json::from_str(r#"{"a":18446744073709551616,"b":1.0}"#).unwrap());
        assert_eq!(stored, r#"{"a":1.8446744073709552e+19,"b":1}"#);
        assert!(differences(&stored, r#"{"a":18446744073709551616,"b":1}"#).is_empty());
        // Version 1 could not tell these apart, and its record cannot either.
        assert!(differences(&stored, r#"{"a":18446744073709551617,"b":1}"#).is_empty());
        assert_eq!(differences(&stored, r#"{"a":1,"b":1}"#), vec!["/a"]);
        // Bodies version 1 kept as text.
        assert!(differences("not json", "not json").is_empty());
        assert_eq!(differences("not json", "not  json"), vec![""]);
        assert!(differences(r#"{"a":1e400}"#, r#"{"a":1e400}"#).is_empty());
    }
}
