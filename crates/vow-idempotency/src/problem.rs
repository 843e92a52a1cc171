//! The problems an idempotent endpoint answers with, as RFC 9457 `application/problem+json`.
//! Each type has a stable URI (`urn:vow:problem:<name>`, documented in `docs/problems.md`):
//! clients branch on it, never on the title or detail.

use serde_json::{json, Value};

/// The media type of a problem body.
pub const CONTENT_TYPE: &str = "application/problem+json";

/// A problem an idempotent request can run into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// 400: the header is there but not a valid key.
    KeyInvalid(String),
    /// 400: the route requires a key and the request has none.
    KeyMissing,
    /// 422: the key was used for a different request; the JSON pointers of the differing
    /// fields and, as `?name`, the differing query parameters (names only).
    KeyReused {
        /// Where the requests differ: `?name` for a query parameter, then JSON pointers into the
        /// body (empty when the method or route differ instead).
        differences: Vec<String>,
    },
    /// 409: the first request with this key is still running; retry after `retry_after` s.
    InProgress {
        /// Seconds to wait before retrying.
        retry_after: u64,
    },
    /// 422: the key's record expired and only its tombstone is left: the operation it started
    /// may have happened; reconcile before retrying with a new key.
    KeyExpired,
    /// 503: the idempotency store cannot be reached; nothing was done (fail closed).
    StoreUnavailable,
}

impl Problem {
    /// The type's short name, the last part of its URI.
    pub fn name(&self) -> &'static str {
        match self {
            Self::KeyInvalid(_) => "idempotency-key-invalid",
            Self::KeyMissing => "idempotency-key-missing",
            Self::KeyReused { .. } => "idempotency-key-reused",
            Self::InProgress { .. } => "idempotency-key-in-progress",
            Self::KeyExpired => "idempotency-key-expired",
            Self::StoreUnavailable => "idempotency-store-unavailable",
        }
    }

    /// The type URI.
    pub fn type_uri(&self) -> String {
        format!("urn:vow:problem:{}", self.name())
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            Self::KeyInvalid(_) | Self::KeyMissing => 400,
            Self::KeyReused { .. } | Self::KeyExpired => 422,
            Self::InProgress { .. } => 409,
            Self::StoreUnavailable => 503,
        }
    }

    /// A short, fixed summary of the type.
    pub fn title(&self) -> &'static str {
        match self {
            Self::KeyInvalid(_) => "Idempotency-Key is invalid",
            Self::KeyMissing => "Idempotency-Key is missing",
            Self::KeyReused { .. } => "Idempotency-Key is already used for another request",
            Self::InProgress { .. } => "A request with this Idempotency-Key is in progress",
            Self::KeyExpired => "Idempotency-Key has expired",
            Self::StoreUnavailable => "Idempotency records are unavailable",
        }
    }

    /// What happened here and what the client should do.
    pub fn detail(&self) -> String {
        match self {
            Self::KeyInvalid(why) => format!("{why}."),
            Self::KeyMissing => "This operation requires an Idempotency-Key header.".into(),
            Self::KeyReused { differences } if differences.is_empty() => {
                "The key was used with another method or route; use a new key.".into()
            }
            Self::KeyReused { differences } => {
                let (query, body): (Vec<&str>, Vec<&str>) = differences
                    .iter()
                    .map(String::as_str)
                    .partition(|d| d.starts_with('?'));
                let mut what = Vec::new();
                if !body.is_empty() {
                    what.push(format!("body (at {})", body.join(", ")));
                }
                if !query.is_empty() {
                    let names: Vec<&str> = query.iter().map(|q| &q[1..]).collect();
                    what.push(format!("query (parameter {})", names.join(", ")));
                }
                format!(
                    "The key was used with a different {}; send the original request again, or \
                     use a new key.",
                    what.join(" and ")
                )
            }
            Self::InProgress { retry_after } => format!(
                "The first request with this key has not finished; retry in {retry_after} s, or \
                 send `Prefer: wait=N` to wait for its outcome."
            ),
            Self::KeyExpired => "The key's record expired. The operation it started may have \
                                 happened: check its result before retrying with a new key."
                .into(),
            Self::StoreUnavailable => {
                "Nothing was done; retry with the same key once the service is back.".into()
            }
        }
    }

    /// The problem+json body.
    pub fn body(&self) -> Value {
        let mut body = json!({
            "type": self.type_uri(),
            "title": self.title(),
            "status": self.status(),
            "detail": self.detail(),
        });
        if let Self::KeyReused { differences } = self {
            body["differences"] = json!(differences);
        }
        body
    }

    /// Whether a retry with the same key can succeed without changing the request.
    pub fn retry_with_same_key(&self) -> bool {
        matches!(self, Self::InProgress { .. } | Self::StoreUnavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Problem> {
        vec![
            Problem::KeyInvalid("Idempotency-Key is empty".into()),
            Problem::KeyMissing,
            Problem::KeyReused {
                differences: vec!["/payload/amount".into()],
            },
            Problem::InProgress { retry_after: 2 },
            Problem::KeyExpired,
            Problem::StoreUnavailable,
        ]
    }

    #[test]
    fn every_type_has_its_own_uri_status_and_title() {
        let problems = all();
        let mut uris: Vec<_> = problems.iter().map(Problem::type_uri).collect();
        uris.sort();
        uris.dedup();
        assert_eq!(uris.len(), problems.len());
        let statuses: Vec<_> = problems.iter().map(Problem::status).collect();
        assert_eq!(statuses, [400, 400, 422, 409, 422, 503]);
        for p in &problems {
            let body = p.body();
            assert_eq!(body["type"], p.type_uri());
            assert_eq!(body["status"], p.status());
            assert!(!body["title"].as_str().unwrap().is_empty());
            assert!(!body["detail"].as_str().unwrap().is_empty());
        }
    }

    #[test]
    fn a_reused_key_lists_the_differing_pointers() {
        let p = Problem::KeyReused {
            differences: vec!["/payload/amount".into(), "/eventType".into()],
        };
        assert_eq!(
            p.body()["differences"],
            json!(["/payload/amount", "/eventType"])
        );
        assert!(p.detail().contains("/payload/amount, /eventType"));
        assert!(!p.retry_with_same_key());
        assert!(Problem::InProgress { retry_after: 1 }.retry_with_same_key());
    }

    #[test]
    fn the_documented_types_are_these() {
        let doc = include_str!("../../../docs/problems.md");
        for p in all() {
            assert!(
                doc.contains(&p.type_uri()),
                "{} is not in docs/problems.md",
                p.type_uri()
            );
        }
    }
}
