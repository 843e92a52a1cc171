//! The JSON answers: a rejection names its problem and never echoes the signature, an outcome
//! answers 200, 200, 202, the app's own or 503.

use axum::body::{to_bytes, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use vow_receiver::{Error, Outcome, Rejection};

use crate::common::*;

async fn answer(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, serde_json::from_slice(&body).unwrap())
}

fn header_map(headers: Vec<(String, String)>) -> HeaderMap {
    headers
        .into_iter()
        .map(|(n, v)| {
            let name = HeaderName::from_bytes(n.as_bytes()).unwrap();
            (name, HeaderValue::from_str(&v).unwrap())
        })
        .collect()
}

fn accept(headers: HeaderMap, body: &str) -> Result<vow_receiver::Delivery, Rejection> {
    let body = Bytes::copy_from_slice(body.as_bytes());
    receiver().accept_http(&headers, body, "", t0())
}

#[tokio::test]
async fn a_header_map_is_read_case_insensitively_like_any_headers() {
    let delivery = accept(header_map(headers(BODY, Some("d-1"), "acct_1")), BODY).unwrap();
    assert_eq!(delivery.identity(), Some(&identity("d-1")));
}

#[tokio::test]
async fn a_wrong_signature_is_401_naming_the_problem_without_echoing_the_signature() {
    let mut headers = headers(BODY, Some("d-1"), "acct_1");
    let forged = signature(CHANGED.as_bytes());
    headers[0].1 = forged.clone();
    let rejected = accept(header_map(headers), BODY).unwrap_err();
    let (status, body) = answer(rejected.into_response()).await;
    assert_eq!(status, 401);
    assert_eq!(
        body,
        json!({"code": "signature_mismatch", "detail": "no signature matched"})
    );
    let hex = forged.trim_start_matches("sha256=");
    assert!(!body.to_string().contains(hex) && !body.to_string().contains(SECRET));
}

#[tokio::test]
async fn a_missing_signature_header_is_400_naming_the_header() {
    let mut headers = headers(BODY, Some("d-1"), "acct_1");
    headers.remove(0);
    let (status, body) = answer(
        accept(header_map(headers), BODY)
            .unwrap_err()
            .into_response(),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({"code": "missing_header", "detail": "missing `x-hub-signature-256` header"})
    );
}

#[tokio::test]
async fn outcomes_answer_200_for_processed_or_duplicate_202_for_quarantined_and_503_else() {
    type O = Outcome<u32, (StatusCode, &'static str)>;
    let cases: [(O, u16, Value); 3] = [
        (Outcome::Processed(7), 200, json!({"status": "processed"})),
        (Outcome::Duplicate, 200, json!({"status": "duplicate"})),
        (Outcome::Quarantined, 202, json!({"status": "quarantined"})),
    ];
    for (outcome, status, body) in cases {
        assert_eq!(outcome.status(), Some(status));
        assert_eq!(answer(outcome.into_response()).await, (status, body));
    }
    let failed: O = Outcome::Failed((StatusCode::SERVICE_UNAVAILABLE, "later"));
    assert_eq!(failed.status(), None);
    let response = failed.into_response();
    assert_eq!(
        response.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "the app's own answer"
    );
    let store: O = Outcome::StoreFailed(Error::Corrupt("digest"));
    let (status, body) = answer(store.into_response()).await;
    assert_eq!((status, &body["code"]), (503, &json!("store_unavailable")));
    assert!(
        !body.to_string().contains("digest"),
        "the cause is logged, not answered"
    );
}
