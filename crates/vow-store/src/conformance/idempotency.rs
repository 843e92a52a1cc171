//! Cases about `Idempotency-Key` records: begin, the completing create, replay, reuse, release,
//! and a fenced owner that writes nothing; and that a record lives as long as the [`Settings`] it
//! was written with say (lease, replay, tombstone), not as long as the defaults. Beginning on a
//! fresh store also proves the backend's migration made the record table.

use std::time::Duration;

use vow_core::EndpointId;
use vow_idempotency::IdempotencyKey;

use super::support::*;
use crate::idempotency::{
    Begun, Completion, Fingerprint, FreshClaim, KeyState, LeaseToken, Render, Scope, Settings,
    StoredResponse,
};
use crate::StoreError;
use crate::{CreatedMessage, MessageCreate, MessageFilter, NewEndpoint, NewMessage, Store};

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

const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;

/// Lifetimes unlike the defaults: a 5 s lease, 1 h of replay, a 2 day tombstone.
fn short() -> Settings {
    Settings {
        lease: Duration::from_secs(5),
        ttl: Duration::from_secs(HOUR as u64),
        tombstone: Duration::from_secs(2 * DAY as u64),
    }
}

/// `body`'s fingerprint and canonical form.
fn request(body: &str) -> (Fingerprint, String) {
    let fingerprint = Fingerprint::of("POST", ROUTE, body.as_bytes());
    let canonical = vow_idempotency::fingerprint::canonical(&serde_json::from_str(body).unwrap());
    (fingerprint, canonical)
}

/// Begins `body` under `scope` at `t(5)` with the default settings.
async fn begin(store: &dyn Store, scope: &Scope, body: &str) -> Begun {
    begin_at(store, scope, body, t(5), &Settings::default()).await
}

/// Begins `body` under `scope` at `now` with `settings`.
async fn begin_at(
    store: &dyn Store,
    scope: &Scope,
    body: &str,
    now: chrono::DateTime<chrono::Utc>,
    settings: &Settings,
) -> Begun {
    let (fingerprint, canonical) = request(body);
    store
        .begin_idempotent(scope, &fingerprint, &canonical, now, settings)
        .await
        .unwrap()
}

#[track_caller]
fn owner(begun: Begun) -> LeaseToken {
    match begun {
        Begun::Owner(token) | Begun::TakenOver(token) => token,
        other => panic!("expected to own the record, got {other:?}"),
    }
}

/// The response a test stores: 202 with the created resource's id, completed at `t(5)` with
/// the default settings.
fn completion<T: Resource>(scope: &Scope, token: &LeaseToken) -> Completion<T> {
    Completion {
        scope: scope.clone(),
        token: token.clone(),
        fresh: None,
        now: t(5),
        settings: Settings::default(),
        render: Render::From(Box::new(|written: &T| accepted(&written.resource_id()))),
    }
}

/// A created resource a test's response names.
trait Resource: 'static {
    /// Its id.
    fn resource_id(&self) -> String;
}

impl Resource for CreatedMessage {
    fn resource_id(&self) -> String {
        self.message.id.to_string()
    }
}

impl Resource for crate::Endpoint {
    fn resource_id(&self) -> String {
        self.id.to_string()
    }
}

/// A plain message create: the message, to its matching endpoints.
fn plain(new: NewMessage) -> MessageCreate {
    MessageCreate {
        new,
        only: None,
        app: None,
    }
}

