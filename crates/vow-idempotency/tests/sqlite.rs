//! The record store on SQLite, against a database file: each test asserts the stored rows, not
//! only what the functions return.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use rusqlite::{Connection, TransactionBehavior};
use tempfile::TempDir;
use vow_idempotency::sqlite::{self, begin, complete, fence, purge, release};
use vow_idempotency::{Begun, Error, LeaseToken, Scope};

/// A connection to `dir`'s database in WAL mode, with the schema and a business table.
fn open(dir: &TempDir) -> Connection {
    let conn = Connection::open(dir.path().join("vow.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.execute_batch(sqlite::SCHEMA).unwrap();
    conn.execute_batch("CREATE TABLE IF NOT EXISTS messages (id TEXT NOT NULL)")
        .unwrap();
    conn
}

fn db() -> (TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(&dir);
    (dir, conn)
}

fn start(conn: &Connection, scope: &Scope, body: &str, now: DateTime<Utc>) -> Begun {
    let (fp, canonical) = request(body);
    begin(conn, scope, &fp, &canonical, now, &settings()).unwrap()
}

fn owner(conn: &Connection, scope: &Scope, now: DateTime<Utc>) -> LeaseToken {
    match start(conn, scope, BODY, now) {
        Begun::Owner(token) | Begun::TakenOver(token) => token,
        other => panic!("expected to run the operation, got {other:?}"),
    }
}

/// The host's write: one message row and the completion, committed together or not at all.
fn host_write(
    conn: &mut Connection,
    scope: &Scope,
    token: &LeaseToken,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    fence(&tx, scope, token)?;
    tx.execute("INSERT INTO messages (id) VALUES ('msg_1')", [])?;
    complete(&tx, scope, token, &response(), now, &settings())?;
    tx.commit()?;
    Ok(())
}

fn count(conn: &Connection, table_and_where: &str) -> i64 {
    conn.query_row(
        &format!("SELECT count(*) FROM {table_and_where}"),
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// The state and token of the one row.
fn stored(conn: &Connection) -> (String, String) {
    conn.query_row(
        "SELECT state, lease_token FROM idempotency_records",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap()
}

#[test]
fn the_first_request_owns_the_key_and_a_repeat_waits_for_its_lease() {
    let (_dir, conn) = db();
    let token = owner(&conn, &alice(), t(0));
    assert_eq!(stored(&conn), ("in_progress".into(), token.0.clone()));
    assert_eq!(
        start(&conn, &alice(), BODY, t(10)),
        Begun::InProgress {
            retry_after_secs: 20
        }
    );
    assert_eq!(count(&conn, "idempotency_records"), 1);
    assert_eq!(stored(&conn).1, token.0, "a waiter never changes the row");
}

#[test]
fn a_completed_request_replays_exactly_and_a_different_body_is_reused() {
    let (_dir, mut conn) = db();
    let token = owner(&conn, &alice(), t(0));
    host_write(&mut conn, &alice(), &token, t(1)).unwrap();
    assert_eq!(
        start(&conn, &alice(), BODY, t(2)),
        Begun::Replay {
            response: response(),
            expires_at: t(1 + EXPIRES)
        }
    );
    assert_eq!(
        start(&conn, &alice(), OTHER, t(3)),
        Begun::Reused {
            differences: vec!["/payload/amount".into(), "/x".into()]
        }
    );
    assert_eq!(count(&conn, "messages"), 1);
    assert_eq!(
        count(&conn, "idempotency_records WHERE state = 'completed'"),
        1
    );
}

#[test]
fn another_principal_or_application_with_the_same_key_is_independent() {
    let (_dir, conn) = db();
    let scopes = [
        alice(),
        scope("tok_bob", Some("app_1"), "order-1"),
        scope("tok_alice", Some("app_2"), "order-1"),
        scope("tok_alice", None, "order-1"),
    ];
    let tokens: Vec<_> = scopes.iter().map(|s| owner(&conn, s, t(0))).collect();
    assert_eq!(count(&conn, "idempotency_records"), 4);
    assert_eq!(
        count(&conn, "idempotency_records WHERE application = ''"),
        1
    );
    assert_eq!(tokens.iter().collect::<HashSet<_>>().len(), 4);
}

#[test]
fn an_expired_lease_is_taken_over_and_the_stale_owner_is_fenced_and_rolled_back() {
    let (_dir, mut conn) = db();
    let stale = owner(&conn, &alice(), t(0));
    let taker = match start(&conn, &alice(), BODY, t(30)) {
        Begun::TakenOver(token) => token,
        other => panic!("expected a takeover, got {other:?}"),
    };
    assert_ne!(stale, taker);
    assert_eq!(stored(&conn), ("in_progress".into(), taker.0.clone()));

    // The stale owner's transaction: fenced before its write, and also at completion.
    let err = host_write(&mut conn, &alice(), &stale, t(31)).unwrap_err();
    assert!(err.is_fenced(), "{err:?}");
    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO messages (id) VALUES ('stale')", [])
        .unwrap();
    let err = complete(&tx, &alice(), &stale, &response(), t(31), &settings()).unwrap_err();
    assert!(err.is_fenced());
    drop(tx); // the host rolls back on Fenced
    assert_eq!(count(&conn, "messages"), 0);
    assert_eq!(stored(&conn), ("in_progress".into(), taker.0.clone()));
    assert!(!release(&conn, &alice(), &stale).unwrap());

    host_write(&mut conn, &alice(), &taker, t(32)).unwrap();
    assert_eq!(count(&conn, "messages"), 1);
    assert_eq!(stored(&conn).0, "completed");
}

#[test]
fn a_released_key_runs_again() {
    let (_dir, conn) = db();
    let token = owner(&conn, &alice(), t(0));
    assert!(release(&conn, &alice(), &token).unwrap());
    assert_eq!(count(&conn, "idempotency_records"), 0);
    let again = owner(&conn, &alice(), t(1));
    assert_ne!(again, token);
}

#[test]
fn past_its_ttl_a_record_becomes_a_tombstone_that_never_runs_again_until_it_ends() {
    let (_dir, mut conn) = db();
    let token = owner(&conn, &alice(), t(0));
    host_write(&mut conn, &alice(), &token, t(0)).unwrap();
    let expired = Begun::Expired {
        resource: Some("msg_1".into()),
    };
    // Expired even before the cleaner has run.
    assert_eq!(start(&conn, &alice(), BODY, t(EXPIRES)), expired);

    assert_eq!(purge(&conn, t(EXPIRES - 1), 100).unwrap(), 0);
    assert_eq!(purge(&conn, t(EXPIRES), 100).unwrap(), 1);
    let kept: Kept = conn
        .query_row(KEPT, [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap();
    assert_eq!(kept, tombstone());
    for (body, at) in [(BODY, EXPIRES + 1), (OTHER, TOMBSTONE_ENDS - 1)] {
        assert_eq!(start(&conn, &alice(), body, t(at)), expired);
    }
    assert_eq!(count(&conn, "idempotency_records"), 1);

    assert_eq!(purge(&conn, t(TOMBSTONE_ENDS), 100).unwrap(), 1);
    assert_eq!(count(&conn, "idempotency_records"), 0);
    owner(&conn, &alice(), t(TOMBSTONE_ENDS));
}

#[test]
fn an_ended_tombstone_the_cleaner_missed_is_taken_over() {
    let (_dir, mut conn) = db();
    let token = owner(&conn, &alice(), t(0));
    host_write(&mut conn, &alice(), &token, t(0)).unwrap();
    let next = owner(&conn, &alice(), t(TOMBSTONE_ENDS));
    assert_eq!(stored(&conn), ("in_progress".into(), next.0));
    let body: Option<Vec<u8>> = conn
        .query_row("SELECT response_body FROM idempotency_records", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(body, None);
}

/// A completed record the cleaner first reaches after its tombstone ended is stripped and deleted
/// in that one pass.
#[test]
fn a_record_the_cleaner_reaches_after_its_tombstone_ended_goes_in_one_pass() {
    let (_dir, mut conn) = db();
    let token = owner(&conn, &alice(), t(0));
    host_write(&mut conn, &alice(), &token, t(0)).unwrap();
    assert_eq!(purge(&conn, t(TOMBSTONE_ENDS), 100).unwrap(), 2);
    assert_eq!(count(&conn, "idempotency_records"), 0);
}

#[test]
fn purge_works_in_batches_and_drops_abandoned_claims() {
    let (_dir, mut conn) = db();
    for i in 0..5 {
        let s = scope("tok_alice", None, &format!("k{i}"));
        let token = owner(&conn, &s, t(0));
        host_write(&mut conn, &s, &token, t(0)).unwrap();
    }
    owner(&conn, &scope("tok_alice", None, "abandoned"), t(0));
    assert_eq!(
        purge(&conn, t(EXPIRES), 2).unwrap(),
        3,
        "2 stripped, 1 deleted"
    );
    assert_eq!(
        count(&conn, "idempotency_records WHERE state = 'tombstone'"),
        2
    );
    assert_eq!(purge(&conn, t(EXPIRES), 10).unwrap(), 3);
    assert_eq!(
        count(&conn, "idempotency_records WHERE state = 'tombstone'"),
        5
    );
    assert_eq!(count(&conn, "idempotency_records"), 5);
}

/// 50 threads, each on its own connection, begin on one scope at `now`.
fn race(dir: &Arc<TempDir>, now: DateTime<Utc>) -> (Vec<LeaseToken>, usize) {
    let barrier = Arc::new(Barrier::new(50));
    let threads: Vec<_> = (0..50)
        .map(|_| {
            let (dir, barrier) = (dir.clone(), barrier.clone());
            std::thread::spawn(move || {
                let conn = open(&dir);
                barrier.wait();
                start(&conn, &alice(), BODY, now)
            })
        })
        .collect();
    tally(threads.into_iter().map(|thread| thread.join().unwrap()))
}

#[test]
fn fifty_concurrent_begins_on_one_scope_make_exactly_one_owner() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    drop(open(&dir));
    let (owners, waiting) = race(&dir, t(0));
    assert_eq!((owners.len(), waiting), (1, 49));
    let conn = open(&dir);
    assert_eq!(count(&conn, "idempotency_records"), 1);
    assert_eq!(stored(&conn), ("in_progress".into(), owners[0].0.clone()));
}

#[test]
fn fifty_concurrent_takeovers_of_an_expired_lease_make_exactly_one_owner() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let first = owner(&open(&dir), &alice(), t(0));
    let (owners, waiting) = race(&dir, t(30));
    assert_eq!((owners.len(), waiting), (1, 49));
    assert_ne!(owners[0], first);
    let conn = open(&dir);
    assert_eq!(count(&conn, "idempotency_records"), 1);
    assert_eq!(stored(&conn), ("in_progress".into(), owners[0].0.clone()));
}

/// `http::sqlite::run`, the entry point a handler calls, on a shared connection.
#[cfg(feature = "axum")]
mod run {
    use std::sync::{Arc, Mutex};

    use axum::http::StatusCode;
    use rusqlite::Connection;
    use serde_json::json;
    use vow_idempotency::http::sqlite::{run, WithConnection};
    use vow_idempotency::http::{Done, Failure, Outcome, Request};
    use vow_idempotency::http::{IDEMPOTENCY_EXPIRES, IDEMPOTENT_REPLAYED};
    use vow_idempotency::{Error, StoredResponse};

    use super::*;

    type Shared = Arc<Mutex<Connection>>;

    fn shared() -> (TempDir, Shared) {
        let (dir, conn) = db();
        (dir, Arc::new(Mutex::new(conn)))
    }

    fn request() -> Option<Request<'static>> {
        Some(Request::new(alice(), BODY.as_bytes(), t(0)))
    }

    fn rows(db: &Shared, table_and_where: &str) -> i64 {
        count(&db.lock().unwrap(), table_and_where)
    }

    fn insert(c: &Connection) -> Result<usize, Failure<rusqlite::Error>> {
        c.execute("INSERT INTO messages (id) VALUES ('msg_1')", [])
            .map_err(Failure::Retry)
    }

    fn created(c: &Connection) -> Result<Done<&'static str>, Failure<rusqlite::Error>> {
        insert(c)?;
        let response = StoredResponse::json(202, &json!({"id": "msg_1"}));
        Ok(Done {
            value: "msg_1",
            response,
        })
    }

    /// Like a writer thread that batches jobs: each job runs inside a transaction it did not
    /// open, which commits after it.
    struct InTransaction(Shared);

    impl WithConnection for InTransaction {
        async fn with_connection<T, F>(&self, job: F) -> Result<T, Error>
        where
            F: FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
            T: Send + 'static,
        {
            let conn = self.0.lock().unwrap();
            conn.execute_batch("BEGIN IMMEDIATE")?;
            let out = job(&conn);
            conn.execute_batch("COMMIT")?;
            out
        }
    }

    #[tokio::test]
    async fn a_final_refusal_rolls_back_its_writes_and_is_stored_and_replayed() {
        let (_dir, db) = shared();
        let refusal = StoredResponse::json(409, &json!({"code": "conflict"}));
        let first = run(&db, request(), move |c| {
            insert(c)?;
            Err::<Done<()>, _>(Failure::Final(refusal))
        })
        .await;
        let Outcome::Answered(first) = first else {
            panic!("{first:?}")
        };
        assert_eq!(first.status(), StatusCode::CONFLICT);
        assert!(first.headers().contains_key(IDEMPOTENCY_EXPIRES));
        assert!(!first.headers().contains_key(IDEMPOTENT_REPLAYED));
        assert_eq!(rows(&db, "messages"), 0);
        assert_eq!(
            rows(&db, "idempotency_records WHERE response_status = 409"),
            1
        );

        let again = run(&db, request(), |_| -> Result<Done<()>, Failure<()>> {
            unreachable!("a stored refusal is replayed")
        })
        .await;
        let Outcome::Answered(again) = again else {
            panic!("{again:?}")
        };
        assert_eq!(again.status(), StatusCode::CONFLICT);
        assert_eq!(again.headers()[IDEMPOTENT_REPLAYED], "true");
    }

    #[tokio::test]
    async fn inside_a_host_transaction_the_operation_runs_in_a_savepoint_of_its_own() {
        let (_dir, db) = shared();
        let host = InTransaction(Arc::clone(&db));
        let failed = run(&host, request(), |c| -> Result<Done<()>, _> {
            insert(c).unwrap();
            Err(Failure::Retry("the queue is full"))
        })
        .await;
        assert!(matches!(failed, Outcome::Failed("the queue is full")));
        assert_eq!(rows(&db, "messages"), 0, "rolled back to the savepoint");
        assert_eq!(rows(&db, "idempotency_records"), 0, "released");

        let ran = run(&host, request(), created).await;
        assert!(matches!(ran, Outcome::Ran { value: "msg_1", .. }));
        let replayed = run(&host, request(), created).await;
        assert!(matches!(replayed, Outcome::Answered(_)));
        assert_eq!(rows(&db, "messages"), 1);
        assert_eq!(
            rows(&db, "idempotency_records WHERE state = 'completed'"),
            1
        );
    }

    #[tokio::test]
    async fn an_operation_that_panics_fails_closed_and_the_connection_recovers() {
        let (_dir, db) = shared();
        let crashed = run(&db, request(), |c| -> Result<Done<()>, Failure<()>> {
            insert(c).unwrap();
            panic!("the operation crashed mid-transaction");
        })
        .await;
        let Outcome::StoreFailed { error, response } = crashed else {
            panic!("{crashed:?}")
        };
        assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(rows(&db, "messages"), 0, "its transaction rolled back");
        assert_eq!(rows(&db, "idempotency_records"), 0, "released");

        let ran = run(&db, request(), created).await;
        assert!(matches!(ran, Outcome::Ran { .. }), "{ran:?}");
        assert_eq!(rows(&db, "messages"), 1);
    }
}
