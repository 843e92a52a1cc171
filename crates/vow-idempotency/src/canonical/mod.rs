//! Canonical JSON, read straight from the body's text so that numbers stay exact: a tree
//! ([`Json`]) whose objects are sorted by key and whose numbers are their canonical spelling
//! ([`number`]), and its one written form.
//!
//! The written form: object keys sorted by their UTF-8 bytes (that is, by code point), a key
//! that occurs twice counts once with its last value (as `serde_json::Value` reads it), no
//! insignificant whitespace, strings with serde_json's minimal escaping (only `"`, `\` and
//! control characters are escaped), numbers in their canonical spelling. A text that is not one
//! JSON value (RFC 8259, UTF-8, at most [`MAX_DEPTH`] levels deep) has no tree.
//!
//! Strings with an escape are decoded by serde_json; everything else is a single pass over the
//! bytes that borrows from the text (this runs on every keyed request's body).

mod number;

use std::borrow::Cow;

/// How deeply arrays and objects may nest (serde_json's own limit).
pub(crate) const MAX_DEPTH: usize = 128;

/// A JSON value in canonical form. Two trees are equal exactly when the values are (numbers by
/// value, objects by their members), so `==` is the comparison the fingerprint makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    /// The canonical spelling (borrowed when it is the text, as for most integers).
    Number(Cow<'a, str>),
    /// The decoded text.
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    /// Sorted by key, each key once.
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// The tree of `text`, or `None` when it is not one JSON value.
    pub(crate) fn parse(text: &'a [u8]) -> Option<Self> {
        let text = std::str::from_utf8(text).ok()?;
        let mut reader = Reader { text, at: 0 };
        let value = reader.value(0)?;
        reader.whitespace();
        (reader.at == text.len()).then_some(value)
    }

    /// The written form.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match self {
            Self::Null => out.extend_from_slice(b"null"),
            Self::Bool(true) => out.extend_from_slice(b"true"),
            Self::Bool(false) => out.extend_from_slice(b"false"),
            Self::Number(n) => out.extend_from_slice(n.as_bytes()),
            Self::String(s) => write_string(s, out),
            Self::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item.write(out);
                }
                out.push(b']');
            }
            Self::Object(members) => {
                out.push(b'{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_string(key, out);
                    out.push(b':');
                    value.write(out);
                }
                out.push(b'}');
            }
        }
    }

    /// The written form as text.
    pub(crate) fn to_text(&self) -> String {
        let mut out = Vec::with_capacity(256);
        self.write(&mut out);
        // Every part written is UTF-8.
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
    }
}

/// A string as serde_json writes it (minimal escaping).
fn write_string(text: &str, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail, and a string always serialises.
    let _ = serde_json::to_writer(&mut *out, text);
}

/// A cursor over the text.
struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// Consumes `byte` after any whitespace.
    fn eat(&mut self, byte: u8) -> bool {
        self.whitespace();
        let found = self.peek() == Some(byte);
        self.at += usize::from(found);
        found
    }

    fn value(&mut self, depth: usize) -> Option<Json<'a>> {
        self.whitespace();
        match self.peek()? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(Json::String),
            b't' => self.literal("true", Json::Bool(true)),
            b'f' => self.literal("false", Json::Bool(false)),
            b'n' => self.literal("null", Json::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &str, value: Json<'a>) -> Option<Json<'a>> {
        self.text[self.at..].starts_with(word).then(|| {
            self.at += word.len();
            value
        })
    }

    fn number(&mut self) -> Option<Json<'a>> {
        let rest = &self.text.as_bytes()[self.at..];
        let len = rest
            .iter()
            .take_while(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .count();
        let text = &self.text[self.at..self.at + len];
        self.at += len;
        number::canonical(text).map(Json::Number)
    }

    /// A string literal, decoded: borrowed when it has no escape.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let start = self.at;
        let bytes = self.text.as_bytes();
        let mut i = start + 1;
        let mut escaped = false;
        loop {
            match *bytes.get(i)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    i += 2;
                }
                0x00..=0x1f => return None,
                _ => i += 1,
            }
        }
        self.at = i + 1;
        if escaped {
            serde_json::from_str::<String>(&self.text[start..=i])
                .ok()
                .map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(&self.text[start + 1..i]))
        }
    }

    fn array(&mut self, depth: usize) -> Option<Json<'a>> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.at += 1;
        let mut items = Vec::new();
        if self.eat(b']') {
            return Some(Json::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            if self.eat(b']') {
                return Some(Json::Array(items));
            }
            if !self.eat(b',') {
                return None;
            }
        }
    }

    fn object(&mut self, depth: usize) -> Option<Json<'a>> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.at += 1;
        let mut members = Vec::new();
        if !self.eat(b'}') {
            loop {
                self.whitespace();
                if self.peek() != Some(b'"') {
                    return None;
                }
                let key = self.string()?;
                if !self.eat(b':') {
                    return None;
                }
                members.push((key, self.value(depth)?));
                if self.eat(b'}') {
                    break;
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }
        // Stable, so of a repeated key the last value comes last; keep that one.
        members.sort_by(|a, b| a.0.cmp(&b.0));
        members.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
        Some(Json::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> Option<String> {
        Json::parse(text.as_bytes()).map(|j| j.to_text())
    }

    #[test]
    fn keys_are_sorted_and_a_repeated_key_keeps_its_last_value() {
        assert_eq!(
            canonical(
                r#" { "b" : [ 1.0 , {"z":null,"a":true} ], "a":"x", "b2": false, "a":"y" } "#
            )
            .as_deref(),
            Some(r#"{"a":"y","b":[1,{"a":true,"z":null}],"b2":false}"#)
        );
        assert_eq!(canonical("{}").as_deref(), Some("{}"));
        assert_eq!(canonical("[]").as_deref(), Some("[]"));
        assert_eq!(canonical(" 1e400 ").as_deref(), Some("1e400"));
    }

    #[test]
    fn strings_are_decoded_and_written_with_minimal_escaping() {
        let text = r#"["\u00e9\n\u0001\/", "plain \u007f", "\ud83d\ude00", "é"]"#;
        assert_eq!(
            canonical(text).as_deref(),
            Some("[\"\u{e9}\\n\\u0001/\",\"plain \u{7f}\",\"\u{1f600}\",\"\u{e9}\"]")
        );
        // The same as serde_json writes the value it reads.
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(canonical(text).unwrap(), value.to_string());
    }

    #[test]
    fn what_is_not_one_json_value_has_no_tree() {
        for bad in [
            "",
            " ",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{a:1}",
            "[1 2]",
            "tru",
            "nul",
            "\"unterminated",
            "\"raw \u{1} control\"",
            "\"bad \\x escape\"",
            "\"\\ud800\"",
            "1 2",
            "[01]",
            "{\"a\":1}}",
            "'s'",
        ] {
            assert_eq!(canonical(bad), None, "{bad:?}");
        }
        assert_eq!(Json::parse(b"\"\xff\""), None);
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(canonical(&deep(MAX_DEPTH)).is_some());
        assert_eq!(canonical(&deep(MAX_DEPTH + 1)), None);
    }
}
