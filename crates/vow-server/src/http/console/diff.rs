//! What differs between two JSON documents, for the quarantine review: each added, removed
//! or changed value with its path (`data.object.amount`, `items[2]`), in document order.

use serde_json::Value;

/// One difference between the held payload (left) and the newcomer (right).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Where: dotted keys and `[i]` indexes; `$` for the whole document.
    pub path: String,
    /// The left value (compact JSON), `None` where only the right has one.
    pub left: Option<String>,
    /// The right value, `None` where only the left has one.
    pub right: Option<String>,
}

/// The differences from `left` to `right`; empty when they are equal.
pub fn changes(left: &Value, right: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk("$", left, right, &mut out);
    out
}

fn walk(path: &str, left: &Value, right: &Value, out: &mut Vec<Change>) {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            for (key, lv) in l {
                let at = child(path, key);
                match r.get(key) {
                    Some(rv) => walk(&at, lv, rv, out),
                    None => out.push(change(at, Some(lv), None)),
                }
            }
            for (key, rv) in r.iter().filter(|(k, _)| !l.contains_key(*k)) {
                out.push(change(child(path, key), None, Some(rv)));
            }
        }
        (Value::Array(l), Value::Array(r)) => {
            for i in 0..l.len().max(r.len()) {
                let at = format!("{path}[{i}]");
                match (l.get(i), r.get(i)) {
                    (Some(lv), Some(rv)) => walk(&at, lv, rv, out),
                    (lv, rv) => out.push(change(at, lv, rv)),
                }
            }
        }
        _ if left != right => out.push(change(path.to_string(), Some(left), Some(right))),
        _ => {}
    }
}

fn child(path: &str, key: &str) -> String {
    if path == "$" {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn change(path: String, left: Option<&Value>, right: Option<&Value>) -> Change {
    Change {
        path,
        left: left.map(Value::to_string),
        right: right.map(Value::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_documents_have_no_changes() {
        let doc = json!({"id": "evt_1", "data": {"amount": 5, "tags": ["a"]}});
        assert!(changes(&doc, &doc.clone()).is_empty());
    }

    #[test]
    fn changed_added_and_removed_values_are_named_by_path() {
        let left = json!({"id": "evt_1", "data": {"amount": 5, "gone": true, "items": [1, 2]}});
        let right = json!({"id": "evt_1", "data": {"amount": 7, "items": [1, 2, 3], "new": "x"}});
        let got = changes(&left, &right);
        let row = |p: &str, l: Option<&str>, r: Option<&str>| Change {
            path: p.into(),
            left: l.map(str::to_string),
            right: r.map(str::to_string),
        };
        assert_eq!(
            got,
            vec![
                row("data.amount", Some("5"), Some("7")),
                row("data.gone", Some("true"), None),
                row("data.items[2]", None, Some("3")),
                row("data.new", None, Some("\"x\"")),
            ]
        );
    }

    #[test]
    fn different_kinds_of_value_are_one_change() {
        let got = changes(&json!({"a": [1]}), &json!({"a": {"0": 1}}));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path, "a");
        assert_eq!(changes(&json!(1), &json!("1"))[0].path, "$");
    }
}
