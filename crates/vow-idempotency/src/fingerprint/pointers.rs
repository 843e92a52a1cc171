//! The JSON pointers (RFC 6901) at which two canonical bodies differ, for the `differences` a
//! reused key's 422 names, in both canonical forms' judgements.

use std::borrow::Cow;

use crate::canonical::Json;

/// The JSON pointers at which two canonical bodies differ (see [`super::differences`]).
pub(super) fn canonical_differences(a: &str, b: &str) -> Vec<String> {
    match (Json::parse(a.as_bytes()), Json::parse(b.as_bytes())) {
        (Some(a), Some(b)) => {
            let mut out = Vec::new();
            diff(&a, &b, &mut String::new(), &mut out);
            out
        }
        _ if a == b => Vec::new(),
        _ => vec![String::new()],
    }
}

fn diff(a: &Json<'_>, b: &Json<'_>, at: &mut String, out: &mut Vec<String>) {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            let mut keys: Vec<&str> = x.iter().chain(y).map(|(k, _)| k.as_ref()).collect();
            keys.sort_unstable();
            keys.dedup();
            for k in keys {
                let len = at.len();
                at.push('/');
                at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                match (member(x, k), member(y, k)) {
                    (Some(v), Some(w)) => diff(v, w, at, out),
                    _ => out.push(at.clone()),
                }
                at.truncate(len);
            }
        }
        (Json::Array(x), Json::Array(y)) => {
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
        (x, y) if x != y => out.push(at.clone()),
        _ => {}
    }
}

/// The value of `key` among an object's members (sorted by key, each key once).
fn member<'j, 'a>(members: &'j [(Cow<'a, str>, Json<'a>)], key: &str) -> Option<&'j Json<'a>> {
    let found = members.binary_search_by(|(m, _)| m.as_ref().cmp(key));
    found.ok().map(|i| &members[i].1)
}