/// The 202 a test stores for the resource `id`.
fn accepted(id: &str) -> StoredResponse {
    StoredResponse {
        status: 202,
        headers: vec![("content-type".into(), "application/json".into())],
        body: format!(r#"{{"id":"{id}"}}"#).into_bytes(),
        resource: Some(id.to_owned()),
    }
}

/// Creates `new` through [`crate::Messages::create_message_keyed`], completing the record `token` owns.
async fn create_message(
    store: &dyn Store,
    new: &NewMessage,
    scope: &Scope,
    token: &LeaseToken,
) -> Result<(CreatedMessage, StoredResponse), StoreError> {
    let keyed = Some(completion(scope, token));
    match store
        .create_message_keyed(plain(new.clone()), keyed)
        .await?
    {
        (created, Some(response)) => Ok((created, response)),
        other => panic!("expected a message and a stored response, got {other:?}"),
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
    let (created, response) = create_message(store, &new, &s, &token).await.unwrap();
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
        .complete_idempotent(&s, &token, done, t(5), &Settings::default())
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
    let (fingerprint, canonical) = request(BODY);
    let defaults = Settings::default();
    let at = |secs| store.begin_idempotent(&s, &fingerprint, &canonical, t(secs), &defaults);
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
    let fenced = create_message(store, &new, &s, &token).await;
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
        create_message(store, &missing, &s, &token).await,
        "application",
    );
    assert!(matches!(
        begin(store, &s, BODY).await,
        Begun::InProgress { .. }
    ));
    assert!(store.release_idempotent(&s, &token).await.unwrap());
}

/// A create that claims its key inside its own transaction (`fresh`, no record begun), its
/// response rendered from the write's result or before it (a store may then claim with the
/// response, folded into its first statement):
/// - a key with no record is recorded completed with the write;
/// - a key whose record is a live claim, or completed, is `Fenced` and the write is rolled back;
/// - a key whose claim was abandoned (its lease ran out) is taken over, the takeover hook runs,
///   and the write commits with the record, which the old owner's token no longer completes;
/// - an application without endpoints gets its message and record; a missing application or
///   endpoint is `NotFound`, and the claim is rolled back with the write (the key stays free).
pub async fn a_create_that_claims_its_key_in_its_transaction_commits_or_writes_nothing(
    store: &dyn Store,
) {
    for ready in [false, true] {
        claims_in_the_write(store, ready).await;
    }
}

async fn claims_in_the_write(store: &dyn Store, ready: bool) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let takeovers = Arc::new(AtomicUsize::new(0));
    let claim = |s: &Scope, new: &NewMessage, now| {
        let (fingerprint, canonical_body) = request(BODY);
        let counted = takeovers.clone();
        let base = completion(s, &LeaseToken::generate());
        Completion {
            fresh: Some(FreshClaim {
                fingerprint,
                canonical_body,
                on_takeover: Some(Box::new(move || {
                    counted.fetch_add(1, Ordering::SeqCst);
                })),
            }),
            now,
            render: match ready {
                true => Render::Ready(accepted(&new.id.to_string())),
                false => base.render,
            },
            ..base
        }
    };
    let apply = |new: &NewMessage, only: Option<EndpointId>, s: &Scope, now| {
        let create = MessageCreate {
            new: new.clone(),
            only,
            app: None,
        };
        store.create_message_keyed(create, Some(claim(s, new, now)))
    };
    let key = |name: &str| scope(&app.id.to_string(), &format!("{name}-{ready}"));

    let free = key("claim-free");
    let first = new_message(app.id, "user.created");
    let (written, response) = apply(&first, None, &free, t(5)).await.unwrap();
    let response = response.unwrap();
    assert_eq!(response, accepted(&first.id.to_string()));
    assert_eq!(written.deliveries, 1);
    assert_eq!(
        begin(store, &free, BODY).await,
        Begun::Replay {
            response,
            expires_at: Settings::default().deadlines(t(5)).expires_at
        }
    );
    let again = new_message(app.id, "user.created");
    let fenced = apply(&again, None, &free, t(6)).await;
    assert!(matches!(fenced, Err(StoreError::Fenced)), "{fenced:?}");

    let live = key("claim-live");
    let holder = owner(begin(store, &live, BODY).await);
    let during = new_message(app.id, "user.created");
    let fenced = apply(&during, None, &live, t(6)).await;
    assert!(matches!(fenced, Err(StoreError::Fenced)), "{fenced:?}");
    assert_eq!(takeovers.load(Ordering::SeqCst), 0);

    // The default lease is 30 s from t(5): at t(40) the claim is abandoned.
    let late = new_message(app.id, "user.created");
    let (_, response) = apply(&late, None, &live, t(40)).await.unwrap();
    assert_eq!(takeovers.load(Ordering::SeqCst), 1);
    let stale = create_message(store, &new_message(app.id, "user.created"), &live, &holder).await;
    assert!(matches!(stale, Err(StoreError::Fenced)), "{stale:?}");
    assert_eq!(
        begin_at(store, &live, BODY, t(41), &Settings::default()).await,
        Begun::Replay {
            response: response.unwrap(),
            expires_at: Settings::default().deadlines(t(40)).expires_at
        }
    );

    let bare = create_app(store, "No endpoints").await;
    let lonely = new_message(bare.id, "user.created");
    let s = scope(&bare.id.to_string(), &format!("claim-bare-{ready}"));
    match apply(&lonely, None, &s, t(5)).await.unwrap() {
        (created, Some(_)) => assert_eq!(created.deliveries, 0),
        other => panic!("expected a message without deliveries, got {other:?}"),
    }
    assert_eq!(
        message_ids(store, bare.id, &MessageFilter::default()).await,
        vec![lonely.id]
    );
    assert!(matches!(begin(store, &s, BODY).await, Begun::Replay { .. }));

    let missing = new_message(vow_core::AppId::new(), "user.created");
    let s = scope(
        &missing.app_id.to_string(),
        &format!("claim-missing-{ready}"),
    );
    assert_not_found(apply(&missing, None, &s, t(5)).await, "application");
    let nowhere = key("claim-nowhere");
    let aimed = new_message(app.id, "user.created");
    let no_endpoint = apply(&aimed, Some(EndpointId::new()), &nowhere, t(5)).await;
    assert_not_found(no_endpoint, "endpoint");
    for s in [&s, &nowhere] {
        assert_eq!(store.idempotency_status(s, t(6)).await.unwrap(), None);
    }

    let ids = message_ids(store, app.id, &MessageFilter::default()).await;
    let mut stored: Vec<String> = ids.iter().map(ToString::to_string).collect();
    stored.sort();
    let mut want = vec![first.id.to_string(), late.id.to_string()];
    want.sort();
    assert_eq!(stored, want, "only the first claim and the takeover wrote");
}

