//! The claims on PostgreSQL, each test in a fresh schema; `effects` is the business table.

use std::sync::Arc;

use sqlx::{PgConnection, PgPool};
use tokio::sync::{Barrier, Notify};
use vow_receiver::postgres::{claim, process, quarantine, SCHEMA};
use vow_receiver::{Decision, Delivery, Outcome, PayloadDigest};

use crate::common::*;
use crate::pg::fresh_schema;

async fn db(size: u32) -> PgPool {
    let pool = fresh_schema(size).await;
    sqlx::raw_sql(SCHEMA).execute(&pool).await.unwrap();
    sqlx::raw_sql("CREATE TABLE effects (body text NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool
}

async fn count(pool: &PgPool, table_and_where: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM {table_and_where}");
    sqlx::query_scalar(&sql).fetch_one(pool).await.unwrap()
}

/// The business change: one `effects` row.
async fn effect(conn: &mut PgConnection, body: Vec<u8>) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO effects (body) VALUES ($1)")
        .bind(String::from_utf8(body).unwrap())
        .execute(conn)
        .await
        .map(drop)
}

async fn apply(pool: &PgPool, delivery: &Delivery) -> Outcome<(), sqlx::Error> {
    let body = delivery.body().to_vec();
    process(pool, delivery, move |c| Box::pin(effect(c, body))).await
}

/// A change that must not run.
async fn refuse(pool: &PgPool, delivery: &Delivery) -> Outcome<(), ()> {
    process(pool, delivery, |_| {
        panic!("this delivery must not be applied")
    })
    .await
}

/// Claims in a transaction of its own, committed whatever the decision.
async fn claim_alone(pool: &PgPool, id: &str, body: &str) -> Decision {
    let mut tx = pool.begin().await.unwrap();
    let digest = PayloadDigest::of(body.as_bytes());
    let decision = claim(&mut tx, &identity(id), &digest, t0()).await.unwrap();
    tx.commit().await.unwrap();
    decision
}

#[tokio::test]
async fn a_first_claim_is_claimed_and_the_same_payload_again_is_a_duplicate() {
    let pool = db(2).await;
    assert_eq!(claim_alone(&pool, "d-1", BODY).await, Decision::Claimed);
    assert_eq!(claim_alone(&pool, "d-1", BODY).await, Decision::Duplicate);
    assert_eq!(
        claim_alone(&pool, "d-1", CHANGED).await,
        Decision::Quarantined
    );
    let stored: (String, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("SELECT digest, received_at FROM receiver_claims")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored, (PayloadDigest::of(BODY.as_bytes()).hex(), t0()));
    assert_eq!(
        count(&pool, "receiver_quarantine").await,
        0,
        "claim stores no quarantine"
    );
}

#[tokio::test]
async fn a_claim_rolled_back_with_its_transaction_leaves_the_id_free() {
    let pool = db(2).await;
    let mut tx = pool.begin().await.unwrap();
    let digest = PayloadDigest::of(BODY.as_bytes());
    let decision = claim(&mut tx, &identity("d-1"), &digest, t0()).await;
    assert_eq!(decision.unwrap(), Decision::Claimed);
    tx.rollback().await.unwrap();
    assert_eq!(count(&pool, "receiver_claims").await, 0);
    assert_eq!(claim_alone(&pool, "d-1", BODY).await, Decision::Claimed);
}

#[tokio::test]
async fn the_same_event_id_under_another_account_or_source_is_another_event() {
    let pool = db(2).await;
    for account in ["acct_1", "acct_2", ""] {
        let delivery = delivery_of(BODY, Some("d-1"), account);
        assert!(matches!(
            apply(&pool, &delivery).await,
            Outcome::Processed(())
        ));
    }
    let mut tx = pool.begin().await.unwrap();
    let other = vow_receiver::Identity::new("stripe", "acct_1", "d-1");
    let digest = PayloadDigest::of(BODY.as_bytes());
    assert_eq!(
        claim(&mut tx, &other, &digest, t0()).await.unwrap(),
        Decision::Claimed
    );
    tx.commit().await.unwrap();
    assert_eq!(count(&pool, "receiver_claims").await, 4);
    assert_eq!(count(&pool, "receiver_claims WHERE account = ''").await, 1);
    assert_eq!(count(&pool, "effects").await, 3);
}

#[tokio::test]
async fn a_quarantine_is_kept_though_the_business_transaction_rolls_back() {
    let pool = db(2).await;
    claim_alone(&pool, "d-1", BODY).await;
    let digest = PayloadDigest::of(CHANGED.as_bytes());
    let mut tx = pool.begin().await.unwrap();
    let decision = claim(&mut tx, &identity("d-1"), &digest, t0()).await;
    assert_eq!(decision.unwrap(), Decision::Quarantined);
    let id = identity("d-1");
    for newly in [true, false] {
        let stored = quarantine(&pool, &id, &digest, CHANGED.as_bytes(), t0()).await;
        assert_eq!(stored.unwrap(), newly);
    }
    tx.rollback().await.unwrap(); // the business transaction that is never made
    let payload: Vec<u8> = sqlx::query_scalar("SELECT payload FROM receiver_quarantine")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(payload, CHANGED.as_bytes());
    assert_eq!(count(&pool, "receiver_claims").await, 1);
}

