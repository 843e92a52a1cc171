//! A captured HTTP request read back from files, for `vow verify`: `Name: value` header lines,
//! or a whole raw request (request line, headers, a blank line, then the body bytes exactly).

use anyhow::{bail, Context};

/// A request as captured: its headers in order, its exact body, and the URL it was sent to
/// when the capture says (`Host` and the request target).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// `(name, value)` pairs, as written (the verifier looks names up ignoring case).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body bytes.
    pub body: Vec<u8>,
    /// `http://HOST/TARGET`, or the absolute target, when the capture holds a request line.
    pub url: Option<String>,
}

/// `Name: value` lines (blank lines ignored; a line ending may be `\n` or `\r\n`). `what`
/// names the input in errors.
pub fn headers(what: &str, text: &[u8]) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut headers = Vec::new();
    for (number, line) in lines(text).enumerate() {
        if line.is_empty() {
            continue;
        }
        headers.push(header(line).with_context(|| format!("{what}, line {}", number + 1))?);
    }
    Ok(headers)
}

/// A raw HTTP/1.x request: `METHOD TARGET HTTP/1.1`, header lines, a blank line, the body. A
/// `Content-Length` cuts the body at that length (an editor's trailing newline is not part of
/// it); a shorter body than it says is an error, and so is a chunked one.
pub fn request(what: &str, raw: &[u8]) -> anyhow::Result<Captured> {
    let (head, body) = split_head(raw)
        .with_context(|| format!("{what}: no blank line ends the headers of the request"))?;
    let mut lines = lines(head);
    let request_line = lines.next().unwrap_or_default();
    let target = request_target(request_line)
        .with_context(|| format!("{what}, line 1: expected `METHOD TARGET HTTP/1.1`"))?;
    let mut headers = Vec::new();
    for (number, line) in lines.enumerate() {
        headers.push(header(line).with_context(|| format!("{what}, line {}", number + 2))?);
    }
    let header_value = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    };
    if header_value("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"))
    {
        bail!("{what}: a chunked body is not supported: save the request with its decoded body");
    }
    let body = match header_value("content-length") {
        Some(length) => {
            let length: usize = length.trim().parse().with_context(|| {
                format!("{what}: Content-Length {length:?} is not a number of bytes")
            })?;
            if body.len() < length {
                bail!(
                    "{what}: Content-Length says {length} bytes but the body has only {}",
                    body.len()
                );
            }
            body[..length].to_vec()
        }
        None => body.to_vec(),
    };
    let url = if target.starts_with("http://") || target.starts_with("https://") {
        Some(target.to_string())
    } else {
        header_value("host").map(|host| format!("http://{}{target}", host.trim()))
    };
    Ok(Captured { headers, body, url })
}

/// The head (request line and headers) and the body after the first blank line.
fn split_head(raw: &[u8]) -> Option<(&[u8], &[u8])> {
    let crlf = find(raw, b"\r\n\r\n").map(|i| (i, 4));
    let lf = find(raw, b"\n\n").map(|i| (i, 2));
    let (at, len) = match (crlf, lf) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    Some((&raw[..at], &raw[at + len..]))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The lines of `text`, without their `\n` or `\r\n`.
fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    text.split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(move |_| !text.is_empty())
}

/// One `Name: value` line (the value without surrounding spaces or tabs).
fn header(line: &[u8]) -> anyhow::Result<(String, Vec<u8>)> {
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .context("expected `Name: value`")?;
    let name = std::str::from_utf8(&line[..colon])
        .ok()
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic()))
        .context("the header name is empty or not a token")?;
    let value = line[colon + 1..].trim_ascii();
    Ok((name.to_string(), value.to_vec()))
}

/// The target of `METHOD TARGET HTTP/x`.
fn request_target(line: &[u8]) -> Option<&str> {
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    let (_method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    (version.starts_with("HTTP/") && parts.next().is_none()).then_some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lines_keep_names_and_trim_values() {
        let parsed = headers("--headers", b"Webhook-Id: msg_1\r\n\r\nx-a:\tb c \n").unwrap();
        assert_eq!(
            parsed,
            vec![
                ("Webhook-Id".to_string(), b"msg_1".to_vec()),
                ("x-a".to_string(), b"b c".to_vec())
            ]
        );
        let err = format!(
            "{:#}",
            headers("--headers", b"a: 1\nno colon\n").unwrap_err()
        );
        assert_eq!(err, "--headers, line 2: expected `Name: value`");
    }

    #[test]
    fn a_raw_request_splits_at_the_blank_line_and_honours_content_length() {
        let raw =
            b"POST /hook?x=1 HTTP/1.1\r\nHost: example.com\r\nContent-Length: 4\r\n\r\n{}\r\n\n";
        let captured = request("--request", raw).unwrap();
        assert_eq!(captured.body, b"{}\r\n");
        assert_eq!(captured.url.as_deref(), Some("http://example.com/hook?x=1"));
        assert_eq!(captured.headers.len(), 2);
        let lf = request("--request", b"POST https://h/p HTTP/1.1\nx: 1\n\nbody\n").unwrap();
        assert_eq!(lf.body, b"body\n");
        assert_eq!(lf.url.as_deref(), Some("https://h/p"));
    }

    #[test]
    fn broken_requests_say_what_is_wrong() {
        let err = |raw: &[u8]| format!("{:#}", request("r", raw).unwrap_err());
        assert_eq!(
            err(b"POST / HTTP/1.1\r\nx: 1\r\n"),
            "r: no blank line ends the headers of the request"
        );
        assert_eq!(
            err(b"hello\n\n"),
            "r, line 1: expected `METHOD TARGET HTTP/1.1`"
        );
        assert_eq!(
            err(b"POST / HTTP/1.1\nContent-Length: 10\n\nabc"),
            "r: Content-Length says 10 bytes but the body has only 3"
        );
    }
}
