//! Signed inbound deliveries for the `inbound` scenario, prepared before the load starts.
//!
//! Owns: Standard Webhooks v1 signing (HMAC-SHA256 over `{id}.{timestamp}.{body}` with the
//! base64 key of a `whsec_` secret), written here from the specification rather than taken
//! from `vow-signature`, so the benchmark also checks vow against an independent signer; the
//! ~1 KiB event body; and the [`Plan`]: the order in which deliveries are sent, with exactly
//! one in ten a re-send of an earlier delivery (same id, body, timestamp and signature) and one
//! in a thousand signed with the wrong secret. Each delivery counts the answers it got, so a
//! run can check, id by id, that vow claimed it once and counted every re-send.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The source's secret (the providers' side of it): `whsec_` + base64 of 32 bytes.
pub const SECRET: &str = "whsec_dm93LWJlbmNoLWluYm91bmQtc2VjcmV0LTAxMjM0NTY=";
/// The secret the invalid deliveries are signed with instead.
pub const WRONG_SECRET: &str = "whsec_bm90LXRoZS1zb3VyY2Utc2VjcmV0LWF0LWFsbC0wMDA=";

/// Bytes of an event body.
pub const BODY_BYTES: usize = 1024;
/// Every `DUPLICATE_EVERY`-th request re-sends an earlier delivery.
pub const DUPLICATE_EVERY: usize = 10;
/// Every `INVALID_EVERY`-th request (at slots ending in 501, never a duplicate's) carries a
/// signature made with [`WRONG_SECRET`].
pub const INVALID_EVERY: usize = 1000;
/// A re-send repeats one of the last `DUPLICATE_LAG` new deliveries (uniformly), so some
/// arrive while the first is still in flight and most after it was stored.
pub const DUPLICATE_LAG: usize = 2000;

/// The `v1,<base64>` signature of `body` under the `whsec_` secret `secret`.
pub fn sign(secret: &str, id: &str, timestamp: u64, body: &[u8]) -> String {
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap_or(secret))
        .expect("a base64 secret");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(tag)
    )
}

/// A provider-style event of exactly [`BODY_BYTES`] bytes of JSON, naming `id`.
pub fn event_body(id: &str, seq: u64, timestamp: u64) -> Bytes {
    let head = format!(
        concat!(
            r#"{{"id":"{id}","type":"invoice.paid","created":{ts},"livemode":false,"#,
            r#""data":{{"object":{{"id":"in_{seq:012}","object":"invoice","customer":"cus_{cus:08}","#,
            r#""amount_due":{amount},"amount_paid":{amount},"currency":"eur","status":"paid","#,
            r#""lines":[{{"id":"il_{seq:012}_1","amount":{amount},"quantity":1,"#,
            r#""price":{{"id":"price_bench_monthly","unit_amount":{amount},"recurring":{{"interval":"month"}}}}}}],"#,
            r#""metadata":{{"order":"ord-{seq}","region":"eu-west"}},"description":""#
        ),
        id = id,
        ts = timestamp,
        seq = seq,
        cus = seq % 50_000,
        amount = 100 + seq % 90_000,
    );
    let tail = r#""}}}"#;
    let pad = BODY_BYTES.saturating_sub(head.len() + tail.len());
    let mut s = String::with_capacity(BODY_BYTES);
    s.push_str(&head);
    s.extend(std::iter::repeat_n('x', pad));
    s.push_str(tail);
    Bytes::from(s)
}

/// What a request in the plan is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A delivery's first send.
    New,
    /// A re-send of an earlier delivery, byte for byte.
    Duplicate,
    /// A delivery signed with the wrong secret: must be refused 401 and never stored.
    Invalid,
}

/// One signed delivery and the answers it got.
#[derive(Debug)]
pub struct Delivery {
    /// `webhook-id` (the event id vow deduplicates on).
    pub id: String,
    /// `webhook-timestamp`.
    pub timestamp: String,
    /// `webhook-signature`.
    pub signature: String,
    /// The body.
    pub body: Bytes,
    /// Signed with [`WRONG_SECRET`].
    pub invalid: bool,
    /// Times sent.
    pub sends: AtomicU32,
    /// 200 `received` answers.
    pub received: AtomicU32,
    /// 200 `duplicate` answers.
    pub duplicate: AtomicU32,
    /// 401 answers.
    pub refused: AtomicU32,
    /// Any other answer, or none.
    pub other: AtomicU32,
}

