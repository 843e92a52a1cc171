//! What travels over a `vow listen` connection: [`Relayed`] deliveries down (one server-sent
//! event each, `event: delivery`), [`RelayResult`]s up (posted in batches, answered by id).
//! JSON both ways; the body is the payload exactly as stored (as text, or base64 when it is not
//! UTF-8, as an inbound provider's may not be), so the listener posts the exact bytes that were
//! signed.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde::{Deserialize, Serialize};

/// The server-sent event name of a delivery.
pub const DELIVERY_EVENT: &str = "delivery";

/// The server-sent event name of the first event of a stream, once the listener is registered.
pub const READY_EVENT: &str = "ready";

/// The longest response excerpt a result carries (as an HTTP attempt keeps).
pub const MAX_EXCERPT_BYTES: usize = 4096;

/// One attempt handed to a listener.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Relayed {
    /// This attempt's number on this server, echoed in its result.
    pub id: u64,
    /// The message id (`webhook-id`).
    pub msg_id: String,
    /// The message's event type.
    pub event_type: String,
    /// Which attempt of the delivery this is (1 for the first).
    pub attempt: u32,
    /// How long the local request may take, in milliseconds (the endpoint's timeout).
    pub timeout_ms: u64,
    /// The request headers: signature headers, content type, the endpoint's custom headers.
    pub headers: Vec<(String, String)>,
    /// The exact payload: its text, or its base64 when [`Relayed::body_base64`].
    pub body: String,
    /// Whether `body` is base64 (the payload is not UTF-8).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body_base64: bool,
}

impl Relayed {
    /// The exact payload bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, base64::DecodeError> {
        if self.body_base64 {
            BASE64.decode(&self.body)
        } else {
            Ok(self.body.clone().into_bytes())
        }
    }
}

/// `payload` as [`Relayed::body`] and [`Relayed::body_base64`]: text when it is UTF-8.
pub fn encode_body(payload: &[u8]) -> (String, bool) {
    match std::str::from_utf8(payload) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (BASE64.encode(payload), true),
    }
}

/// What the listener's local URL answered to attempt `id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelayResult {
    /// The attempt ([`Relayed::id`]).
    pub id: u64,
    /// How long the local request took, in milliseconds.
    pub ms: u64,
    /// The local answer.
    #[serde(flatten)]
    pub answer: Answer,
}

/// The local URL's answer, or why there was none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum Answer {
    /// A response.
    #[serde(rename_all = "camelCase")]
    Response {
        /// Its status code.
        status: u16,
        /// Its headers (the listener sends the ones vow reads: `retry-after`, `vow-outcome`).
        #[serde(default)]
        headers: Vec<(String, String)>,
        /// The start of its body (at most [`MAX_EXCERPT_BYTES`], lossy UTF-8).
        #[serde(default)]
        body: String,
    },
    /// No response: the local URL could not be reached, or did not answer in time.
    #[serde(rename_all = "camelCase")]
    Failed {
        /// It timed out (after the request was sent) rather than failing to connect.
        #[serde(default)]
        timed_out: bool,
        /// Why, for the attempt's log.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_read_as_the_listener_writes_them() {
        let r: RelayResult = serde_json::from_str(
            r#"{"id":7,"ms":3,"outcome":"response","status":500,"headers":[["retry-after","2"]],"body":"boom"}"#,
        )
        .unwrap();
        assert_eq!(
            r.answer,
            Answer::Response {
                status: 500,
                headers: vec![("retry-after".into(), "2".into())],
                body: "boom".into()
            }
        );
        let f: RelayResult = serde_json::from_str(
            r#"{"id":8,"ms":1,"outcome":"failed","reason":"connection refused"}"#,
        )
        .unwrap();
        assert_eq!(
            f.answer,
            Answer::Failed {
                timed_out: false,
                reason: "connection refused".into()
            }
        );
        let back: RelayResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn a_body_that_is_not_utf8_travels_as_base64_and_comes_back_exact() {
        for payload in [&b"{\"a\": 1}"[..], &[0xff, 0x00, b'x', 0xc3][..]] {
            let (body, body_base64) = encode_body(payload);
            assert_eq!(body_base64, std::str::from_utf8(payload).is_err());
            let relayed = Relayed {
                id: 1,
                msg_id: "m".into(),
                event_type: "t".into(),
                attempt: 1,
                timeout_ms: 1,
                headers: Vec::new(),
                body,
                body_base64,
            };
            let json = serde_json::to_string(&relayed).unwrap();
            assert_eq!(json.contains("bodyBase64"), body_base64, "{json}");
            let back: Relayed = serde_json::from_str(&json).unwrap();
            assert_eq!(back.bytes().unwrap(), payload);
        }
    }
}
