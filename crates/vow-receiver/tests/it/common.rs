//! Deliveries as GitHub signs them (HMAC-SHA256 of the body, computed here with `hmac`, not
//! with the code under test), with the event id in `X-GitHub-Delivery` and the account in
//! `X-Account`.
// With fewer features, fewer of the modules that use these are built.
#![cfg_attr(not(all(feature = "sqlite", feature = "postgres")), allow(dead_code))]

use bytes::Bytes;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use vow_receiver::{Config, Delivery, Identity, Locator, Outcome, Receiver};
use vow_signature::provider::Scheme;

pub const SECRET: &str = "It's a Secret to Everybody";
pub const BODY: &str = r#"{"type":"credit","data":{"account":"a1","amount":5}}"#;
pub const CHANGED: &str = r#"{"type":"credit","data":{"account":"a1","amount":500}}"#;

/// 2030-01-01T00:00:00Z.
pub fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_893_456_000, 0).unwrap()
}

pub fn receiver() -> Receiver {
    let config = Config::new("github", Scheme::GitHub, [SECRET])
        .with_account(Locator::Header("X-Account".into()));
    Receiver::new(config).unwrap()
}

/// `sha256=<hex HMAC-SHA256(secret, body)>`, as GitHub documents it.
pub fn signature(body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The signed headers of `body` with event id `id` of `account`.
pub fn headers(body: &str, id: Option<&str>, account: &str) -> Vec<(String, String)> {
    let mut headers = vec![("X-Hub-Signature-256".to_owned(), signature(body.as_bytes()))];
    headers.extend(id.map(|id| ("X-GitHub-Delivery".to_owned(), id.to_owned())));
    headers.push(("X-Account".to_owned(), account.to_owned()));
    headers
}

/// `body` as event `id` of account `acct_1`, verified.
pub fn delivery(body: &str, id: Option<&str>) -> Delivery {
    delivery_of(body, id, "acct_1")
}

pub fn delivery_of(body: &str, id: Option<&str>, account: &str) -> Delivery {
    let headers = headers(body, id, account);
    let body = Bytes::copy_from_slice(body.as_bytes());
    receiver().accept(&headers[..], body, "", t0()).unwrap()
}

pub fn identity(id: &str) -> Identity {
    Identity::new("github", "acct_1", id)
}

/// How many of `outcomes` are processed, and how many duplicates.
pub fn processed_and_duplicates<T, E>(outcomes: &[Outcome<T, E>]) -> (usize, usize) {
    let processed = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Processed(_)));
    let duplicates = outcomes.iter().filter(|o| matches!(o, Outcome::Duplicate));
    (processed.count(), duplicates.count())
}
