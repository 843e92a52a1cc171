//! The delivery queue on PostgreSQL, where the shared conformance cases cannot reach: several
//! processes (`PgStore`s) on one database claiming and recording at once, message creates racing
//! an application's delete under row locks, and rows counted in the tables themselves.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use vow_core::{AttemptId, DeliveryId, EndpointId};
use vow_store::prelude::*;
use vow_store::queue::{
    AttemptFilter, AttemptOutcome, AttemptTrigger, ClaimRequest, ClaimedDelivery, EndpointRoom,
    NewAttempt, NextState, Recorded,
};
use vow_store::{AppKey, DeliveryStatus, Order, Seek, StoreError};
use vow_store_postgres::testing::fresh_store;
use vow_store_postgres::PgStore;

use crate::support::{app, endpoint, endpoint_fields, message, now};

fn claim_at(now: DateTime<Utc>, limit: usize) -> ClaimRequest {
    ClaimRequest {
        now,
        lease: Duration::seconds(30),
        limit,
        room: EndpointRoom::unlimited(),
    }
}

fn attempt(claimed: &ClaimedDelivery, status: Option<u16>, at: DateTime<Utc>) -> NewAttempt {
    NewAttempt {
        id: AttemptId::new(),
        started_at: at,
        url: claimed.endpoint.url.clone(),
        response_status: status,
        response: format!("body of {status:?}"),
        duration_ms: 12,
        success: status.is_some_and(|s| (200..300).contains(&s)),
        error: status.is_none().then(|| "timed out".to_string()),
        trigger: AttemptTrigger::Scheduled,
    }
}

fn outcome(claimed: &ClaimedDelivery, status: Option<u16>, next: NextState) -> AttemptOutcome {
    let at = claimed.lease_until - Duration::seconds(20);
    AttemptOutcome {
        delivery_id: claimed.delivery.id,
        lease: claimed.lease.clone(),
        attempt: (!matches!(next, NextState::Hold)).then(|| attempt(claimed, status, at)),
        next,
        now: at,
    }
}

fn dead_letter(disable_endpoint: bool) -> NextState {
    NextState::DeadLetter {
        reason: "exhausted".into(),
        disable_endpoint,
    }
}

/// An application with one endpoint and `n` messages to it; returns the store's view.
async fn with_deliveries(store: &PgStore, n: usize) -> (vow_store::Application, EndpointId) {
    let a = app(store, None).await;
    let ep = endpoint(store, a.id, endpoint_fields("https://one.example/hook")).await;
    for _ in 0..n {
        store
            .create_message(message(a.id, "invoice.paid", None))
            .await
            .unwrap();
    }
    (a, ep.id)
}

/// A delivery of `app`, read back through the `Store` trait.
async fn delivery(store: &PgStore, app: vow_core::AppId, id: DeliveryId) -> vow_store::Delivery {
    let mut found = None;
    let msgs = store
        .list_messages(
            app,
            &Default::default(),
            &Seek::for_iterator(None, Order::Ascending, 1000),
        )
        .await
        .unwrap();
    for m in msgs {
        for d in store.list_deliveries(app, m.id).await.unwrap() {
            if d.id == id {
                found = Some(d);
            }
        }
    }
    found.expect("the delivery exists")
}

