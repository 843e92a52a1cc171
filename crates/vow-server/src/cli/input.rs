//! Where a command reads bytes from: `--data` takes the text itself, `@FILE` for a file's
//! bytes, or `-` for standard input; file flags take a path. Bytes are kept exactly as read
//! (no trailing newline is added or trimmed): what is signed or sent is what was given.

use std::io::Read;
use std::path::Path;

use anyhow::Context;

/// The bytes `value` names: `-` is standard input, `@FILE` the file's bytes, anything else
/// the text itself. `flag` names the flag in errors.
pub fn data(flag: &str, value: &str) -> anyhow::Result<Vec<u8>> {
    if value == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .with_context(|| format!("{flag} -: reading standard input"))?;
        Ok(bytes)
    } else if let Some(path) = value.strip_prefix('@') {
        file(flag, Path::new(path))
    } else {
        Ok(value.as_bytes().to_vec())
    }
}

/// The bytes of the file at `path`, for `flag`.
pub fn file(flag: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("{flag}: cannot read {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_taken_as_is_and_at_names_a_file() {
        assert_eq!(data("--data", "{\"a\":1}\n").unwrap(), b"{\"a\":1}\n");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("body.json");
        std::fs::write(&path, b"\xff{}\r\n").unwrap();
        let at = format!("@{}", path.display());
        assert_eq!(data("--data", &at).unwrap(), b"\xff{}\r\n");
        let missing = format!("@{}", dir.path().join("nope").display());
        let err = format!("{:#}", data("--data", &missing).unwrap_err());
        assert!(
            err.starts_with("--data: cannot read ") && err.contains("nope"),
            "{err}"
        );
    }
}