/// Any API write commits with its record: an endpoint created under a key exists with its
/// secret and the stored response names it; a fenced one leaves no endpoint behind. A write
/// without a completion is the plain create.
pub async fn an_idempotent_endpoint_create_commits_with_its_record_and_a_fenced_one_writes_nothing(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let new = |url: &str| NewEndpoint {
        id: EndpointId::new(),
        app_id: app.id,
        fields: endpoint_fields(url),
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
        now: t(5),
    };
    let s = scope(&app.id.to_string(), "ep-1");
    let token = owner(begin(store, &s, BODY).await);
    let first = new("https://example.com/a");
    let (written, response) = store
        .create_endpoint_keyed(first.clone(), Some(completion(&s, &token)))
        .await
        .unwrap();
    assert_eq!(written.id, first.id);
    assert_eq!(response.unwrap().resource, Some(first.id.to_string()));
    assert_eq!(
        store
            .endpoint_secrets(app.id, first.id, t(6))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(matches!(begin(store, &s, BODY).await, Begun::Replay { .. }));

    let s2 = scope(&app.id.to_string(), "ep-2");
    let token = owner(begin(store, &s2, BODY).await);
    assert!(store.release_idempotent(&s2, &token).await.unwrap());
    let fenced = store
        .create_endpoint_keyed(new("https://example.com/b"), Some(completion(&s2, &token)))
        .await;
    assert!(matches!(fenced, Err(StoreError::Fenced)), "{fenced:?}");

    let (plain, none) = store
        .create_endpoint_keyed(new("https://example.com/c"), None)
        .await
        .unwrap();
    // The result is an endpoint by its type; without a key nothing is stored.
    assert!(none.is_none(), "{plain:?}");
    let mut urls: Vec<String> = store
        .list_endpoints(app.id, &all(10))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.fields.url)
        .collect();
    urls.sort();
    assert_eq!(urls, ["https://example.com/a", "https://example.com/c"]);
}

