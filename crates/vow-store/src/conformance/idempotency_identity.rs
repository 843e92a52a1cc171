//! Cases about what a key's record takes for "the same request", through the store: numbers
//! compared exactly (past 64 bits and `f64`), the query kept and named, and records written with
//! fingerprint version 1 still judged by version 1's rules.

use vow_idempotency::fingerprint::canonical_body;
use vow_idempotency::IdempotencyKey;

use super::support::*;
use crate::idempotency::{Begun, Fingerprint, Scope, Settings};
use crate::Store;

const ROUTE: &str = "/api/v1/app/{app_id}/msg";

fn scope(key: &str) -> Scope {
    Scope {
        principal: "admin".into(),
        application: Some("app_identity".into()),
        method: "POST".into(),
        route: ROUTE.into(),
        key: IdempotencyKey::parse(key).unwrap(),
    }
}

/// Begins the request (`query`, `body`) under `key` at `t(5)`.
async fn begin(store: &dyn Store, key: &str, query: &str, body: &str) -> Begun {
    let (fingerprint, text) = Fingerprint::of_request("POST", ROUTE, query, body.as_bytes());
    begin_as(store, key, &fingerprint, &text).await
}

async fn begin_as(store: &dyn Store, key: &str, fingerprint: &Fingerprint, text: &str) -> Begun {
    store
        .begin_idempotent(&scope(key), fingerprint, text, t(5), &Settings::default())
        .await
        .unwrap()
}

fn reused(differences: &[&str]) -> Begun {
    Begun::Reused {
        differences: differences.iter().map(|d| d.to_string()).collect(),
    }
}

/// A record keeps the exact request: a number one past 2^64, or one digit further in a long
/// decimal, is another request (422 naming the field), while another spelling of the same
/// numbers is the same request (here in progress); a query the route reads is part of it and
/// is named; a record of fingerprint version 1 (numbers through `f64`, an unreadable body kept as
/// text) still takes the same request for its own.
pub async fn a_keys_record_tells_requests_apart_exactly_and_keeps_judging_version_1_records(
    store: &dyn Store,
) {
    let body = r#"{"eventType":"a.b","payload":{"amount":18446744073709551616,"rate":123456789.123456789}}"#;
    assert!(matches!(
        begin(store, "n-1", "", body).await,
        Begun::Owner(_)
    ));
    let respelled = r#"{"payload":{"rate":1234567891.23456789e-1,"amount":1.8446744073709551616E19},"eventType":"a.b"}"#;
    assert!(matches!(
        begin(store, "n-1", "", respelled).await,
        Begun::InProgress { .. }
    ));
    let one_more = body.replace("551616", "551617");
    assert_eq!(
        begin(store, "n-1", "", &one_more).await,
        reused(&["/payload/amount"])
    );
    let next_digit = body.replace("123456789}", "123456788}");
    assert_eq!(
        begin(store, "n-1", "", &next_digit).await,
        reused(&["/payload/rate"])
    );
    assert_eq!(
        begin(store, "n-1", "with_content=false", body).await,
        reused(&["?with_content"])
    );

    // Records version 1 wrote, as it wrote them.
    let v1 = Fingerprint {
        version: 1,
        digest: [1; 32],
    };
    let stored = r#"{"eventType":"a.b","payload":{"amount":1.8446744073709552e+19}}"#;
    assert!(matches!(
        begin_as(store, "v1-json", &v1, stored).await,
        Begun::Owner(_)
    ));
    let same = r#"{"eventType":"a.b","payload":{"amount":18446744073709551616}}"#;
    assert!(matches!(
        begin(store, "v1-json", "", same).await,
        Begun::InProgress { .. }
    ));
    assert_eq!(
        begin(
            store,
            "v1-json",
            "",
            r#"{"eventType":"a.c","payload":{"amount":1}}"#
        )
        .await,
        reused(&["/eventType", "/payload/amount"])
    );
    assert!(matches!(
        begin_as(store, "v1-text", &v1, &canonical_body(b"not json")).await,
        Begun::Owner(_)
    ));
    assert!(matches!(
        begin(store, "v1-text", "", "not json").await,
        Begun::InProgress { .. }
    ));
    assert_eq!(
        begin(store, "v1-text", "", "not json!").await,
        reused(&[""])
    );
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_idempotency_identity {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_keys_record_tells_requests_apart_exactly_and_keeps_judging_version_1_records,
        );
    };
}
