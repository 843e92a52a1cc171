//! The claims on SQLite, against a database file in WAL mode; `effects` is the business table.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};
use tempfile::TempDir;
use vow_receiver::sqlite::{claim, process, quarantine, SCHEMA};
use vow_receiver::{Decision, Delivery, Error, Outcome, PayloadDigest};

use crate::common::*;

fn open(dir: &TempDir) -> Connection {
    let conn = Connection::open(dir.path().join("app.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    conn.execute_batch("CREATE TABLE IF NOT EXISTS effects (body TEXT NOT NULL)")
        .unwrap();
    conn
}

fn db() -> (TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(&dir);
    (dir, conn)
}

fn count(conn: &Connection, table_and_where: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM {table_and_where}");
    conn.query_row(&sql, [], |r| r.get(0)).unwrap()
}

/// The business change: one `effects` row.
fn effect(conn: &Connection, delivery: &Delivery) -> rusqlite::Result<()> {
    let body = std::str::from_utf8(delivery.body()).unwrap();
    conn.execute("INSERT INTO effects (body) VALUES (?1)", [body])
        .map(drop)
}

fn apply(conn: &mut Connection, delivery: &Delivery) -> Outcome<(), rusqlite::Error> {
    process(conn, delivery, |c| effect(c, delivery))
}

/// Claims in a transaction of its own, committed whatever the decision.
fn claim_alone(conn: &mut Connection, id: &str, body: &str) -> Decision {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    let decision = claim(
        &tx,
        &identity(id),
        &PayloadDigest::of(body.as_bytes()),
        t0(),
    )
    .unwrap();
    tx.commit().unwrap();
    decision
}

#[test]
fn a_first_claim_is_claimed_and_the_same_payload_again_is_a_duplicate() {
    let (_dir, mut conn) = db();
    assert_eq!(claim_alone(&mut conn, "d-1", BODY), Decision::Claimed);
    assert_eq!(claim_alone(&mut conn, "d-1", BODY), Decision::Duplicate);
    assert_eq!(
        claim_alone(&mut conn, "d-1", CHANGED),
        Decision::Quarantined
    );
    let stored: (String, i64) = conn
        .query_row("SELECT digest, received_at FROM receiver_claims", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let digest = PayloadDigest::of(BODY.as_bytes()).hex();
    assert_eq!(stored, (digest, t0().timestamp_micros()));
    assert_eq!(
        count(&conn, "receiver_quarantine"),
        0,
        "claim stores no quarantine"
    );
}

#[test]
fn a_claim_rolled_back_with_its_transaction_leaves_the_id_free() {
    let (_dir, mut conn) = db();
    let tx = conn.transaction().unwrap();
    let digest = PayloadDigest::of(BODY.as_bytes());
    assert_eq!(
        claim(&tx, &identity("d-1"), &digest, t0()).unwrap(),
        Decision::Claimed
    );
    tx.rollback().unwrap();
    assert_eq!(count(&conn, "receiver_claims"), 0);
    assert_eq!(claim_alone(&mut conn, "d-1", BODY), Decision::Claimed);
}

#[test]
fn the_same_event_id_under_another_account_or_source_is_another_event() {
    let (_dir, mut conn) = db();
    let accounts = ["acct_1", "acct_2", ""];
    for account in accounts {
        let delivery = delivery_of(BODY, Some("d-1"), account);
        assert!(matches!(
            apply(&mut conn, &delivery),
            Outcome::Processed(())
        ));
    }
    let tx = conn.transaction().unwrap();
    let other = vow_receiver::Identity::new("stripe", "acct_1", "d-1");
    let digest = PayloadDigest::of(BODY.as_bytes());
    assert_eq!(
        claim(&tx, &other, &digest, t0()).unwrap(),
        Decision::Claimed
    );
    tx.commit().unwrap();
    assert_eq!(count(&conn, "receiver_claims"), 4);
    assert_eq!(count(&conn, "receiver_claims WHERE account = ''"), 1);
    assert_eq!(count(&conn, "effects"), 3);
}

#[test]
fn a_quarantine_is_stored_only_outside_a_transaction_and_once_per_payload() {
    let (_dir, mut conn) = db();
    claim_alone(&mut conn, "d-1", BODY);
    let digest = PayloadDigest::of(CHANGED.as_bytes());
    let tx = conn.transaction().unwrap();
    assert_eq!(
        claim(&tx, &identity("d-1"), &digest, t0()).unwrap(),
        Decision::Quarantined
    );
    let inside = quarantine(&tx, &identity("d-1"), &digest, CHANGED.as_bytes(), t0());
    assert!(
        matches!(inside, Err(Error::InsideTransaction)),
        "{inside:?}"
    );
    tx.rollback().unwrap(); // the business transaction that is never made
    for newly in [true, false] {
        let stored = quarantine(&conn, &identity("d-1"), &digest, CHANGED.as_bytes(), t0());
        assert_eq!(stored.unwrap(), newly);
    }
    let payload: Vec<u8> = conn
        .query_row("SELECT payload FROM receiver_quarantine", [], |r| r.get(0))
        .unwrap();
    assert_eq!(payload, CHANGED.as_bytes());
    assert_eq!(count(&conn, "receiver_claims"), 1);
}

#[test]
fn processing_commits_the_change_with_the_claim_and_a_redelivery_changes_nothing() {
    let (_dir, mut conn) = db();
    let delivery = delivery(BODY, Some("d-1"));
    assert!(matches!(
        apply(&mut conn, &delivery),
        Outcome::Processed(())
    ));
    let again = process(&mut conn, &delivery, |_| -> Result<(), ()> {
        panic!("a duplicate must not run the change")
    });
    assert!(matches!(again, Outcome::Duplicate), "{again:?}");
    assert_eq!(count(&conn, "effects"), 1);
    assert_eq!(count(&conn, "receiver_claims"), 1);
    assert!(conn.is_autocommit(), "no transaction is left open");
}

#[test]
fn a_changed_payload_is_quarantined_durably_and_never_applied() {
    let (_dir, mut conn) = db();
    assert!(matches!(
        apply(&mut conn, &delivery(BODY, Some("d-1"))),
        Outcome::Processed(())
    ));
    let changed = delivery(CHANGED, Some("d-1"));
    for _ in 0..2 {
        let outcome = process(&mut conn, &changed, |_| -> Result<(), ()> {
            panic!("a quarantined payload must not be applied")
        });
        assert!(matches!(outcome, Outcome::Quarantined), "{outcome:?}");
    }
    let (digest, payload): (String, Vec<u8>) = conn
        .query_row("SELECT digest, payload FROM receiver_quarantine", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(digest, changed.digest().hex());
    assert_eq!(payload, CHANGED.as_bytes());
    assert_eq!(count(&conn, "receiver_quarantine"), 1);
    assert_eq!(count(&conn, &format!("effects WHERE body = '{BODY}'")), 1);
    assert_eq!(count(&conn, "effects"), 1);
}

#[test]
fn a_failing_change_rolls_back_its_claim_so_the_redelivery_processes_it() {
    let (_dir, mut conn) = db();
    let delivery = delivery(BODY, Some("d-1"));
    let failed = process(&mut conn, &delivery, |c| {
        effect(c, &delivery).unwrap();
        Err::<(), _>("the ledger is closed")
    });
    assert!(matches!(failed, Outcome::Failed("the ledger is closed")));
    assert_eq!(count(&conn, "effects"), 0);
    assert_eq!(count(&conn, "receiver_claims"), 0);
    assert!(matches!(
        apply(&mut conn, &delivery),
        Outcome::Processed(())
    ));
    assert!(matches!(apply(&mut conn, &delivery), Outcome::Duplicate));
    assert_eq!(count(&conn, "effects"), 1);
    assert_eq!(count(&conn, "receiver_claims"), 1);
}

#[test]
fn a_delivery_without_an_event_id_is_processed_every_time() {
    let (_dir, mut conn) = db();
    let delivery = delivery(BODY, None);
    for _ in 0..3 {
        assert!(matches!(
            apply(&mut conn, &delivery),
            Outcome::Processed(())
        ));
    }
    assert_eq!(count(&conn, "effects"), 3);
    assert_eq!(count(&conn, "receiver_claims"), 0);
}

#[test]
fn a_connection_already_inside_a_transaction_is_refused_and_nothing_is_written() {
    let (_dir, mut conn) = db();
    conn.execute_batch("BEGIN").unwrap();
    let outcome = apply(&mut conn, &delivery(BODY, Some("d-1")));
    assert!(
        matches!(outcome, Outcome::StoreFailed(Error::Sqlite(_))),
        "{outcome:?}"
    );
    conn.execute_batch("ROLLBACK").unwrap();
    assert_eq!(count(&conn, "receiver_claims") + count(&conn, "effects"), 0);
}

#[test]
fn fifty_concurrent_deliveries_on_their_own_connections_apply_the_change_once() {
    let (dir, conn) = db();
    let barrier = Arc::new(Barrier::new(50));
    let delivery = delivery(BODY, Some("d-1"));
    let threads: Vec<_> = (0..50)
        .map(|_| {
            let (barrier, delivery, mut conn) = (barrier.clone(), delivery.clone(), open(&dir));
            std::thread::spawn(move || {
                barrier.wait();
                apply(&mut conn, &delivery)
            })
        })
        .collect();
    let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(processed_and_duplicates(&outcomes), (1, 49), "{outcomes:?}");
    assert_eq!(count(&conn, "effects"), 1);
    assert_eq!(count(&conn, "receiver_claims"), 1);
}

/// `process_shared`, on one connection behind a mutex.
#[cfg(feature = "axum")]
mod shared {
    use std::sync::Mutex;

    use vow_receiver::sqlite::process_shared;

    use super::*;

    #[tokio::test]
    async fn a_change_that_panics_is_rolled_back_and_the_connection_stays_usable() {
        let (_dir, conn) = db();
        let db = Arc::new(Mutex::new(conn));
        let delivery = delivery(BODY, Some("d-1"));
        let shared = (db.clone(), delivery.clone());
        let panicked = tokio::spawn(async move {
            process_shared(&shared.0, shared.1.clone(), move |c| -> Result<(), ()> {
                effect(c, &shared.1).unwrap();
                panic!("the change panicked after its write")
            })
            .await
        })
        .await
        .unwrap_err();
        assert!(panicked.is_panic());
        {
            let conn = db.lock().unwrap();
            assert_eq!(count(&conn, "effects") + count(&conn, "receiver_claims"), 0);
        }
        let again = delivery.clone();
        let outcome = process_shared(&db, delivery, move |c| effect(c, &again)).await;
        assert!(matches!(outcome, Outcome::Processed(())), "{outcome:?}");
        assert_eq!(count(&db.lock().unwrap(), "effects"), 1);
    }
}