#[tokio::test]
async fn deleting_the_application_takes_the_attempts_with_it() {
    let (store, url) = fresh_store().await;
    let (a, _) = with_deliveries(&store, 1).await;
    let claimed = store.claim_deliveries(&claim_at(now(), 1)).await.unwrap();
    store
        .record_attempts(
            vec![outcome(&claimed[0], Some(200), NextState::Delivered)],
            3,
        )
        .await
        .unwrap();
    store.delete_application(a.id).await.unwrap();
    assert!(store
        .get_application(&AppKey::Id(a.id))
        .await
        .unwrap()
        .is_none());
    let mut conn = crate::support::raw(&url).await;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM attempts")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

/// Recording an attempt locks its delivery and nothing above it: while another session holds
/// the rows of its application, endpoint and message `FOR UPDATE`, it still completes. Its
/// foreign key is to the delivery, which the recording has locked already; keys to those
/// parents would each key-share lock the row and wait.
#[tokio::test]
async fn recording_an_attempt_waits_on_no_lock_of_its_application_endpoint_or_message() {
    let (store, url) = fresh_store().await;
    with_deliveries(&store, 1).await;
    let claimed = store.claim_deliveries(&claim_at(now(), 1)).await.unwrap();
    let mut holder = crate::support::raw(&url).await;
    sqlx::raw_sql(
        "BEGIN;
         SELECT 1 FROM applications FOR UPDATE;
         SELECT 1 FROM endpoints FOR UPDATE;
         SELECT 1 FROM messages FOR UPDATE;",
    )
    .execute(&mut holder)
    .await
    .unwrap();

    let recorded = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        store.record_attempts(
            vec![outcome(&claimed[0], Some(200), NextState::Delivered)],
            3,
        ),
    )
    .await
    .expect("the recording waited on a parent's row lock")
    .unwrap();
    assert_eq!(
        recorded,
        vec![Recorded::Stored {
            endpoint_disabled: false
        }]
    );
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .unwrap();
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM attempts a JOIN deliveries d
             ON d.msg_id = a.msg_id AND d.endpoint_id = a.endpoint_id AND d.id = a.delivery_id
          WHERE d.status = 'delivered'",
    )
    .fetch_one(&mut holder)
    .await
    .unwrap();
    assert_eq!(stored, 1);
}

/// A create of `new` with `Idempotency-Key` `key` claimed in its own transaction, its response
/// rendered before the write (as vow's message route does: the claim is folded into the read of
/// the endpoints).
async fn keyed_create(
    store: &PgStore,
    new: vow_store::NewMessage,
    key: &str,
) -> Result<vow_store::CreatedMessage, StoreError> {
    use vow_store::idempotency::{
        Completion, Fingerprint, FreshClaim, Render, Scope, Settings, StoredResponse,
    };
    let body = format!(r#"{{"eventType":"{}"}}"#, new.event_type);
    let (fingerprint, canonical_body) =
        Fingerprint::with_canonical_body("POST", "/api/v1/app/{app_id}/msg", body.as_bytes());
    let completion = Completion {
        scope: Scope {
            principal: "admin".into(),
            application: Some(new.app_id.to_string()),
            method: "POST".into(),
            route: "/api/v1/app/{app_id}/msg".into(),
            key: vow_idempotency::IdempotencyKey::parse(key).unwrap(),
        },
        token: vow_store::idempotency::LeaseToken::generate(),
        fresh: Some(FreshClaim {
            fingerprint,
            canonical_body,
            on_takeover: None,
        }),
        now: now(),
        settings: Settings::default(),
        render: Render::Ready(StoredResponse {
            status: 202,
            headers: Vec::new(),
            body: Vec::new(),
            resource: Some(new.id.to_string()),
        }),
    };
    let create = MessageCreate {
        new,
        only: None,
        app: None,
    };
    match store.create_message_keyed(create, Some(completion)).await? {
        (created, Some(_)) => Ok(created),
        other => panic!("expected a message and its response, got {other:?}"),
    }
}

/// Message creates lock the application before its endpoints, as the application's delete does
/// (then cascades to them): racing it they wait, never deadlock, with or without a key (a keyed
/// create also claims its key in that first statement; here pairs race for each key). Each
/// create either lands before the delete (and goes with it), finds no application, or, keyed,
/// lost its key to the other of its pair.
#[tokio::test]
async fn message_creates_racing_the_applications_delete_never_deadlock() {
    let (store, url) = fresh_store().await;
    for _ in 0..15 {
        let a = app(&store, None).await;
        for n in 0..3 {
            endpoint(
                &store,
                a.id,
                endpoint_fields(&format!("https://{n}.example/hook")),
            )
            .await;
        }
        let mut creates = Vec::new();
        for n in 0..8 {
            let store = store.clone();
            creates.push(tokio::spawn(async move {
                let new = message(a.id, "invoice.paid", None);
                let created = match n % 2 {
                    0 => store.create_message(new).await,
                    _ => keyed_create(&store, new, &format!("race-{}", n % 4)).await,
                };
                (n, created)
            }));
        }
        let deleting = store.clone();
        let delete = tokio::spawn(async move { deleting.delete_application(a.id).await });
        let mut keyed_landed = [0; 4];
        for create in creates {
            match create.await.unwrap() {
                (n, Ok(created)) => {
                    assert_eq!(created.deliveries, 3);
                    keyed_landed[n % 4] += n % 2;
                }
                (_, Err(StoreError::NotFound(what))) => assert_eq!(what, "application"),
                (n, Err(StoreError::Fenced)) if n % 2 == 1 => {}
                (n, Err(other)) => panic!("create {n} racing the delete failed: {other:?}"),
            }
        }
        assert!(keyed_landed.iter().all(|&n| n <= 1), "{keyed_landed:?}");
        delete.await.unwrap().unwrap();
        let mut conn = crate::support::raw(&url).await;
        let left: i64 = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM messages WHERE app_id = $1) \
             + (SELECT count(*) FROM deliveries WHERE app_id = $1)",
        )
        .bind(a.id.to_string())
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(
            left, 0,
            "the delete took every message and delivery with it"
        );
    }
}

