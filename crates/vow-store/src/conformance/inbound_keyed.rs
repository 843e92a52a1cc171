//! Cases about the inbound operations as keyed API writes (the inbound `*_keyed` store methods,
//! such as [`crate::inbound::InboundWork::claim_inbound_work_keyed`]): a pull claim and its `Idempotency-Key` record commit in one
//! transaction or not at all, a key with a record rolls the claim back (nothing leased), and a
//! pull consumer's outcome under a lost lease is a `Conflict` that leaves no record.

use crate::Store;
use vow_idempotency::IdempotencyKey;

use super::inbound::{claim_new, delivery, fields};
use super::support::*;
use crate::idempotency::{
    Begun, Completion, Fingerprint, FreshClaim, LeaseToken, Render, Scope, Settings, StoredResponse,
};
use crate::inbound::processing::{
    Consumer, DestinationResult, NextTry, Outcome, WorkOutcome, WorkRequest,
};
use crate::inbound::{InboundState, NewSource, SourceFields};
use crate::StoreError;

const ROUTE: &str = "/api/v1/source/{source_id}/event/claim";
const BODY: &str = r#"{"limit":1}"#;

fn scope(key: &str) -> Scope {
    Scope {
        principal: "admin".into(),
        application: None,
        method: "POST".into(),
        route: ROUTE.into(),
        key: IdempotencyKey::parse(key).unwrap(),
    }
}

/// A fresh claim of `scope` at `t(secs)`, storing a 200 that names what the write produced.
fn claiming<T: std::fmt::Debug + 'static>(scope: &Scope, secs: i64) -> Completion<T> {
    Completion {
        scope: scope.clone(),
        token: LeaseToken::generate(),
        fresh: Some(FreshClaim {
            fingerprint: Fingerprint::of("POST", ROUTE, BODY.as_bytes()),
            canonical_body: BODY.into(),
            on_takeover: None,
        }),
        now: t(secs),
        settings: Settings::default(),
        render: Render::From(Box::new(|written: &T| StoredResponse {
            status: 200,
            headers: Vec::new(),
            body: format!("{written:?}").into_bytes(),
            resource: None,
        })),
    }
}

/// A pull claim of one event at `t(secs)`.
fn pull(source: crate::inbound::Source, secs: i64) -> WorkRequest {
    WorkRequest {
        now: t(secs),
        lease: chrono::Duration::seconds(30),
        limit: 1,
        consumer: Consumer::Pull(source.id),
        max_attempts: 5,
    }
}

/// A keyed pull claim commits with its record (a begin then replays it); the key claimed again
/// is fenced and leases nothing; an outcome under a lost lease is `Conflict` and leaves no record.
pub async fn a_keyed_pull_claim_commits_with_its_record_or_leases_nothing(store: &dyn Store) {
    let new = NewSource {
        id: vow_core::SourceId::new(),
        token: "token-keyed".into(),
        fields: SourceFields {
            destinations: Vec::new(),
            ..fields("pull")
        },
        now: t(0),
    };
    let source = store.create_source(new).await.unwrap();
    let mut events = Vec::new();
    for (n, id) in ["a", "b"].into_iter().enumerate() {
        let new = crate::inbound::NewInboundEvent {
            now: t(10 + n as i64),
            ..delivery(source.id, Some(id), id.as_bytes())
        };
        events.push(claim_new(store, new).await.id);
    }

    let key = scope("claim-1");
    let (written, response) = store
        .claim_inbound_work_keyed(&pull(source.clone(), 20), Some(claiming(&key, 20)))
        .await
        .unwrap();
    let work = written;
    assert_eq!(
        work.claimed.iter().map(|c| c.event.id).collect::<Vec<_>>(),
        [events[0]]
    );
    let response = response.expect("the stored response");
    let (fingerprint, settings) = (
        Fingerprint::of("POST", ROUTE, BODY.as_bytes()),
        Settings::default(),
    );
    let begun = store
        .begin_idempotent(&key, &fingerprint, BODY, t(21), &settings)
        .await
        .unwrap();
    assert!(
        matches!(&begun, Begun::Replay { response: r, .. } if *r == response),
        "the record committed with the claim: {begun:?}"
    );

    // The key has a record: the second claim is fenced, and rolled back with nothing leased.
    let again = store
        .claim_inbound_work_keyed(&pull(source.clone(), 22), Some(claiming(&key, 22)))
        .await;
    assert!(matches!(again, Err(StoreError::Fenced)), "{again:?}");
    let b = store.get_inbound_event(source.id, events[1]).await.unwrap();
    assert_eq!(b.unwrap().event.state, InboundState::Received);

    // A lost lease is a Conflict: no outcome, and no record for its key.
    let lost = WorkOutcome {
        event: events[1],
        lease: crate::inbound::processing::LeaseToken("not-held".into()),
        results: vec![DestinationResult {
            destination: None,
            outcome: Outcome::Completed,
            status: None,
            error: None,
        }],
        next: NextTry::Exhausted,
        now: t(23),
    };
    let late = scope("complete-1");
    let refused = store
        .record_inbound_work_keyed(lost, Some(claiming(&late, 23)))
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    let status = store.idempotency_status(&late, t(24)).await.unwrap();
    assert!(status.is_none(), "{status:?}");
    let b = store.get_inbound_event(source.id, events[1]).await.unwrap();
    assert_eq!(b.unwrap().event.state, InboundState::Received);
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_inbound_keyed {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_keyed_pull_claim_commits_with_its_record_or_leases_nothing,
        );
    };
}