#[tokio::test]
async fn processing_commits_the_change_with_the_claim_and_a_redelivery_changes_nothing() {
    let pool = db(2).await;
    let delivery = delivery(BODY, Some("d-1"));
    assert!(matches!(
        apply(&pool, &delivery).await,
        Outcome::Processed(())
    ));
    let again = refuse(&pool, &delivery).await;
    assert!(matches!(again, Outcome::Duplicate), "{again:?}");
    assert_eq!(count(&pool, "effects").await, 1);
    assert_eq!(count(&pool, "receiver_claims").await, 1);
}

#[tokio::test]
async fn a_changed_payload_is_quarantined_durably_and_never_applied() {
    let pool = db(2).await;
    let first = apply(&pool, &delivery(BODY, Some("d-1"))).await;
    assert!(matches!(first, Outcome::Processed(())));
    let changed = delivery(CHANGED, Some("d-1"));
    for _ in 0..2 {
        let outcome = refuse(&pool, &changed).await;
        assert!(matches!(outcome, Outcome::Quarantined), "{outcome:?}");
    }
    let (digest, payload): (String, Vec<u8>) =
        sqlx::query_as("SELECT digest, payload FROM receiver_quarantine")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (digest, payload),
        (changed.digest().hex(), CHANGED.as_bytes().to_vec())
    );
    assert_eq!(count(&pool, "receiver_quarantine").await, 1);
    assert_eq!(
        count(&pool, &format!("effects WHERE body = '{BODY}'")).await,
        1
    );
    assert_eq!(count(&pool, "effects").await, 1);
}

#[tokio::test]
async fn a_failing_change_rolls_back_its_claim_so_the_redelivery_processes_it() {
    let pool = db(2).await;
    let delivery = delivery(BODY, Some("d-1"));
    let body = delivery.body().to_vec();
    let failed = process(&pool, &delivery, move |c| {
        Box::pin(async move {
            effect(c, body).await.unwrap();
            Err::<(), _>("the ledger is closed")
        })
    })
    .await;
    assert!(matches!(failed, Outcome::Failed("the ledger is closed")));
    assert_eq!(count(&pool, "effects").await, 0);
    assert_eq!(count(&pool, "receiver_claims").await, 0);
    assert!(matches!(
        apply(&pool, &delivery).await,
        Outcome::Processed(())
    ));
    assert!(matches!(apply(&pool, &delivery).await, Outcome::Duplicate));
    assert_eq!(count(&pool, "effects").await, 1);
    assert_eq!(count(&pool, "receiver_claims").await, 1);
}

#[tokio::test]
async fn a_delivery_without_an_event_id_is_processed_every_time() {
    let pool = db(2).await;
    let delivery = delivery(BODY, None);
    for _ in 0..3 {
        assert!(matches!(
            apply(&pool, &delivery).await,
            Outcome::Processed(())
        ));
    }
    assert_eq!(count(&pool, "effects").await, 3);
    assert_eq!(count(&pool, "receiver_claims").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_deliveries_apply_the_change_once() {
    let pool = db(20).await;
    let barrier = Arc::new(Barrier::new(50));
    let delivery = delivery(BODY, Some("d-1"));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (pool, barrier, delivery) = (pool.clone(), barrier.clone(), delivery.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                apply(&pool, &delivery).await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    assert_eq!(processed_and_duplicates(&outcomes), (1, 49), "{outcomes:?}");
    assert_eq!(count(&pool, "effects").await, 1);
    assert_eq!(count(&pool, "receiver_claims").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_dropped_after_its_change_but_before_the_commit_leaves_nothing() {
    let pool = db(4).await;
    let delivery = delivery(BODY, Some("d-1"));
    let written = Arc::new(Notify::new());
    let task = {
        let (pool, delivery, written) = (pool.clone(), delivery.clone(), written.clone());
        tokio::spawn(async move {
            let body = delivery.body().to_vec();
            let _ = process(&pool, &delivery, move |c| {
                Box::pin(async move {
                    effect(c, body).await?;
                    written.notify_one();
                    std::future::pending::<Result<(), sqlx::Error>>().await
                })
            })
            .await;
        })
    };
    written.notified().await;
    task.abort(); // the process dies between its side effect and the commit
    assert!(task.await.unwrap_err().is_cancelled());
    // The redelivery waits for the dropped transaction to roll back, then claims afresh.
    assert!(matches!(
        apply(&pool, &delivery).await,
        Outcome::Processed(())
    ));
    assert_eq!(count(&pool, "effects").await, 1);
    assert_eq!(count(&pool, "receiver_claims").await, 1);
}