/// A key's status follows its record: in progress (the oldest claim's start is known), then
/// completed with its resource, then expired once purged to a tombstone; another scope's key of
/// the same name is not seen.
pub async fn a_keys_status_follows_its_record_and_the_oldest_claim_is_reported(store: &dyn Store) {
    assert_eq!(
        store
            .oldest_idempotent_claim(&Settings::default())
            .await
            .unwrap(),
        None
    );
    let s = scope("app_s", "key-s");
    assert_eq!(store.idempotency_status(&s, t(5)).await.unwrap(), None);
    let token = owner(begin(store, &s, BODY).await);
    let status = store.idempotency_status(&s, t(6)).await.unwrap().unwrap();
    assert_eq!(status.state, KeyState::InProgress);
    assert_eq!(
        store
            .oldest_idempotent_claim(&Settings::default())
            .await
            .unwrap(),
        Some(t(5))
    );
    assert_eq!(
        store
            .idempotency_status(&scope("app_other", "key-s"), t(6))
            .await
            .unwrap(),
        None
    );

    let done = StoredResponse {
        status: 201,
        headers: Vec::new(),
        body: b"{}".to_vec(),
        resource: Some("ep_1".into()),
    };
    store
        .complete_idempotent(&s, &token, done, t(5), &Settings::default())
        .await
        .unwrap();
    let status = store.idempotency_status(&s, t(6)).await.unwrap().unwrap();
    assert_eq!(status.state, KeyState::Completed);
    assert_eq!(status.resource.as_deref(), Some("ep_1"));
    assert_eq!(status.expires_at, t(5 + 24 * 3600));
    assert_eq!(
        store
            .oldest_idempotent_claim(&Settings::default())
            .await
            .unwrap(),
        None
    );

    let later = t(5 + 24 * 3600 + 1);
    store.purge_idempotent(later, 100).await.unwrap();
    let status = store.idempotency_status(&s, later).await.unwrap().unwrap();
    assert_eq!(status.state, KeyState::Expired);
    assert_eq!(status.resource.as_deref(), Some("ep_1"));
}

/// A stored 201 naming `resource`.
fn created(resource: &str) -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: Vec::new(),
        body: b"{}".to_vec(),
        resource: Some(resource.into()),
    }
}

/// A claim's lease is its settings' (5 s, not the default 30 s): 4 s in, a retry is in progress
/// and told to come back when the lease ends; at 5 s the retry takes the claim over, and the
/// stale owner is fenced. The oldest claim's start is its lease's end less that lease.
pub async fn a_claims_lease_lasts_as_long_as_its_settings_say(store: &dyn Store) {
    let s = scope("app_l", "key-l");
    let stale = owner(begin_at(store, &s, BODY, t(5), &short()).await);
    assert_eq!(
        store.oldest_idempotent_claim(&short()).await.unwrap(),
        Some(t(5))
    );
    assert_eq!(
        begin_at(store, &s, BODY, t(9), &short()).await,
        Begun::InProgress {
            retry_after_secs: 1
        }
    );
    let taken = match begin_at(store, &s, BODY, t(10), &short()).await {
        Begun::TakenOver(token) => token,
        other => panic!("the 5 s lease has run out, so the retry takes over: {other:?}"),
    };
    let fenced = store
        .complete_idempotent(&s, &stale, created("stale"), t(11), &short())
        .await;
    assert!(matches!(fenced, Err(StoreError::Fenced)), "{fenced:?}");
    assert_eq!(
        store.oldest_idempotent_claim(&short()).await.unwrap(),
        Some(t(10)),
        "the new owner's claim began at the takeover"
    );
    store
        .complete_idempotent(&s, &taken, created("ep_new"), t(11), &short())
        .await
        .unwrap();
    let status = store.idempotency_status(&s, t(12)).await.unwrap().unwrap();
    assert_eq!(status.resource.as_deref(), Some("ep_new"));
    assert_eq!(status.expires_at, t(11 + HOUR));
}

