//! The idempotency record, without IO: its scope, the stored response, the lease token, the
//! settings, and [`decide`], the one place that turns an existing row and a request into an
//! outcome. The backends ([`crate::sqlite`], [`crate::postgres`]) only run the SQL around it.
//!
//! A row is `in_progress` (owned by whoever holds its lease token), `completed` (holds the
//! response to replay until `expires_at`) or a `tombstone` (response and request body dropped;
//! answers [`Begun::Expired`] until `tombstone_until`, after which the key is free again).

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use rand::RngCore;
use serde_json::Value;

use crate::fingerprint::Fingerprint;
use crate::fingerprint::{differences, differences_across};
use crate::key::IdempotencyKey;

/// What a key is unique within. The principal and the application come from authentication and
/// the route, never from client input.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// Who is calling (e.g. the token's id).
    pub principal: String,
    /// The application the route names, if any (stored as `''` when none; ids are never empty).
    pub application: Option<String>,
    /// The HTTP method, upper case.
    pub method: String,
    /// The route template, e.g. `/api/v1/app/{app_id}/msg`.
    pub route: String,
    /// The client's key.
    pub key: IdempotencyKey,
}

impl Scope {
    /// The stored application: `''` for none.
    pub fn application_column(&self) -> &str {
        self.application.as_deref().unwrap_or("")
    }
}

/// A response as stored for replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status.
    pub status: u16,
    /// The headers worth replaying, in order.
    pub headers: Vec<(String, String)>,
    /// The body, exactly.
    pub body: Vec<u8>,
    /// A reference to the created resource (e.g. its id), kept in the tombstone too.
    pub resource: Option<String>,
}

impl StoredResponse {
    /// A JSON response: `status`, `content-type: application/json` and `body` serialised, with
    /// no resource reference (set [`StoredResponse::resource`] for one).
    pub fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
            resource: None,
        }
    }
}

/// Proof of owning an `in_progress` record: completing or releasing it requires the token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseToken(pub String);

impl LeaseToken {
    /// A fresh token: 128 random bits, hex.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut bytes);
        Self(hex::encode(bytes))
    }

    /// The token as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The outcome of beginning a request with a key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Begun {
    /// This request runs the operation: the record was new (or its tombstone had ended).
    Owner(LeaseToken),
    /// This request runs the operation after taking the record over from a request whose lease
    /// ran out (it crashed or hung before committing).
    TakenOver(LeaseToken),
    /// The operation completed: replay this response (with `Idempotent-Replayed: true`).
    Replay {
        /// The stored response.
        response: StoredResponse,
        /// When the record stops being replayable.
        expires_at: DateTime<Utc>,
    },
    /// The key was used for a different request: 422 with these JSON pointers.
    Reused {
        /// Where the bodies differ (`""`, the whole body, when either is not JSON).
        differences: Vec<String>,
    },
    /// The first request still holds a live lease: 409 with `Retry-After`.
    InProgress {
        /// Seconds until the lease ends (at least 1).
        retry_after_secs: u64,
    },
    /// The record expired and only its tombstone is left: 422, never a second execution.
    Expired {
        /// The resource the original request created, if any.
        resource: Option<String>,
    },
}

impl Begun {
    /// The lease token, when this request runs the operation ([`Begun::Owner`] or
    /// [`Begun::TakenOver`]).
    pub fn token(&self) -> Option<&LeaseToken> {
        match self {
            Self::Owner(token) | Self::TakenOver(token) => Some(token),
            _ => None,
        }
    }
}

/// What a claim made inside the host's write transaction did with a scope: SQLite's
/// `record_completed` (at the end of the write), PostgreSQL's `claim_completed` (at its start),
/// or `resolve_taken` (after a claim folded into the host's first statement found it taken).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recorded {
    /// The scope had no record: it is recorded as completed.
    Fresh,
    /// The scope's record was abandoned (an `in_progress` claim whose lease ran out, which
    /// committed nothing, or a tombstone that ended): taken over, with a conditional update on
    /// its old token, and completed by this transaction.
    TookOver,
    /// The scope has a record this request must not replace (a live claim, a stored response,
    /// a tombstone, another body), or (PostgreSQL) another transaction holds the scope right
    /// now: the host rolls back, writing nothing, and asks `begin`.
    Held,
}

impl Recorded {
    /// Whether the record is this transaction's (the host commits).
    pub fn is_ours(self) -> bool {
        !matches!(self, Self::Held)
    }
}