/// Claims until a claim comes back empty, recording every claimed delivery as delivered.
async fn drain(store: PgStore, t: DateTime<Utc>) -> Vec<DeliveryId> {
    let mut got = Vec::new();
    loop {
        let claimed = store.claim_deliveries(&claim_at(t, 7)).await.unwrap();
        if claimed.is_empty() {
            return got;
        }
        let outcomes = claimed
            .iter()
            .map(|c| outcome(c, Some(200), NextState::Delivered))
            .collect();
        let results = store.record_attempts(outcomes, 3).await.unwrap();
        assert!(results.iter().all(|r| matches!(r, Recorded::Stored { .. })));
        got.extend(claimed.iter().map(|c| c.delivery.id));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_claiming_at_once_never_share_a_delivery_and_get_them_all() {
    let (first, url) = fresh_store().await;
    let second = PgStore::connect(&url, 4).await.unwrap();
    let a = app(&first, None).await;
    for i in 0..5 {
        endpoint(
            &first,
            a.id,
            endpoint_fields(&format!("https://{i}.example")),
        )
        .await;
    }
    for _ in 0..100 {
        first
            .create_message(message(a.id, "t", None))
            .await
            .unwrap();
    }
    let t = now();
    let (one, two) = tokio::join!(
        tokio::spawn(drain(first.clone(), t)),
        tokio::spawn(drain(second.clone(), t))
    );
    let (one, two) = (one.unwrap(), two.unwrap());
    assert!(
        !one.is_empty() && !two.is_empty(),
        "{} / {}",
        one.len(),
        two.len()
    );
    let mut seen = HashSet::new();
    for id in one.iter().chain(&two) {
        assert!(seen.insert(*id), "{id} was claimed twice");
    }
    assert_eq!(seen.len(), 500);
    let attempts = first
        .list_attempts(
            a.id,
            &AttemptFilter::default(),
            &Seek::for_iterator(None, Order::Ascending, 1000),
        )
        .await
        .unwrap();
    assert_eq!(attempts.len(), 500);
}

#[tokio::test]
async fn a_stale_owner_cannot_record_after_a_takeover() {
    let (first, url) = fresh_store().await;
    let second = PgStore::connect(&url, 4).await.unwrap();
    let (a, _) = with_deliveries(&first, 1).await;
    let t = now();
    let mut short = claim_at(t, 1);
    short.lease = Duration::seconds(1);
    let old = first.claim_deliveries(&short).await.unwrap();
    assert_eq!(old.len(), 1);
    // The first worker stalls; its lease runs out and another process takes over.
    let new = second
        .claim_deliveries(&claim_at(t + Duration::seconds(2), 1))
        .await
        .unwrap();
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].delivery.id, old[0].delivery.id);

    let stale = first
        .record_attempts(vec![outcome(&old[0], Some(200), NextState::Delivered)], 3)
        .await
        .unwrap();
    assert_eq!(stale, [Recorded::LeaseLost]);
    assert_eq!(
        first
            .renew_leases(
                &[(old[0].delivery.id, old[0].lease.clone())],
                t + Duration::hours(1)
            )
            .await
            .unwrap(),
        0
    );
    let d = delivery(&first, a.id, old[0].delivery.id).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Pending, 0));

    let fresh = second
        .record_attempts(vec![outcome(&new[0], Some(503), dead_letter(false))], 0)
        .await
        .unwrap();
    assert_eq!(
        fresh,
        [Recorded::Stored {
            endpoint_disabled: false
        }]
    );
    let attempts = first
        .list_attempts(
            a.id,
            &AttemptFilter::default(),
            &Seek::for_iterator(None, Order::Descending, 10),
        )
        .await
        .unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].attempt.response_status, Some(503));
}