impl Delivery {
    fn new(id: String, seq: u64, timestamp: u64, invalid: bool) -> Self {
        let body = event_body(&id, seq, timestamp);
        let secret = if invalid { WRONG_SECRET } else { SECRET };
        Self {
            signature: sign(secret, &id, timestamp, &body),
            timestamp: timestamp.to_string(),
            id,
            body,
            invalid,
            sends: AtomicU32::new(0),
            received: AtomicU32::new(0),
            duplicate: AtomicU32::new(0),
            refused: AtomicU32::new(0),
            other: AtomicU32::new(0),
        }
    }

    /// Reads one of the counters.
    pub fn count(counter: &AtomicU32) -> u32 {
        counter.load(Ordering::Relaxed)
    }
}

/// The requests of one load phase, in sending order.
#[derive(Debug)]
pub struct Plan {
    /// Position i is the i-th request: its kind and delivery.
    pub requests: Vec<(Kind, Arc<Delivery>)>,
    /// Every delivery once (new and invalid ones), in first-send order.
    pub deliveries: Vec<Arc<Delivery>>,
}

impl Plan {
    /// `n` requests whose ids start with `prefix`, signed at `timestamp` (unix seconds); the
    /// re-sends are chosen by a PRNG seeded with `seed`.
    pub fn new(prefix: &str, n: usize, timestamp: u64, seed: u64) -> Self {
        let mut rng = SplitMix(seed);
        let mut requests = Vec::with_capacity(n);
        let mut deliveries: Vec<Arc<Delivery>> = Vec::with_capacity(n);
        let mut fresh: Vec<usize> = Vec::with_capacity(n); // indexes of valid deliveries
        for i in 0..n {
            let slot = i + 1;
            if slot % DUPLICATE_EVERY == 0 && !fresh.is_empty() {
                let window = fresh.len().min(DUPLICATE_LAG);
                let back = (rng.next() % window as u64) as usize;
                let d = &deliveries[fresh[fresh.len() - 1 - back]];
                requests.push((Kind::Duplicate, Arc::clone(d)));
                continue;
            }
            let invalid = slot % INVALID_EVERY == INVALID_EVERY / 2 + 1;
            let seq = deliveries.len() as u64;
            let id = format!("evt_{prefix}_{seq:09}");
            let d = Arc::new(Delivery::new(id, seq, timestamp, invalid));
            if !invalid {
                fresh.push(deliveries.len());
            }
            deliveries.push(Arc::clone(&d));
            let kind = if invalid { Kind::Invalid } else { Kind::New };
            requests.push((kind, d));
        }
        Self {
            requests,
            deliveries,
        }
    }

    /// Requests in the plan.
    pub fn len(&self) -> usize {
        self.requests.len()
    }
}

/// A small deterministic PRNG (SplitMix64), so a plan is the same in every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification.
        let sig = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn the_secrets_are_32_byte_keys_and_differ() {
        for s in [SECRET, WRONG_SECRET] {
            let key = base64::engine::general_purpose::STANDARD
                .decode(s.strip_prefix("whsec_").unwrap())
                .unwrap();
            assert_eq!(key.len(), 32, "{s}");
        }
        assert_ne!(SECRET, WRONG_SECRET);
    }

    #[test]
    fn an_event_body_is_1_kib_of_json_naming_its_id() {
        for seq in [0, 7, 123_456_789] {
            let b = event_body("evt_a_000000007", seq, 1_700_000_000);
            assert_eq!(b.len(), BODY_BYTES);
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(v["id"], "evt_a_000000007");
            assert_eq!(v["data"]["object"]["object"], "invoice");
        }
    }

    #[test]
    fn a_plan_mixes_in_one_tenth_duplicates_and_a_few_invalid_ones() {
        let plan = Plan::new("t", 10_000, 1_700_000_000, 1);
        assert_eq!(plan.len(), 10_000);
        let count = |k: Kind| plan.requests.iter().filter(|(kind, _)| *kind == k).count();
        assert_eq!(count(Kind::Duplicate), 1_000);
        assert_eq!(count(Kind::Invalid), 10);
        assert_eq!(count(Kind::New), 8_990);
        assert_eq!(plan.deliveries.len(), 9_000);
        for (i, (kind, d)) in plan.requests.iter().enumerate() {
            match kind {
                Kind::Duplicate => {
                    assert!(!d.invalid);
                    let first = plan.requests.iter().position(|(_, e)| Arc::ptr_eq(d, e));
                    assert!(
                        first.is_some_and(|f| f < i),
                        "a re-send follows its first send"
                    );
                }
                Kind::Invalid => assert!(d.invalid),
                Kind::New => assert!(!d.invalid),
            }
        }
        let mut ids: Vec<&str> = plan.deliveries.iter().map(|d| d.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), plan.deliveries.len(), "ids are unique");
    }
}