/// How long records live: the caller's choice, passed to every call that writes a deadline
/// (`begin`, `claim`, `complete`, `record_completed`, `claim_completed`);
/// [`Settings::default`] is 30 s, 24 h and 7 days. A row keeps the deadlines it was written
/// with, so a change applies to new records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// How long an owner holds an `in_progress` record before another request may take it over.
    pub lease: Duration,
    /// How long a completed response is replayed.
    pub ttl: Duration,
    /// How long the tombstone outlives the record.
    pub tombstone: Duration,
}

impl Default for Settings {
    /// 30 s lease, 24 h records, 7 day tombstones.
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            ttl: Duration::from_secs(24 * 3600),
            tombstone: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// The times a row written at `now` gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// End of the owner's lease.
    pub lease_until: DateTime<Utc>,
    /// End of replay.
    pub expires_at: DateTime<Utc>,
    /// End of the tombstone: the key is free after it.
    pub tombstone_until: DateTime<Utc>,
}

impl Settings {
    /// The deadlines of a row claimed or completed at `now` (saturating at the latest time).
    pub fn deadlines(&self, now: DateTime<Utc>) -> Deadlines {
        let expires_at = after(now, self.ttl);
        Deadlines {
            lease_until: after(now, self.lease),
            expires_at,
            tombstone_until: after(expires_at, self.tombstone),
        }
    }
}

/// `t + d`, or the latest time there is.
fn after(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// A row's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Owned by the holder of the lease token.
    InProgress,
    /// The response is stored.
    Completed,
    /// Expired: response and request body dropped.
    Tombstone,
}

impl State {
    /// The value of the `state` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
            Self::Tombstone => "tombstone",
        }
    }

    /// Reads the `state` column.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::InProgress, Self::Completed, Self::Tombstone]
            .into_iter()
            .find(|st| st.as_str() == s)
    }
}

/// An existing row, as [`decide`] needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its state.
    pub state: State,
    /// The first request's fingerprint.
    pub fingerprint: Fingerprint,
    /// The first request's canonical body (`None` in a tombstone).
    pub canonical_body: Option<String>,
    /// The current owner's token (the last one, once completed).
    pub lease_token: LeaseToken,
    /// End of the current lease.
    pub lease_until: DateTime<Utc>,
    /// The stored response (`completed` only).
    pub response: Option<StoredResponse>,
    /// The created resource's reference (kept in the tombstone).
    pub resource: Option<String>,
    /// End of replay.
    pub expires_at: DateTime<Utc>,
    /// End of the tombstone.
    pub tombstone_until: DateTime<Utc>,
}

/// What to do about an existing row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Answer with this.
    Answer(Begun),
    /// Take the row over with a conditional update that requires `lease_token` to still be the
    /// row's token and the lease (or the tombstone) to have ended (fencing).
    TakeOver,
}

/// How many times `begin` re-reads a row that changed under it (taken over or released by a
/// concurrent request) before answering [`contended`].
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const ATTEMPTS: usize = 4;

/// The answer when the row kept changing under `begin`: retry in a second.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn contended() -> Begun {
    Begun::InProgress {
        retry_after_secs: 1,
    }
}

/// Decides what a request with `fingerprint` and `canonical_body` gets, at `now`, from the row
/// it lost the insert to. In order: a row past its tombstone is free; a tombstone, or a completed
/// record past `expires_at`, is expired (whatever the body); a different request is reused; a
/// completed record replays; a live lease is in progress; an expired lease is taken over.
pub fn decide(
    row: &Record,
    fingerprint: &Fingerprint,
    canonical_body: &str,
    now: DateTime<Utc>,
) -> Decision {
    if now >= row.tombstone_until {
        return Decision::TakeOver;
    }
    let replay = match (row.state, &row.response) {
        (State::InProgress, _) => None,
        (State::Completed, Some(response)) if now < row.expires_at => Some(response),
        _ => {
            return Decision::Answer(Begun::Expired {
                resource: row.resource.clone(),
            })
        }
    };
    if let Some(differences) = mismatch(row, fingerprint, canonical_body) {
        return Decision::Answer(Begun::Reused { differences });
    }
    if let Some(response) = replay {
        return Decision::Answer(Begun::Replay {
            response: response.clone(),
            expires_at: row.expires_at,
        });
    }
    if now < row.lease_until {
        let left = (row.lease_until - now).num_milliseconds().max(0) as u64;
        return Decision::Answer(Begun::InProgress {
            retry_after_secs: left.div_ceil(1000).max(1),
        });
    }
    Decision::TakeOver
}