/// A claim walks an endpoint from below the earliest row it claimed there before, so a lease
/// that expires further down is passed over, but only until that floor's lifetime (one second of
/// claim time) ends; then the endpoint is walked from the front and the row is claimed.
#[tokio::test]
async fn a_lease_that_expires_below_a_claims_floor_is_claimed_within_a_second() {
    let (store, url) = fresh_store().await;
    let (_, ep) = with_deliveries(&store, 3).await;
    let t = now();
    let mut conn = crate::support::raw(&url).await;
    // Due ten, five and four seconds ago: further apart than the floor's slack.
    sqlx::query(
        "UPDATE deliveries d SET next_attempt_at = $1 - make_interval(secs => s.secs)
         FROM (SELECT id, (ARRAY[10, 5, 4])[row_number() OVER (ORDER BY id)] AS secs
               FROM deliveries WHERE endpoint_id = $2) s
         WHERE d.id = s.id",
    )
    .bind(t)
    .bind(ep.to_string())
    .execute(&mut conn)
    .await
    .unwrap();
    // The first claim's lease runs out after 200 ms, the others' after 30 s.
    let claim = |at: DateTime<Utc>, lease_ms: i64| ClaimRequest {
        lease: Duration::milliseconds(lease_ms),
        ..claim_at(at, 1)
    };
    let due = |c: &[ClaimedDelivery]| -> Vec<i64> {
        c.iter()
            .map(|c| (t - c.delivery.next_attempt_at).num_seconds())
            .collect()
    };
    let ms = Duration::milliseconds;

    let first = store.claim_deliveries(&claim(t, 200)).await.unwrap();
    assert_eq!(due(&first), [10]);
    let second = store
        .claim_deliveries(&claim(t + ms(100), 30_000))
        .await
        .unwrap();
    assert_eq!(due(&second), [5]);
    // The first lease has expired, but its row lies below the floor the second claim set.
    let third = store
        .claim_deliveries(&claim(t + ms(500), 30_000))
        .await
        .unwrap();
    assert_eq!(due(&third), [4]);
    let fourth = store
        .claim_deliveries(&claim(t + ms(600), 30_000))
        .await
        .unwrap();
    assert!(fourth.is_empty(), "every row above the floor is leased");
    // Another process has no floors: it walks from the front and finds the row.
    let other = PgStore::connect(&url, 2).await.unwrap();
    let from_front = other
        .claim_deliveries(&claim(t + ms(600), 200))
        .await
        .unwrap();
    assert_eq!(from_front[0].delivery.id, first[0].delivery.id);
    // The first process's floor was set by its walk from the front at `t`; a second later it
    // is gone, and that process claims the row again once the other's lease ran out.
    let again = store
        .claim_deliveries(&claim(t + Duration::seconds(1), 30_000))
        .await
        .unwrap();
    assert_eq!(due(&again), [10]);
    assert_eq!(again[0].delivery.id, first[0].delivery.id);
}

