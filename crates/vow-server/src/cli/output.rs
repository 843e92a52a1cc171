//! How a client command prints: for people, aligned columns, coloured only when stdout is a
//! terminal and `NO_COLOR` is not set; for scripts (`--output json`), one JSON document (or one
//! per line for streams), never coloured.

use std::io::IsTerminal;

use clap::{Args, ValueEnum};
use serde::Serialize;

/// Human text or JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text for a person.
    Human,
    /// JSON for a script: one document, or one per line for a stream.
    Json,
}

/// The `--output` flag every client command takes.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// How to print results.
    #[arg(long, short = 'o', value_enum, default_value = "human")]
    pub output: Format,
}

/// A colour of human output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    /// Success.
    Green,
    /// Failure.
    Red,
    /// Waiting, warnings.
    Yellow,
    /// Secondary text.
    Dim,
}

impl Colour {
    fn code(self) -> &'static str {
        match self {
            Colour::Green => "32",
            Colour::Red => "31",
            Colour::Yellow => "33",
            Colour::Dim => "2",
        }
    }
}

/// Prints a command's results in the chosen format.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    format: Format,
    colour: bool,
}

impl Printer {
    /// A printer for `args`, colouring only on a terminal without `NO_COLOR`.
    pub fn new(args: &OutputArgs) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self::with(
            args.output,
            args.output == Format::Human && !no_color && std::io::stdout().is_terminal(),
        )
    }

    /// A printer with the colour decided by the caller.
    pub fn with(format: Format, colour: bool) -> Self {
        Self { format, colour }
    }

    /// JSON output was asked for.
    pub fn json(&self) -> bool {
        self.format == Format::Json
    }

    /// `text` in `colour` when colouring, else as is.
    pub fn paint(&self, text: &str, colour: Colour) -> String {
        if self.colour {
            format!("\x1b[{}m{text}\x1b[0m", colour.code())
        } else {
            text.to_string()
        }
    }

    /// Prints `value` as one line of JSON.
    pub fn print_json(&self, value: &impl Serialize) -> anyhow::Result<()> {
        println!("{}", serde_json::to_string(value)?);
        Ok(())
    }
}

/// `rows` as lines whose columns line up (each padded to its widest cell, measured in
/// characters without colour codes), two spaces apart.
pub fn aligned(rows: &[Vec<String>]) -> String {
    let width = |cell: &str| strip_colour(cell).chars().count();
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| width(cell))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < row.len() {
                line.push_str(&" ".repeat(widths[c] - width(cell) + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `text` without ANSI colour codes.
fn strip_colour(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_whatever_the_colour() {
        let p = Printer::with(Format::Human, true);
        let rows = vec![
            vec!["id".to_string(), "status".to_string(), "ms".to_string()],
            vec![
                "msg_1".to_string(),
                p.paint("200", Colour::Green),
                "12".to_string(),
            ],
        ];
        assert_eq!(
            strip_colour(&aligned(&rows)),
            "id     status  ms\nmsg_1  200     12\n"
        );
    }

    #[test]
    fn a_plain_printer_adds_no_codes() {
        let p = Printer::with(Format::Human, false);
        assert_eq!(p.paint("500", Colour::Red), "500");
    }
}
