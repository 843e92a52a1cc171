//! The events this app understands, parsed from the verified bytes (never before).

use serde::Deserialize;
use serde_json::Value;

/// A verified event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `{"type": "credit", "data": {"account": "a1", "amount": 5}}`.
    Credit {
        /// The account to credit.
        account: String,
        /// What to add: a positive integer.
        amount: i64,
    },
    /// Any other `type`: acknowledged, not applied.
    Other,
}

/// Why an authentic body is not an event this app can apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidEvent(&'static str);

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Value,
}

#[derive(Deserialize)]
struct CreditData {
    account: String,
    amount: i64,
}

impl Event {
    /// Parses `body`: a JSON object with a string `type`; a `credit` needs `data.account` (not
    /// empty) and a positive integer `data.amount`.
    pub fn parse(body: &[u8]) -> Result<Self, InvalidEvent> {
        let envelope: Envelope = serde_json::from_slice(body)
            .map_err(|_| InvalidEvent("The body must be a JSON object with a string `type`."))?;
        if envelope.kind != "credit" {
            return Ok(Self::Other);
        }
        let data: CreditData = serde_json::from_value(envelope.data).map_err(|_| {
            InvalidEvent("A credit needs `data.account` (a string) and `data.amount` (an integer).")
        })?;
        if data.account.is_empty() || data.amount <= 0 {
            return Err(InvalidEvent(
                "A credit needs a non-empty `data.account` and a positive `data.amount`.",
            ));
        }
        Ok(Self::Credit {
            account: data.account,
            amount: data.amount,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credit_needs_an_account_and_a_positive_integer_amount() {
        let credit = Event::parse(br#"{"type":"credit","data":{"account":"a1","amount":5}}"#);
        let a1 = Event::Credit {
            account: "a1".into(),
            amount: 5,
        };
        assert_eq!(credit, Ok(a1));
        for bad in [
            r#"{"type":"credit","data":{"account":"a1","amount":0}}"#,
            r#"{"type":"credit","data":{"account":"a1","amount":1.5}}"#,
            r#"{"type":"credit","data":{"account":"","amount":5}}"#,
            r#"{"type":"credit"}"#,
            r#"{"data":{}}"#,
            "[]",
        ] {
            assert!(Event::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn another_type_is_an_event_to_acknowledge_not_to_apply() {
        assert_eq!(
            Event::parse(br#"{"type":"debit","data":1}"#),
            Ok(Event::Other)
        );
    }
}