/// A renewal and a record of the same deliveries lock them in one order (by id), so they
/// wait for each other rather than deadlock. Set up so the join's order would deadlock: the
/// record waits for the first row, which a third transaction holds; the renewal is given the
/// rows last first. Once the third lets go, the record takes the first row and wants the
/// second: a renewal that had locked the second would now wait for the first, in a circle.
#[tokio::test]
async fn a_renewal_and_a_record_of_the_same_deliveries_wait_rather_than_deadlock() {
    let (store, url) = fresh_store().await;
    with_deliveries(&store, 2).await;
    let mut claimed = store.claim_deliveries(&claim_at(now(), 2)).await.unwrap();
    claimed.sort_by_key(|c| c.delivery.id.to_string());
    let first = claimed[0].delivery.id.to_string();

    let mut holder = crate::support::raw(&url).await;
    let holder_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut holder)
        .await
        .unwrap();
    let mut watcher = crate::support::raw(&url).await;
    // The first row now comes last in the table and in its endpoint's due order, so a join
    // that walks either (or the renewal's own order) meets the second row first.
    sqlx::query(
        "UPDATE deliveries SET next_attempt_at = next_attempt_at + interval '1 second'
         WHERE id = $1",
    )
    .bind(&first)
    .execute(&mut holder)
    .await
    .unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT id FROM deliveries WHERE id = $1 FOR NO KEY UPDATE")
        .bind(&first)
        .fetch_one(&mut holder)
        .await
        .unwrap();

    let outcomes = claimed
        .iter()
        .map(|c| outcome(c, Some(200), NextState::Delivered))
        .collect();
    let record = tokio::spawn({
        let store = store.clone();
        async move { store.record_attempts(outcomes, 3).await }
    });
    crate::support::blocked_by(&mut watcher, holder_pid, 1).await;
    let last_first: Vec<_> = claimed
        .iter()
        .rev()
        .map(|c| (c.delivery.id, c.lease.clone()))
        .collect();
    // On a pool of its own, so it cannot wait for the record's connection instead.
    let renewer = PgStore::connect(&url, 2).await.unwrap();
    let renew = tokio::spawn({
        let store = renewer;
        async move {
            store
                .renew_leases(&last_first, now() + Duration::seconds(30))
                .await
        }
    });
    crate::support::blocked_by(&mut watcher, holder_pid, 2).await;
    sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();

    let recorded = record
        .await
        .unwrap()
        .expect("the record is not a deadlock's victim");
    let stored = Recorded::Stored {
        endpoint_disabled: false,
    };
    assert_eq!(recorded, [stored.clone(), stored]);
    // The record went first (it queued first), so there was no lease left to renew.
    let renewed = renew
        .await
        .unwrap()
        .expect("the renewal is not a deadlock's victim");
    assert_eq!(renewed, 0);
    let attempts: i64 = sqlx::query_scalar("SELECT count(*) FROM attempts")
        .fetch_one(&mut holder)
        .await
        .unwrap();
    assert_eq!(attempts, 2);
}

/// Rows of `app` in each table a message's rows live in: messages, deliveries, attempts,
/// channels.
async fn message_rows(conn: &mut sqlx::PgConnection, app: vow_core::AppId) -> [i64; 4] {
    let mut counts = [0; 4];
    for (n, table) in ["messages", "deliveries", "attempts", "message_channels"]
        .iter()
        .enumerate()
    {
        counts[n] = sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE app_id = $1"))
            .bind(app.to_string())
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    }
    counts
}

#[tokio::test]
async fn retention_deletes_an_old_messages_rows_from_every_table_and_skips_locked_ones() {
    let (store, url) = fresh_store().await;
    let a = app(&store, None).await;
    endpoint(&store, a.id, endpoint_fields("https://one.example/hook")).await;
    let made = now() - Duration::days(100);
    let mut ids = Vec::new();
    for _ in 0..4 {
        let new = vow_store::NewMessage {
            id: vow_core::MessageId::new_at(made),
            channels: Some(vec!["eu".into()]),
            now: made,
            ..message(a.id, "invoice.paid", None)
        };
        ids.push(store.create_message(new).await.unwrap().message.id);
    }
    assert_eq!(drain(store.clone(), now()).await.len(), 4);
    let mut conn = crate::support::raw(&url).await;
    assert_eq!(message_rows(&mut conn, a.id).await, [4; 4]);

    // Another cleaner (or anything else) holding one message: this one deletes the rest and
    // does not wait for it.
    let mut holder = crate::support::raw(&url).await;
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT 1 FROM messages WHERE id = $1 FOR UPDATE")
        .bind(ids[0].to_string())
        .execute(&mut holder)
        .await
        .unwrap();
    let before = now() - Duration::days(90);
    let purge = store.purge_messages(before, 100);
    let purged = tokio::time::timeout(std::time::Duration::from_secs(10), purge).await;
    assert_eq!(purged.expect("does not wait for the lock").unwrap(), 3);
    assert_eq!(message_rows(&mut conn, a.id).await, [1; 4]);
    sqlx::query("COMMIT").execute(&mut holder).await.unwrap();

    assert_eq!(store.purge_messages(before, 100).await.unwrap(), 1);
    assert_eq!(message_rows(&mut conn, a.id).await, [0; 4]);
}