/// `None` when the request is the row's; otherwise what differs. Within one fingerprint version
/// the digests decide (a different digest is a reuse, even with no differing field: another
/// method or route). A record of an older version is judged by its version's rules, on the
/// canonical texts: the request is the row's when they name no difference.
fn mismatch(row: &Record, fingerprint: &Fingerprint, canonical_body: &str) -> Option<Vec<String>> {
    let same_version = row.fingerprint.version == fingerprint.version;
    if same_version && row.fingerprint.digest == fingerprint.digest {
        return None;
    }
    let Some(stored) = row.canonical_body.as_deref() else {
        return Some(vec![String::new()]);
    };
    if same_version {
        return Some(differences(stored, canonical_body));
    }
    let diff = differences_across(row.fingerprint.version, stored, canonical_body);
    (!diff.is_empty()).then_some(diff)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str = "/api/v1/app/{app_id}/msg";
    const BODY: &str = r#"{"amount":10,"eventType":"a.b"}"#;

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    fn fp(body: &str) -> Fingerprint {
        Fingerprint::of("POST", ROUTE, body.as_bytes())
    }

    fn response() -> StoredResponse {
        StoredResponse {
            status: 201,
            headers: vec![("content-type".into(), "application/json".into())],
            body: b"{\"id\":\"msg_1\"}".to_vec(),
            resource: Some("msg_1".into()),
        }
    }

    /// A row begun at t(0) with the default settings.
    fn row(state: State) -> Record {
        let d = Settings::default().deadlines(t(0));
        Record {
            state,
            fingerprint: fp(BODY),
            canonical_body: (state != State::Tombstone).then(|| BODY.to_owned()),
            lease_token: LeaseToken("old".into()),
            lease_until: d.lease_until,
            response: (state == State::Completed).then(response),
            resource: (state != State::InProgress).then(|| "msg_1".into()),
            expires_at: d.expires_at,
            tombstone_until: d.tombstone_until,
        }
    }

    fn answer(b: Begun) -> Decision {
        Decision::Answer(b)
    }

    #[test]
    fn the_default_settings_are_30_s_24_h_and_7_days_after_expiry() {
        let d = Settings::default().deadlines(t(0));
        assert_eq!(d.lease_until, t(30));
        assert_eq!(d.expires_at, t(86_400));
        assert_eq!(d.tombstone_until, t(86_400 + 7 * 86_400));
    }

    #[test]
    fn a_live_lease_is_in_progress_with_the_seconds_left_rounded_up() {
        let r = row(State::InProgress);
        let got = |now| decide(&r, &fp(BODY), BODY, now);
        assert_eq!(
            got(t(0)),
            answer(Begun::InProgress {
                retry_after_secs: 30
            })
        );
        let later = t(29) + TimeDelta::milliseconds(500);
        assert_eq!(
            got(later),
            answer(Begun::InProgress {
                retry_after_secs: 1
            })
        );
    }

    #[test]
    fn an_expired_lease_is_taken_over_even_past_the_ttl() {
        let r = row(State::InProgress);
        assert_eq!(decide(&r, &fp(BODY), BODY, t(30)), Decision::TakeOver);
        assert_eq!(decide(&r, &fp(BODY), BODY, t(90_000)), Decision::TakeOver);
    }

    #[test]
    fn a_completed_record_replays_its_response_until_it_expires() {
        let r = row(State::Completed);
        assert_eq!(
            decide(&r, &fp(BODY), BODY, t(86_399)),
            answer(Begun::Replay {
                response: response(),
                expires_at: t(86_400)
            })
        );
        let expired = answer(Begun::Expired {
            resource: Some("msg_1".into()),
        });
        assert_eq!(decide(&r, &fp(BODY), BODY, t(86_400)), expired);
    }

    #[test]
    fn a_different_body_is_reused_with_the_differing_pointers() {
        let other = r#"{"amount":11,"eventType":"a.b","x":1}"#;
        let reused = |r: &Record| decide(r, &fp(other), other, t(1));
        let want = answer(Begun::Reused {
            differences: vec!["/amount".into(), "/x".into()],
        });
        assert_eq!(reused(&row(State::InProgress)), want);
        assert_eq!(reused(&row(State::Completed)), want);
    }

    #[test]
    fn a_body_that_is_not_json_differs_as_a_whole() {
        let r = row(State::InProgress);
        let got = decide(&r, &fp("not json"), "not json", t(1));
        assert_eq!(
            got,
            answer(Begun::Reused {
                differences: vec![String::new()]
            })
        );
    }

    #[test]
    fn a_version_1_record_replays_the_same_request_and_refuses_another() {
        // A record version 1 wrote: numbers through f64, a body it could not read kept as text.
        let v1 = |canonical: &str| {
            let mut r = row(State::Completed);
            r.fingerprint = Fingerprint {
                version: 1,
                digest: [7; 32],
            };
            r.canonical_body = Some(canonical.to_owned());
            r
        };
        let replays = |r: &Record, (fingerprint, body): (Fingerprint, String)| {
            matches!(
                decide(r, &fingerprint, &body, t(1)),
                Decision::Answer(Begun::Replay { .. })
            )
        };
        let request = |body: &str| Fingerprint::with_canonical_body("POST", ROUTE, body.as_bytes());
        let big = v1(r#"{"amount":1.8446744073709552e+19,"eventType":"a.b"}"#);
        assert!(replays(
            &big,
            request(r#"{"eventType":"a.b","amount":18446744073709551616}"#)
        ));
        let other = request(r#"{"amount":12,"eventType":"a.b"}"#);
        assert_eq!(
            decide(&big, &other.0, &other.1, t(1)),
            answer(Begun::Reused {
                differences: vec!["/amount".into()]
            })
        );
        // Version 1 compared no query: its records do not either.
        let quiet = Fingerprint::of_request("POST", ROUTE, "with_content=false", BODY.as_bytes());
        assert!(replays(&v1(BODY), quiet));
        // A body that is not JSON (or that version 1 could not read) is the same as its text.
        assert!(replays(&v1("not json"), request("not json")));
        assert!(replays(&v1(r#"{"n":1e400}"#), request(r#"{"n":1e400}"#)));
        let not_json = request("not  json");
        assert_eq!(
            decide(&v1("not json"), &not_json.0, &not_json.1, t(1)),
            answer(Begun::Reused {
                differences: vec![String::new()]
            })
        );
    }

    #[test]
    fn within_a_version_the_digest_decides_and_differences_name_the_query() {
        let r = row(State::Completed);
        let (fingerprint, text) =
            Fingerprint::of_request("POST", ROUTE, "with_content=false", BODY.as_bytes());
        assert_eq!(
            decide(&r, &fingerprint, &text, t(1)),
            answer(Begun::Reused {
                differences: vec!["?with_content".into()]
            })
        );
        // Another target with the same body: a reuse with no differing field.
        let elsewhere = Fingerprint::of("POST", "/api/v1/app", BODY.as_bytes());
        assert_eq!(
            decide(&r, &elsewhere, BODY, t(1)),
            answer(Begun::Reused {
                differences: vec![]
            })
        );
    }

    #[test]
    fn a_tombstone_is_expired_for_any_body_until_it_ends_then_the_key_is_free() {
        let r = row(State::Tombstone);
        let expired = answer(Begun::Expired {
            resource: Some("msg_1".into()),
        });
        assert_eq!(decide(&r, &fp(BODY), BODY, t(1)), expired);
        assert_eq!(decide(&r, &fp("{}"), "{}", t(100_000)), expired);
        assert_eq!(
            decide(&r, &fp(BODY), BODY, r.tombstone_until),
            Decision::TakeOver
        );
        assert_eq!(
            decide(&row(State::Completed), &fp("{}"), "{}", r.tombstone_until),
            Decision::TakeOver
        );
    }

    #[test]
    fn a_completed_row_without_its_response_is_expired_never_run_again() {
        let mut r = row(State::Completed);
        r.response = None;
        assert_eq!(
            decide(&r, &fp(BODY), BODY, t(1)),
            answer(Begun::Expired {
                resource: Some("msg_1".into())
            })
        );
    }

    #[test]
    fn huge_settings_saturate_instead_of_overflowing() {
        let forever = Settings {
            lease: Duration::MAX,
            ttl: Duration::MAX,
            tombstone: Duration::MAX,
        };
        let d = forever.deadlines(t(0));
        assert_eq!(d.tombstone_until, DateTime::<Utc>::MAX_UTC);
        assert!(d.lease_until > t(0));
    }

    #[test]
    fn states_round_trip_and_tokens_are_fresh() {
        for s in [State::InProgress, State::Completed, State::Tombstone] {
            assert_eq!(State::parse(s.as_str()), Some(s));
        }
        assert_eq!(State::parse("done"), None);
        let (a, b) = (LeaseToken::generate(), LeaseToken::generate());
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 32);
    }
}
