//! Cases about `Idempotency-Key` records: begin, the create that completes its record in the
//! same transaction, replay, reuse, release, and a fenced owner that writes nothing. Beginning
//! on a fresh store also proves the backend's migration made the record table.

use vow_idempotency::IdempotencyKey;

use super::support::*;
use crate::idempotency::{Begun, Completion, Fingerprint, LeaseToken, Scope, StoredResponse};
use crate::{CreatedMessage, MessageFilter, Store, StoreError};

const ROUTE: &str = "/api/v1/app/{app_id}/msg";
const BODY: &str = r#"{"eventType":"user.created","payload":{"hello":"world"}}"#;

fn scope(app: &str, key: &str) -> Scope {
    Scope {
        principal: "admin".into(),
        application: Some(app.into()),
        method: "POST".into(),
        route: ROUTE.into(),
        key: IdempotencyKey::parse(key).unwrap(),
    }
}

/// Begins `body` under `scope` at `t(5)`.
async fn begin(store: &dyn Store, scope: &Scope, body: &str) -> Begun {
    let fingerprint = Fingerprint::of("POST", ROUTE, body.as_bytes());
    let canonical = vow_idempotency::fingerprint::canonical(&serde_json::from_str(body).unwrap());
    store
        .begin_idempotent(scope, &fingerprint, &canonical, t(5))
        .await
        .unwrap()
}

#[track_caller]
fn owner(begun: Begun) -> LeaseToken {
    match begun {
        Begun::Owner(token) => token,
        other => panic!("expected to own the record, got {other:?}"),
    }
}

/// The response a test stores: 202 with the message id.
fn completion(scope: &Scope, token: &LeaseToken) -> Completion {
    Completion {
        scope: scope.clone(),
        token: token.clone(),
        render: Box::new(|created: &CreatedMessage| StoredResponse {
            status: 202,
            headers: vec![("content-type".into(), "application/json".into())],
            body: format!(r#"{{"id":"{}"}}"#, created.message.id).into_bytes(),
            resource: Some(created.message.id.to_string()),
        }),
    }
}

/// The owner's create stores the message, its deliveries and the rendered response together;
/// the same request again replays that response; a different body is reused, naming where.
pub async fn an_idempotent_create_commits_its_response_and_the_same_request_replays_it(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let s = scope(&app.id.to_string(), "key-1");
    let token = owner(begin(store, &s, BODY).await);
    let new = new_message(app.id, "user.created");
    let (created, response) = store
        .create_message_idempotent(new.clone(), completion(&s, &token))
        .await
        .unwrap();
    assert_eq!(created.message.id, new.id);
    assert_eq!(created.deliveries, 1);
    assert_eq!(response.resource, Some(new.id.to_string()));
    assert_eq!(
        message_ids(store, app.id, &MessageFilter::default()).await,
        vec![new.id]
    );
    assert_eq!(
        store.list_deliveries(app.id, new.id).await.unwrap().len(),
        1
    );

    match begin(store, &s, BODY).await {
        Begun::Replay { response: r, .. } => assert_eq!(r, response),
        other => panic!("expected a replay, got {other:?}"),
    }
    let other = r#"{"eventType":"user.deleted","payload":{"hello":"world"}}"#;
    assert_eq!(
        begin(store, &s, other).await,
        Begun::Reused {
            differences: vec!["/eventType".into()]
        }
    );
    // Another application's key of the same name is its own record.
    let elsewhere = scope("app_other", "key-1");
    owner(begin(store, &elsewhere, BODY).await);
}

/// A live record answers in progress; its owner releases it (once), and the key is free again.
pub async fn a_released_record_frees_its_key_and_a_live_one_is_in_progress(store: &dyn Store) {
    let s = scope("app_x", "key-2");
    let token = owner(begin(store, &s, BODY).await);
    assert!(matches!(
        begin(store, &s, BODY).await,
        Begun::InProgress { retry_after_secs } if retry_after_secs >= 1
    ));
    let stranger = LeaseToken::generate();
    assert!(!store.release_idempotent(&s, &stranger).await.unwrap());
    assert!(store.release_idempotent(&s, &token).await.unwrap());
    assert!(!store.release_idempotent(&s, &token).await.unwrap());
    owner(begin(store, &s, BODY).await);
}

/// Purging ages a completed record past its expiry into a tombstone: the same key is then
/// `Expired` (never run again), whatever the body, until the tombstone ends and the key is free.
pub async fn purging_turns_an_expired_record_into_a_tombstone_then_frees_the_key(
    store: &dyn Store,
) {
    let s = scope("app_p", "key-p");
    let token = owner(begin(store, &s, BODY).await);
    let done = StoredResponse {
        status: 404,
        headers: Vec::new(),
        body: b"{}".to_vec(),
        resource: None,
    };
    store
        .complete_idempotent(&s, &token, done, t(5))
        .await
        .unwrap();
    assert_eq!(
        store.purge_idempotent(t(60), 100).await.unwrap(),
        0,
        "not expired"
    );
    let day = 24 * 3600;
    assert_eq!(
        store.purge_idempotent(t(5 + day + 1), 100).await.unwrap(),
        1
    );
    let fingerprint = Fingerprint::of("POST", ROUTE, BODY.as_bytes());
    let canonical = vow_idempotency::fingerprint::canonical(&serde_json::from_str(BODY).unwrap());
    let at = |secs| store.begin_idempotent(&s, &fingerprint, &canonical, t(secs));
    assert!(matches!(
        at(5 + day + 2).await.unwrap(),
        Begun::Expired { .. }
    ));
    let week = 7 * day;
    assert_eq!(
        store
            .purge_idempotent(t(5 + day + week + 1), 100)
            .await
            .unwrap(),
        1
    );
    owner(at(5 + day + week + 2).await.unwrap());
}

/// A create whose token no longer owns the record is `Fenced` and writes nothing; a create that
/// fails (no such application) leaves the record in progress and writes nothing.
pub async fn a_fenced_or_failed_idempotent_create_writes_nothing(store: &dyn Store) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let s = scope(&app.id.to_string(), "key-3");
    let token = owner(begin(store, &s, BODY).await);
    assert!(store.release_idempotent(&s, &token).await.unwrap());
    let new = new_message(app.id, "user.created");
    let fenced = store
        .create_message_idempotent(new.clone(), completion(&s, &token))
        .await;
    assert!(matches!(fenced, Err(StoreError::Fenced)), "{fenced:?}");
    assert!(message_ids(store, app.id, &MessageFilter::default())
        .await
        .is_empty());
    assert!(store
        .list_deliveries(app.id, new.id)
        .await
        .unwrap()
        .is_empty());

    let token = owner(begin(store, &s, BODY).await);
    let missing = new_message(vow_core::AppId::new(), "user.created");
    assert_not_found(
        store
            .create_message_idempotent(missing, completion(&s, &token))
            .await,
        "application",
    );
    assert!(matches!(
        begin(store, &s, BODY).await,
        Begun::InProgress { .. }
    ));
    assert!(store.release_idempotent(&s, &token).await.unwrap());
}
