//! Times given on the command line (`--since`, `--until`): RFC 3339, or a span ago.

use anyhow::Context;
use chrono::{DateTime, Utc};

/// `text` as a time: RFC 3339, or a span before `now` (`90s`, `30m`, `2h`, `7d`, `1w`).
/// `flag` names it in an error.
pub(crate) fn time(flag: &str, text: &str, now: DateTime<Utc>) -> anyhow::Result<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    let unit_at = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(unit_at);
    let seconds: Option<i64> = match unit {
        "s" => Some(1),
        "m" => Some(60),
        "h" => Some(3600),
        "d" => Some(86_400),
        "w" => Some(604_800),
        _ => None,
    };
    let ago = number
        .parse::<i64>()
        .ok()
        .zip(seconds)
        .and_then(|(n, unit)| n.checked_mul(unit))
        .and_then(chrono::TimeDelta::try_seconds)
        .and_then(|span| now.checked_sub_signed(span));
    ago.with_context(|| {
        format!(
            "{flag} {text:?} is not a time: give RFC 3339 (2026-12-01T09:00:00Z) or a span ago \
             (90s, 30m, 2h, 7d, 1w)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::time;
    use chrono::{DateTime, TimeZone, Utc};

    #[test]
    fn times_are_rfc_3339_or_a_span_ago() {
        let now = Utc.with_ymd_and_hms(2026, 12, 2, 12, 0, 0).unwrap();
        let at = |t: &str| time("--since", t, now).map_err(|e| e.to_string());
        let cases = [
            ("2026-12-01T09:00:00Z", "2026-12-01T09:00:00Z"),
            ("2026-12-01T10:00:00+01:00", "2026-12-01T09:00:00Z"),
            ("90s", "2026-12-02T11:58:30Z"),
            ("2h", "2026-12-02T10:00:00Z"),
            ("1w", "2026-11-25T12:00:00Z"),
        ];
        for (text, expected) in cases {
            let expected: DateTime<Utc> = expected.parse().unwrap();
            assert_eq!(at(text), Ok(expected), "{text}");
        }
        for bad in ["yesterday", "2h30m", "h", "-1h", "", "99999999999999999w"] {
            let e = at(bad).unwrap_err();
            assert!(e.starts_with("--since"), "{bad}: {e}");
        }
    }
}
