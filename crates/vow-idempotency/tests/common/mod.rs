//! What both backends' tests share: scopes, request bodies, a clock, a response.
#![allow(dead_code)]

use chrono::{DateTime, TimeDelta, Utc};
use vow_idempotency::fingerprint::canonical;
use vow_idempotency::{
    Begun, Fingerprint, IdempotencyKey, LeaseToken, Scope, Settings, StoredResponse,
};

pub const ROUTE: &str = "/api/v1/app/{app_id}/msg";
pub const BODY: &str = r#"{"eventType":"a.b","payload":{"amount":10}}"#;
pub const OTHER: &str = r#"{"eventType":"a.b","payload":{"amount":11},"x":1}"#;

/// A request body: its fingerprint and canonical form.
pub fn request(body: &str) -> (Fingerprint, String) {
    let json = serde_json::from_str(body).unwrap();
    (
        Fingerprint::of("POST", ROUTE, body.as_bytes()),
        canonical(&json),
    )
}

pub fn scope(principal: &str, application: Option<&str>, key: &str) -> Scope {
    Scope {
        principal: principal.into(),
        application: application.map(Into::into),
        method: "POST".into(),
        route: ROUTE.into(),
        key: IdempotencyKey::parse(key).unwrap(),
    }
}

pub fn alice() -> Scope {
    scope("tok_alice", Some("app_1"), "order-1")
}

/// `secs` after a fixed instant.
pub fn t(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap() + TimeDelta::seconds(secs)
}

pub fn settings() -> Settings {
    Settings::default()
}

/// Seconds from t(0) at which a record completed at t(0) expires, and its tombstone ends.
pub const EXPIRES: i64 = 24 * 3600;
pub const TOMBSTONE_ENDS: i64 = EXPIRES + 7 * 24 * 3600;

pub fn response() -> StoredResponse {
    StoredResponse {
        status: 202,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("location".into(), "/api/v1/app/app_1/msg/msg_1".into()),
        ],
        body: b"{\"id\":\"msg_1\",\"eventType\":\"a.b\"}".to_vec(),
        resource: Some("msg_1".into()),
    }
}

/// The owners' tokens and how many were told to wait a full lease; panics on anything else.
pub fn tally(outcomes: impl IntoIterator<Item = Begun>) -> (Vec<LeaseToken>, usize) {
    let (mut owners, mut waiting) = (Vec::new(), 0);
    for outcome in outcomes {
        match outcome {
            Begun::Owner(token) | Begun::TakenOver(token) => owners.push(token),
            Begun::InProgress {
                retry_after_secs: 30,
            } => waiting += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    (owners, waiting)
}

/// A row's state, response body, canonical body, resource and fingerprint.
pub type Kept = (
    String,
    Option<Vec<u8>>,
    Option<String>,
    Option<String>,
    String,
);

/// The columns that select [`Kept`].
pub const KEPT: &str = "SELECT state, response_body, canonical_body, resource, fingerprint \
                        FROM idempotency_records";

/// What a tombstone of [`alice`]'s [`BODY`] keeps: scope, fingerprint and resource only.
pub fn tombstone() -> Kept {
    (
        "tombstone".into(),
        None,
        None,
        Some("msg_1".into()),
        request(BODY).0.hex(),
    )
}