/// A completed record is replayed for its settings' retention (1 h, not 24 h), which its status
/// and its replay tell; then it is expired, and its tombstone refuses the key for the settings'
/// 2 days (purging keeps it until then), after which purging deletes it and the key is free.
/// Both ways of completing count from the completion: the first request's one insert (`fresh`)
/// and a begun record's update.
pub async fn a_completed_record_expires_and_its_tombstone_ends_as_its_settings_say(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    create_endpoint(store, app.id).await;
    let s = scope(&app.id.to_string(), "key-ttl");
    let (fingerprint, canonical_body) = request(BODY);
    let fresh = Completion {
        fresh: Some(FreshClaim {
            fingerprint,
            canonical_body,
            on_takeover: None,
        }),
        settings: short(),
        ..completion(&s, &LeaseToken::generate())
    };
    let create = plain(new_message(app.id, "user.created"));
    let (_, response) = store
        .create_message_keyed(create, Some(fresh))
        .await
        .unwrap();
    let (expires, ends) = (t(5 + HOUR), t(5 + HOUR + 2 * DAY));
    let status = store.idempotency_status(&s, t(6)).await.unwrap().unwrap();
    assert_eq!(status.state, KeyState::Completed);
    assert_eq!((status.expires_at, status.tombstone_until), (expires, ends));
    assert_eq!(
        begin_at(store, &s, BODY, t(5 + HOUR - 1), &short()).await,
        Begun::Replay {
            response: response.unwrap(),
            expires_at: expires
        }
    );
    let expired = |b: &Begun| matches!(b, Begun::Expired { .. });
    let got = begin_at(store, &s, BODY, expires, &short()).await;
    assert!(expired(&got), "expired at 1 h, before any purge: {got:?}");
    assert_eq!(store.purge_idempotent(expires, 100).await.unwrap(), 1);
    let status = store
        .idempotency_status(&s, expires)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.state, KeyState::Expired);

    let before_the_end = ends - chrono::Duration::seconds(1);
    let got = begin_at(store, &s, BODY, before_the_end, &short()).await;
    assert!(expired(&got), "the tombstone lasts 2 days: {got:?}");
    assert_eq!(
        store.purge_idempotent(before_the_end, 100).await.unwrap(),
        0
    );
    assert_eq!(store.purge_idempotent(ends, 100).await.unwrap(), 1);
    assert_eq!(store.idempotency_status(&s, ends).await.unwrap(), None);
    assert!(matches!(
        begin_at(store, &s, BODY, ends, &short()).await,
        Begun::Owner(_)
    ));

    // A begun record completed on its own counts from its completion too.
    let s2 = scope(&app.id.to_string(), "key-ttl-2");
    let token = owner(begin_at(store, &s2, BODY, t(5), &short()).await);
    store
        .complete_idempotent(&s2, &token, created("ep_2"), t(20), &short())
        .await
        .unwrap();
    let status = store.idempotency_status(&s2, t(21)).await.unwrap().unwrap();
    assert_eq!(
        (status.expires_at, status.tombstone_until),
        (t(20 + HOUR), t(20 + HOUR + 2 * DAY))
    );
}

/// With no tombstone (0 days) an expired key is free at once: its record's expiry is also its
/// end, so the next request with it runs.
pub async fn without_a_tombstone_a_key_is_free_as_soon_as_its_record_expires(store: &dyn Store) {
    let none = Settings {
        tombstone: Duration::ZERO,
        ..short()
    };
    let s = scope("app_z", "key-z");
    let token = owner(begin_at(store, &s, BODY, t(5), &none).await);
    store
        .complete_idempotent(&s, &token, created("ep_z"), t(5), &none)
        .await
        .unwrap();
    let status = store.idempotency_status(&s, t(6)).await.unwrap().unwrap();
    assert_eq!(
        (status.expires_at, status.tombstone_until),
        (t(5 + HOUR), t(5 + HOUR))
    );
    assert!(matches!(
        begin_at(store, &s, BODY, t(4 + HOUR), &none).await,
        Begun::Replay { .. }
    ));
    assert_eq!(
        store.idempotency_status(&s, t(5 + HOUR)).await.unwrap(),
        None
    );
    owner(begin_at(store, &s, BODY, t(5 + HOUR), &none).await);
}

/// A message create may create its application first (a uid that names none yet): both commit
/// in the one transaction, or neither does. A fenced claim, a missing endpoint or a taken uid
/// leave no application behind, with either render kind, keyed or not.
pub async fn a_message_create_that_creates_its_application_writes_both_or_neither(
    store: &dyn Store,
) {
    for ready in [false, true] {
        creates_its_application(store, ready).await;
    }
}

