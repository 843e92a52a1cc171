//! A JSON number's exact canonical spelling, from its text: no `f64` on the way, so two numbers
//! get one spelling exactly when they are the same value.
//!
//! The value is `±D × 10^k` with `D` its significant digits (no leading or trailing zeros), that
//! is `±0.D × 10^n` with `n = len(D) + k`. The spelling is ECMAScript's `Number::toString`
//! layout, applied to any `D`:
//! - zero (`0`, `-0`, `0.0e7`): `0`;
//! - `len(D) ≤ n ≤ 21`: an integer, `D` and `n - len(D)` zeros (`1e2` is `100`);
//! - `0 < n ≤ 21`: `D` with a decimal point after `n` digits (`123.45`);
//! - `-6 < n ≤ 0`: `0.`, `-n` zeros, `D` (`0.001`);
//! - otherwise: `D`'s first digit, `.` and the rest if any, `e`, `n - 1` (`1e400`, `1.5e-7`).
//!
//! So a spelling pads at most 21 zeros: an exponent is never turned into a string of zeros. An exponent that does not fit in 18 digits is refused
//! (`None`): the body then counts as bytes.

use std::borrow::Cow;

/// The canonical spelling of the number `text`, or `None` when `text` is not a JSON number (RFC
/// 8259 `number`) or its exponent is out of range.
pub(crate) fn canonical(text: &str) -> Option<Cow<'_, str>> {
    let parts = Parts::split(text)?;
    if parts.frac.is_empty() && parts.exp.is_none() && parts.int.len() <= 21 {
        // A plain integer is its own spelling, but for `-0`: the common case, borrowed.
        return Some(Cow::Borrowed(if parts.int == "0" { "0" } else { text }));
    }
    let exp = match parts.exp {
        None => 0,
        Some(e) => parse_exponent(e)?,
    };
    let digits = parts.int.bytes().chain(parts.frac.bytes());
    let all: Vec<u8> = digits.skip_while(|&d| d == b'0').collect();
    let trailing = all.iter().rev().take_while(|&&d| d == b'0').count();
    let significant = &all[..all.len() - trailing];
    if significant.is_empty() {
        return Some(Cow::Borrowed("0"));
    }
    // value = significant × 10^k
    let k = exp
        .checked_sub(i64::try_from(parts.frac.len()).ok()?)?
        .checked_add(i64::try_from(trailing).ok()?)?;
    let len = i64::try_from(significant.len()).ok()?;
    let point = len.checked_add(k)?;
    Some(Cow::Owned(spell(parts.negative, significant, point)))
}

/// `±0.D × 10^point` in the layout the module describes.
fn spell(negative: bool, digits: &[u8], point: i64) -> String {
    let mut out = String::with_capacity(digits.len() + 24);
    if negative {
        out.push('-');
    }
    let len = digits.len() as i64;
    let text = |d: &[u8]| d.iter().map(|&b| b as char).collect::<String>();
    if (len..=21).contains(&point) {
        out.push_str(&text(digits));
        out.extend(std::iter::repeat_n('0', (point - len) as usize));
    } else if (1..=21).contains(&point) {
        let (int, frac) = digits.split_at(point as usize);
        out.push_str(&text(int));
        out.push('.');
        out.push_str(&text(frac));
    } else if (-5..=0).contains(&point) {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(&text(digits));
    } else {
        out.push(digits[0] as char);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&text(&digits[1..]));
        }
        out.push('e');
        out.push_str(&(point - 1).to_string());
    }
    out
}

/// A number's text split by the JSON grammar.
struct Parts<'a> {
    negative: bool,
    /// `0` or digits not starting with `0`.
    int: &'a str,
    /// The digits after the point (may be empty).
    frac: &'a str,
    /// The exponent with its sign, if any.
    exp: Option<&'a str>,
}

impl<'a> Parts<'a> {
    fn split(text: &'a str) -> Option<Self> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let int_len = digit_run(rest);
        let int = &rest[..int_len];
        if int.is_empty() || (int.len() > 1 && int.starts_with('0')) {
            return None;
        }
        let mut rest = &rest[int_len..];
        let mut frac = "";
        if let Some(after) = rest.strip_prefix('.') {
            let n = digit_run(after);
            if n == 0 {
                return None;
            }
            frac = &after[..n];
            rest = &after[n..];
        }
        let mut exp = None;
        if let Some(after) = rest.strip_prefix(['e', 'E']) {
            let unsigned = after.strip_prefix(['+', '-']).unwrap_or(after);
            let n = digit_run(unsigned);
            if n == 0 || n != unsigned.len() {
                return None;
            }
            exp = Some(after);
            rest = "";
        }
        rest.is_empty().then_some(Self {
            negative,
            int,
            frac,
            exp,
        })
    }
}

/// How many ASCII digits `s` starts with.
fn digit_run(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_digit).count()
}

/// A signed exponent of at most 18 significant digits.
fn parse_exponent(e: &str) -> Option<i64> {
    let (negative, digits) = match e.as_bytes()[0] {
        b'-' => (true, &e[1..]),
        b'+' => (false, &e[1..]),
        _ => (false, e),
    };
    let digits = digits.trim_start_matches('0');
    if digits.len() > 18 {
        return None;
    }
    let value: i64 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::canonical;

    fn c(text: &str) -> String {
        canonical(text)
            .unwrap_or_else(|| panic!("{text} is a number"))
            .into_owned()
    }

    #[test]
    fn spellings_of_one_value_are_one_spelling() {
        for one in [
            "1", "1.0", "1e0", "10e-1", "0.1e1", "100e-2", "1E+0", "0.0001e4",
        ] {
            assert_eq!(c(one), "1", "{one}");
        }
        for zero in ["0", "-0", "0.0", "-0.0e-7", "0e400", "0.000"] {
            assert_eq!(c(zero), "0", "{zero}");
        }
        assert_eq!(c("-1.50"), "-1.5");
        assert_eq!(c("12e1"), "120");
        assert_eq!(c("0.00012"), "0.00012");
        assert_eq!(c("1.2e-7"), "1.2e-7");
    }

    #[test]
    fn different_values_keep_different_spellings() {
        let pairs = [
            ("18446744073709551616", "18446744073709551617"),
            ("123456789.123456789", "123456789.123456788"),
            ("1e400", "1e401"),
            ("1e-400", "1e-401"),
            ("123456789.123456789123", "123456789.12345678912"),
            ("-1", "1"),
        ];
        for (a, b) in pairs {
            assert_ne!(c(a), c(b), "{a} {b}");
        }
        assert_eq!(c("18446744073709551617"), "18446744073709551617");
        assert_eq!(c("123456789.123456789123"), "123456789.123456789123");
        assert_eq!(c("1e400"), "1e400");
        assert_eq!(c("-25E-401"), "-2.5e-400");
        assert_eq!(c("1e21"), "1e21");
        assert_eq!(c("1e20"), "100000000000000000000");
    }

    #[test]
    fn what_is_not_a_json_number_has_no_spelling() {
        for bad in [
            "", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1x", "0x10", "1.5.2", "NaN", "1e1.5",
        ] {
            assert_eq!(canonical(bad), None, "{bad:?}");
        }
        assert_eq!(canonical("1e9999999999999999999"), None);
        assert_eq!(c("1e000000000000000000000002"), "100");
    }
}
