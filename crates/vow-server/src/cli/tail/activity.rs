//! A source's activity as `vow tail --source` prints it: one aligned line per row, the time,
//! what happened (`received`, `quarantined`, a forward's outcome, `refused`), the provider's
//! event id, and the rest (the stored event, the destination and its status, the reason).

use crate::cli::output::{Colour, Printer};
use crate::tail::activity::{ActivityLine, What};

/// The human line of `row`.
pub fn human_line(printer: &Printer, row: &ActivityLine) -> String {
    let colour = if row.failed {
        Colour::Red
    } else {
        Colour::Green
    };
    let (label, subject, rest, note) = match &row.what {
        What::Event {
            id,
            provider_event_id,
            arrival,
            size,
            ..
        } => (
            arrival.clone(),
            provider_event_id.clone(),
            format!("{id}  {size} B"),
            None,
        ),
        What::Forward {
            id,
            provider_event_id,
            destination,
            outcome,
            status,
            attempts,
            error,
        } => {
            let status = status.map_or_else(|| "-".to_string(), |s| s.to_string());
            let mut note = Vec::new();
            if *attempts > 1 {
                note.push(format!("attempt {attempts}"));
            }
            note.extend(error.iter().cloned());
            (
                outcome.clone(),
                provider_event_id.clone(),
                format!("{id} → {destination}  {status}"),
                (!note.is_empty()).then(|| note.join(", ")),
            )
        }
        What::Rejection { id, reason, status } => (
            "refused".to_string(),
            None,
            format!("{id}  {status} {reason}"),
            None,
        ),
    };
    let note = note.map_or_else(String::new, |n| {
        printer.paint(&format!("  ({n})"), Colour::Dim)
    });
    format!(
        "{}  {}  {:<24}  {rest}{note}",
        row.time.format("%H:%M:%S%.3f"),
        printer.paint(&format!("{label:<13}"), colour),
        subject.as_deref().unwrap_or("-"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::output::Format;
    use chrono::{TimeZone, Utc};

    #[test]
    fn each_kind_of_activity_is_one_aligned_line() {
        let time = Utc.with_ymd_and_hms(2026, 1, 2, 10, 42, 7).unwrap();
        let printer = Printer::with(Format::Human, false);
        let line = |failed, what| {
            let row = ActivityLine {
                key: String::new(),
                time,
                failed,
                what,
            };
            human_line(&printer, &row)
        };
        let event = What::Event {
            id: "inevt_1".into(),
            provider_event_id: Some("evt_1".into()),
            arrival: "quarantined".into(),
            state: "quarantined".into(),
            size: 12,
        };
        let forward = What::Forward {
            id: "inevt_1".into(),
            provider_event_id: Some("evt_1".into()),
            destination: "dst_1".into(),
            outcome: "retryable".into(),
            status: Some(500),
            attempts: 2,
            error: Some("HTTP 500".into()),
        };
        let refusal = What::Rejection {
            id: "inrej_1".into(),
            reason: "signature_mismatch".into(),
            status: 401,
        };
        let pad = |s: &str, n: usize| format!("{s}{}", " ".repeat(n - s.len()));
        assert_eq!(
            line(true, event),
            format!(
                "10:42:07.000  quarantined    {}  inevt_1  12 B",
                pad("evt_1", 24)
            )
        );
        assert_eq!(
            line(true, forward),
            format!(
                "10:42:07.000  retryable      {}  inevt_1 → dst_1  500  (attempt 2, HTTP 500)",
                pad("evt_1", 24)
            )
        );
        assert_eq!(
            line(true, refusal),
            format!(
                "10:42:07.000  refused        {}  inrej_1  401 signature_mismatch",
                pad("-", 24)
            )
        );
    }
}