async fn creates_its_application(store: &dyn Store, ready: bool) {
    let uid = |name: &str| format!("{name}-{ready}");
    let new_app = |name: &str| crate::NewApplication {
        id: vow_core::AppId::new(),
        fields: crate::ApplicationFields {
            uid: Some(uid(name)),
            ..app_fields(name)
        },
        now: t(4),
    };
    let keyed = |app: &crate::NewApplication, key: &str| {
        let s = scope(&app.id.to_string(), key);
        let (fingerprint, canonical_body) = request(BODY);
        let base = completion(&s, &LeaseToken::generate());
        let render = match ready {
            true => Render::Ready(accepted("msg")),
            false => base.render,
        };
        let fresh = Some(FreshClaim {
            fingerprint,
            canonical_body,
            on_takeover: None,
        });
        Completion {
            fresh,
            render,
            ..base
        }
    };
    let write = |app: &crate::NewApplication, only: Option<EndpointId>| MessageCreate {
        new: new_message(app.id, "user.created"),
        only,
        app: Some(app.clone()),
    };
    let exists = |name: &str| {
        let key = crate::AppKey::Uid(uid(name));
        async move { store.get_application(&key).await.unwrap() }
    };

    let created = new_app("created");
    let (written, response) = store
        .create_message_keyed(write(&created, None), Some(keyed(&created, "k1")))
        .await
        .unwrap();
    // The result is a message by its type; the keyed create stored its response.
    assert!(response.is_some(), "{written:?}");
    let app = exists("created")
        .await
        .expect("the application was created");
    assert_eq!((app.id, app.fields.name.as_str()), (created.id, "created"));
    assert_eq!(
        message_ids(store, app.id, &MessageFilter::default())
            .await
            .len(),
        1
    );

    let plain = new_app("plain");
    (store.create_message_keyed(write(&plain, None), None).await).unwrap();
    assert!(exists("plain").await.is_some(), "without a key as well");

    let nowhere = new_app("nowhere");
    let refused = store
        .create_message_keyed(
            write(&nowhere, Some(EndpointId::new())),
            Some(keyed(&nowhere, "k2")),
        )
        .await;
    assert_not_found(refused, "endpoint");
    assert!(exists("nowhere").await.is_none(), "a refused write");

    let held = new_app("held");
    let s = scope(&held.id.to_string(), "k3");
    owner(begin(store, &s, BODY).await);
    let fenced = store
        .create_message_keyed(write(&held, None), Some(keyed(&held, "k3")))
        .await;
    assert!(matches!(fenced, Err(StoreError::Fenced)), "{fenced:?}");
    assert!(exists("held").await.is_none(), "a fenced write");

    let twin = crate::NewApplication {
        id: vow_core::AppId::new(),
        ..created.clone()
    };
    let taken = store
        .create_message_keyed(write(&twin, None), Some(keyed(&twin, "k4")))
        .await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");
    assert_eq!(
        message_ids(store, twin.id, &MessageFilter::default()).await,
        vec![],
        "nothing under the twin's id"
    );
    assert_eq!(
        store
            .idempotency_status(&scope(&twin.id.to_string(), "k4"), t(6))
            .await
            .unwrap(),
        None,
        "and the key stays free"
    );
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_idempotency {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            an_idempotent_create_commits_its_response_and_the_same_request_replays_it,
            a_released_record_frees_its_key_and_a_live_one_is_in_progress,
            purging_turns_an_expired_record_into_a_tombstone_then_frees_the_key,
            a_fenced_or_failed_idempotent_create_writes_nothing,
            a_create_that_claims_its_key_in_its_transaction_commits_or_writes_nothing,
            a_message_create_that_creates_its_application_writes_both_or_neither,
            an_idempotent_endpoint_create_commits_with_its_record_and_a_fenced_one_writes_nothing,
            a_keys_status_follows_its_record_and_the_oldest_claim_is_reported,
            a_claims_lease_lasts_as_long_as_its_settings_say,
            a_completed_record_expires_and_its_tombstone_ends_as_its_settings_say,
            without_a_tombstone_a_key_is_free_as_soon_as_its_record_expires,
        );
    };
}
