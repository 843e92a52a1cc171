//! The record store on PostgreSQL, each test in a fresh schema `vow_test_<random>` of the server
//! named by `VOW_TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`; CI
//! drops `vow_test_%` schemas). The tests fail, never skip, when the server cannot be reached.
//! Each asserts the stored rows, not only what the functions return.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use common::*;
use sqlx::postgres::PgArguments;
use sqlx::Arguments;
use sqlx::{PgConnection, PgPool};
use tokio::sync::Barrier;
use vow_idempotency::postgres::{self, begin, complete, fence, purge, release, Claim};
use vow_idempotency::{Begun, Error, LeaseToken, Recorded, Scope};

/// A pool on a new schema holding the records table and a business table.
async fn db(size: u32) -> PgPool {
    let pool = vow_pg_testing::pool(size).await;
    sqlx::raw_sql(postgres::SCHEMA)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("CREATE TABLE messages (id text NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool
}

async fn start(pool: &PgPool, scope: &Scope, body: &str, now: DateTime<Utc>) -> Begun {
    let (fp, canonical) = request(body);
    let mut conn = pool.acquire().await.unwrap();
    begin(&mut conn, scope, &fp, &canonical, now, &settings())
        .await
        .unwrap()
}

async fn owner(pool: &PgPool, scope: &Scope, now: DateTime<Utc>) -> LeaseToken {
    match start(pool, scope, BODY, now).await {
        Begun::Owner(token) | Begun::TakenOver(token) => token,
        other => panic!("expected to run the operation, got {other:?}"),
    }
}

async fn insert_message(conn: &mut PgConnection, id: &str) {
    sqlx::query("INSERT INTO messages (id) VALUES ($1)")
        .bind(id)
        .execute(conn)
        .await
        .unwrap();
}

/// The host's write: one message row and the completion, committed together or not at all.
async fn host_write(
    pool: &PgPool,
    scope: &Scope,
    token: &LeaseToken,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    let mut tx = pool.begin().await?;
    fence(&mut tx, scope, token).await?;
    insert_message(&mut tx, "msg_1").await;
    complete(&mut tx, scope, token, &response(), now, &settings()).await?;
    tx.commit().await?;
    Ok(())
}

/// A host write that knows its response before it writes, as vow's message create does: it
/// claims the key with the response, then writes only if it may. The claim is a statement of
/// its own (`claim_completed`), or, `folded`, a CTE of the host's first statement
/// (`Claim::CTE`, here with a read of the host's own; `resolve_taken` when it claimed nothing).
/// What the claim did.
async fn prerendered_write(
    pool: &PgPool,
    scope: &Scope,
    id: &str,
    now: DateTime<Utc>,
    folded: bool,
) -> Recorded {
    let (fp, canonical) = request(BODY);
    let token = LeaseToken(format!("token-{id}"));
    let (settings, response) = (settings(), response());
    let claim = Claim {
        scope,
        fingerprint: &fp,
        canonical_body: &canonical,
        token: &token,
        now,
        settings: &settings,
        response: Some(&response),
    };
    let mut tx = pool.begin().await.unwrap();
    let recorded = if folded {
        let sql = format!(
            "WITH {} SELECT (SELECT count(*) FROM claim), (SELECT count(*) FROM messages \
             WHERE id = ${})",
            Claim::CTE,
            Claim::PARAMS + 1
        );
        let mut args = PgArguments::default();
        claim.add_to(&mut args).unwrap();
        args.add(id).unwrap();
        let (claimed, before): (i64, i64) = sqlx::query_as_with(&sql, args)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        assert_eq!(before, 0, "the host's own read ran in the same statement");
        match claimed {
            1 => Recorded::Fresh,
            _ => postgres::resolve_taken(&mut tx, &claim).await.unwrap(),
        }
    } else {
        postgres::claim_completed(&mut tx, &claim).await.unwrap()
    };
    if matches!(recorded, Recorded::Fresh | Recorded::TookOver) {
        insert_message(&mut tx, id).await;
        tx.commit().await.unwrap();
    }
    recorded
}

#[tokio::test]
async fn a_claim_with_its_response_writes_once_and_replays() {
    claims_with_the_response(false).await;
}

#[tokio::test]
async fn a_claim_folded_into_the_hosts_first_statement_writes_once_and_replays() {
    claims_with_the_response(true).await;
}

async fn claims_with_the_response(folded: bool) {
    let pool = db(2).await;
    assert_eq!(
        prerendered_write(&pool, &alice(), "msg_1", t(0), folded).await,
        Recorded::Fresh
    );
    assert_eq!(
        start(&pool, &alice(), BODY, t(1)).await,
        Begun::Replay {
            response: response(),
            expires_at: t(EXPIRES)
        }
    );
    assert_eq!(
        prerendered_write(&pool, &alice(), "msg_2", t(2), folded).await,
        Recorded::Held,
        "a completed key is held: the host wrote nothing"
    );
    assert_eq!(count(&pool, "messages").await, 1);
    assert_eq!(count(&pool, "messages WHERE id = 'msg_1'").await, 1);

    // An abandoned claim (its lease ran out, nothing committed) is taken over, once.
    let bob = scope("bob", Some("app_1"), "k");
    owner(&pool, &bob, t(0)).await;
    assert_eq!(
        prerendered_write(&pool, &bob, "msg_3", t(60), folded).await,
        Recorded::TookOver
    );
    assert_eq!(
        start(&pool, &bob, BODY, t(61)).await,
        Begun::Replay {
            response: response(),
            expires_at: t(60 + EXPIRES)
        },
        "the takeover stored the claim's response"
    );
    assert_eq!(count(&pool, "messages").await, 2);
    assert_eq!(
        count(
            &pool,
            "idempotency_records WHERE state = 'completed' AND response_status = 202"
        )
        .await,
        2
    );
}

/// A claim made in a transaction that has not ended holds its scope (the scope lock): another
/// transaction's claim and [`begin`] see the scope in flight at once instead of waiting for the
/// uncommitted row; once the first commits, `begin` replays its response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_in_an_open_transaction_is_in_flight_for_others_who_do_not_wait() {
    let hang = std::time::Duration::from_secs(20);
    let pool = db(4).await;
    let (fp, canonical) = request(BODY);
    let (settings, response) = (settings(), response());
    let (scope, token, other_token) = (alice(), LeaseToken("t-1".into()), LeaseToken("t-2".into()));
    let claim = Claim {
        scope: &scope,
        fingerprint: &fp,
        canonical_body: &canonical,
        token: &token,
        now: t(0),
        settings: &settings,
        response: Some(&response),
    };
    let mut first = pool.begin().await.unwrap();
    let recorded = postgres::claim_completed(&mut first, &claim).await.unwrap();
    assert_eq!(recorded, Recorded::Fresh);

    let other = Claim {
        token: &other_token,
        now: t(1),
        ..claim
    };
    let mut second = pool.begin().await.unwrap();
    let held = tokio::time::timeout(hang, postgres::claim_completed(&mut second, &other))
        .await
        .expect("a second claim does not wait for the first transaction")
        .unwrap();
    assert_eq!(held, Recorded::Held);
    drop(second);
    let begun = tokio::time::timeout(hang, start(&pool, &scope, BODY, t(1)))
        .await
        .expect("begin does not wait for the first transaction");
    assert_eq!(
        begun,
        Begun::InProgress {
            retry_after_secs: 1
        }
    );
    let reused = tokio::time::timeout(hang, start(&pool, &scope, OTHER, t(1)))
        .await
        .expect("begin does not wait for the first transaction");
    assert_eq!(
        reused,
        Begun::InProgress {
            retry_after_secs: 1
        },
        "nothing committed to compare"
    );

    first.commit().await.unwrap();
    assert_eq!(
        start(&pool, &scope, BODY, t(2)).await,
        Begun::Replay {
            response: response.clone(),
            expires_at: t(EXPIRES)
        }
    );
    assert_eq!(count(&pool, "idempotency_records").await, 1);
}

/// One request's claims, as a host batching several requests makes them: each at `t(0)`, with
/// the default settings and the response rendered before the write.
struct Claims {
    fp: vow_idempotency::Fingerprint,
    canonical: String,
    settings: vow_idempotency::Settings,
    response: vow_idempotency::StoredResponse,
}

impl Claims {
    fn new() -> Self {
        let (fp, canonical) = request(BODY);
        Self {
            fp,
            canonical,
            settings: settings(),
            response: response(),
        }
    }

    fn claim<'a>(&'a self, scope: &'a Scope, token: &'a LeaseToken) -> Claim<'a> {
        Claim {
            scope,
            fingerprint: &self.fp,
            canonical_body: &self.canonical,
            token,
            now: t(0),
            settings: &self.settings,
            response: Some(&self.response),
        }
    }
}

/// Tokens `batch-0`, `batch-1`, … for `n` claims.
fn batch_tokens(n: usize) -> Vec<LeaseToken> {
    (0..n).map(|i| LeaseToken(format!("batch-{i}"))).collect()
}

/// Many claims in one statement, as a host that batches several requests' writes makes them:
/// a free scope is claimed (once, when two claims in the batch name it), a scope with a record
/// or held by another open transaction is not, and no claim waits. A claim whose write did not
/// happen is deleted before the commit (`unclaim`), and its scope is free again afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_claims_in_one_statement_claim_each_free_scope_once() {
    let hang = std::time::Duration::from_secs(20);
    let pool = db(4).await;
    let batch = Claims::new();
    let (alice, carol, dave, erin, frank) = (
        alice(),
        scope("carol", Some("app_1"), "k"),
        scope("dave", Some("app_1"), "k"),
        scope("erin", Some("app_1"), "k"),
        scope("frank", None, "k"),
    );
    let tokens = batch_tokens(6);
    let claim = |scope, token| batch.claim(scope, token);
    // dave has a completed record; erin is claimed in a transaction still open.
    assert_eq!(
        prerendered_write(&pool, &dave, "msg_dave", t(0), false).await,
        Recorded::Fresh
    );
    let erin_token = LeaseToken("erin-open".into());
    let mut open = pool.begin().await.unwrap();
    let held_open = postgres::claim_completed(&mut open, &claim(&erin, &erin_token)).await;
    assert_eq!(held_open.unwrap(), Recorded::Fresh);

    let claims = [
        claim(&alice, &tokens[0]),
        claim(&carol, &tokens[1]),
        claim(&alice, &tokens[2]),
        claim(&dave, &tokens[3]),
        claim(&erin, &tokens[4]),
        claim(&frank, &tokens[5]),
    ];
    let mut tx = pool.begin().await.unwrap();
    let claimed = tokio::time::timeout(hang, postgres::claim_many(&mut tx, &claims))
        .await
        .expect("no claim waits for another transaction")
        .unwrap();
    assert_eq!(claimed, [true, true, false, false, false, true]);
    // carol's write did not happen: her claim goes, the others commit.
    let gone = postgres::unclaim(&mut tx, &claims[1..2]).await.unwrap();
    assert_eq!(gone, 1);
    tx.commit().await.unwrap();
    open.rollback().await.unwrap();

    let kept: Vec<(String, String, i32)> = sqlx::query_as(
        "SELECT principal, lease_token, response_status FROM idempotency_records \
         WHERE state = 'completed' ORDER BY principal",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let kept: Vec<(&str, &str, i32)> = kept
        .iter()
        .map(|(p, t, s)| (p.as_str(), t.as_str(), *s))
        .collect();
    assert_eq!(
        kept,
        [
            ("dave", "token-msg_dave", 202),
            ("frank", "batch-5", 202),
            ("tok_alice", "batch-0", 202)
        ]
    );
    assert_eq!(
        start(&pool, &alice, BODY, t(1)).await,
        Begun::Replay {
            response: batch.response.clone(),
            expires_at: t(EXPIRES)
        }
    );
    assert!(matches!(
        start(&pool, &carol, BODY, t(1)).await,
        Begun::Owner(_)
    ));
}

/// Many claims folded into a host's one statement outside any transaction
/// (`Claim::MANY_CTE`): the host writes the requests whose scopes were claimed, and their
/// records commit with those writes; a host statement that fails leaves no claim behind.
#[tokio::test]
async fn many_claims_folded_into_the_hosts_one_statement_commit_with_its_writes() {
    let pool = db(2).await;
    let batch = Claims::new();
    let (alice, carol, dave) = (
        alice(),
        scope("carol", Some("app_1"), "k"),
        scope("dave", Some("app_1"), "k"),
    );
    let tokens = batch_tokens(4);
    let claim = |scope, token| batch.claim(scope, token);
    assert_eq!(
        prerendered_write(&pool, &dave, "msg_dave", t(0), false).await,
        Recorded::Fresh
    );
    // The host writes a message per request whose scope it claimed.
    let sql = format!(
        "WITH {}, w AS (INSERT INTO messages (id) SELECT m.id FROM UNNEST(${}::text[], \
         ${}::text[]) AS m (id, token) WHERE m.token IN (SELECT lease_token FROM claim) \
         RETURNING id) SELECT id FROM w ORDER BY id",
        Claim::MANY_CTE,
        Claim::PARAMS + 1,
        Claim::PARAMS + 2
    );
    let host_args = |claims: &[Claim<'_>], ids: &[Option<&str>]| {
        let mut args = PgArguments::default();
        Claim::add_many_to(claims, &mut args).unwrap();
        args.add(ids.to_vec()).unwrap();
        let tokens: Vec<&str> = claims.iter().map(|c| c.token.0.as_str()).collect();
        args.add(tokens).unwrap();
        args
    };
    let host = |claims: &[Claim<'_>], ids: &[Option<&str>]| {
        sqlx::query_scalar_with::<_, String, _>(&sql, host_args(claims, ids)).fetch_all(&pool)
    };

    // alice twice (claimed once) and dave (who has a record): only alice's first is written.
    let claims = [
        claim(&alice, &tokens[0]),
        claim(&alice, &tokens[1]),
        claim(&dave, &tokens[2]),
    ];
    let ids = [Some("msg_a0"), Some("msg_a1"), Some("msg_d")];
    let written = host(&claims, &ids).await.unwrap();
    assert_eq!(written, ["msg_a0"]);
    // carol's write fails (her message has no id): her claim goes with it. She asks again on
    // the same connection: PostgreSQL sends the error before it has released the failed
    // statement's locks, so another connection could still find her scope in flight for a
    // moment (and be answered "in progress", as a client retrying at once would be).
    let mut conn = pool.acquire().await.unwrap();
    let carols = host_args(&[claim(&carol, &tokens[3])], &[None]);
    let failed = sqlx::query_scalar_with::<_, String, _>(&sql, carols)
        .fetch_all(&mut *conn)
        .await;
    assert!(failed.is_err(), "{failed:?}");

    let kept: Vec<(String, String)> =
        sqlx::query_as("SELECT principal, lease_token FROM idempotency_records ORDER BY principal")
            .fetch_all(&pool)
            .await
            .unwrap();
    let kept: Vec<(&str, &str)> = kept.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    assert_eq!(kept, [("dave", "token-msg_dave"), ("tok_alice", "batch-0")]);
    let (fp, canonical) = request(BODY);
    let again = begin(&mut conn, &carol, &fp, &canonical, t(1), &settings()).await;
    assert!(matches!(again.unwrap(), Begun::Owner(_)));
}

async fn count(pool: &PgPool, table_and_where: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table_and_where}"))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The state and token of the one row.
async fn stored(pool: &PgPool) -> (String, String) {
    sqlx::query_as("SELECT state, lease_token FROM idempotency_records")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_first_request_owns_the_key_and_a_repeat_waits_for_its_lease() {
    let pool = db(2).await;
    let token = owner(&pool, &alice(), t(0)).await;
    assert_eq!(stored(&pool).await, ("in_progress".into(), token.0.clone()));
    assert_eq!(
        start(&pool, &alice(), BODY, t(10)).await,
        Begun::InProgress {
            retry_after_secs: 20
        }
    );
    assert_eq!(count(&pool, "idempotency_records").await, 1);
    assert_eq!(
        stored(&pool).await.1,
        token.0,
        "a waiter never changes the row"
    );
}

#[tokio::test]
async fn a_completed_request_replays_exactly_and_a_different_body_is_reused() {
    let pool = db(2).await;
    let token = owner(&pool, &alice(), t(0)).await;
    host_write(&pool, &alice(), &token, t(1)).await.unwrap();
    assert_eq!(
        start(&pool, &alice(), BODY, t(2)).await,
        Begun::Replay {
            response: response(),
            expires_at: t(1 + EXPIRES)
        }
    );
    assert_eq!(
        start(&pool, &alice(), OTHER, t(3)).await,
        Begun::Reused {
            differences: vec!["/payload/amount".into(), "/x".into()]
        }
    );
    assert_eq!(count(&pool, "messages").await, 1);
    assert_eq!(
        count(&pool, "idempotency_records WHERE state = 'completed'").await,
        1
    );
}

#[tokio::test]
async fn another_principal_or_application_with_the_same_key_is_independent() {
    let pool = db(2).await;
    let scopes = [
        alice(),
        scope("tok_bob", Some("app_1"), "order-1"),
        scope("tok_alice", Some("app_2"), "order-1"),
        scope("tok_alice", None, "order-1"),
    ];
    let mut tokens = HashSet::new();
    for s in &scopes {
        tokens.insert(owner(&pool, s, t(0)).await);
    }
    assert_eq!(tokens.len(), 4);
    assert_eq!(count(&pool, "idempotency_records").await, 4);
    assert_eq!(
        count(&pool, "idempotency_records WHERE application = ''").await,
        1
    );
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_and_the_stale_owner_is_fenced_and_rolled_back() {
    let pool = db(2).await;
    let stale = owner(&pool, &alice(), t(0)).await;
    let taker = match start(&pool, &alice(), BODY, t(30)).await {
        Begun::TakenOver(token) => token,
        other => panic!("expected a takeover, got {other:?}"),
    };
    assert_ne!(stale, taker);
    assert_eq!(stored(&pool).await, ("in_progress".into(), taker.0.clone()));

    // The stale owner's transaction: fenced before its write, and also at completion.
    let err = host_write(&pool, &alice(), &stale, t(31))
        .await
        .unwrap_err();
    assert!(err.is_fenced(), "{err:?}");
    let mut tx = pool.begin().await.unwrap();
    insert_message(&mut tx, "stale").await;
    let err = complete(&mut tx, &alice(), &stale, &response(), t(31), &settings())
        .await
        .unwrap_err();
    assert!(err.is_fenced());
    tx.rollback().await.unwrap(); // the host rolls back on Fenced
    assert_eq!(count(&pool, "messages").await, 0);
    assert_eq!(stored(&pool).await, ("in_progress".into(), taker.0.clone()));
    let mut conn = pool.acquire().await.unwrap();
    assert!(!release(&mut conn, &alice(), &stale).await.unwrap());
    drop(conn);

    host_write(&pool, &alice(), &taker, t(32)).await.unwrap();
    assert_eq!(count(&pool, "messages").await, 1);
    assert_eq!(stored(&pool).await.0, "completed");
}

#[tokio::test]
async fn a_released_key_runs_again() {
    let pool = db(2).await;
    let token = owner(&pool, &alice(), t(0)).await;
    let mut conn = pool.acquire().await.unwrap();
    assert!(release(&mut conn, &alice(), &token).await.unwrap());
    drop(conn);
    assert_eq!(count(&pool, "idempotency_records").await, 0);
    assert_ne!(owner(&pool, &alice(), t(1)).await, token);
}

#[tokio::test]
async fn past_its_ttl_a_record_becomes_a_tombstone_that_never_runs_again_until_it_ends() {
    let pool = db(2).await;
    let token = owner(&pool, &alice(), t(0)).await;
    host_write(&pool, &alice(), &token, t(0)).await.unwrap();
    let expired = Begun::Expired {
        resource: Some("msg_1".into()),
    };
    // Expired even before the cleaner has run.
    assert_eq!(start(&pool, &alice(), BODY, t(EXPIRES)).await, expired);

    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(purge(&mut conn, t(EXPIRES - 1), 100).await.unwrap(), 0);
    assert_eq!(purge(&mut conn, t(EXPIRES), 100).await.unwrap(), 1);
    let kept: Kept = sqlx::query_as(KEPT).fetch_one(&mut *conn).await.unwrap();
    assert_eq!(kept, tombstone());
    for (body, at) in [(BODY, EXPIRES + 1), (OTHER, TOMBSTONE_ENDS - 1)] {
        assert_eq!(start(&pool, &alice(), body, t(at)).await, expired);
    }
    assert_eq!(count(&pool, "idempotency_records").await, 1);

    assert_eq!(purge(&mut conn, t(TOMBSTONE_ENDS), 100).await.unwrap(), 1);
    assert_eq!(count(&pool, "idempotency_records").await, 0);
    owner(&pool, &alice(), t(TOMBSTONE_ENDS)).await;
}

/// A completed record the cleaner first reaches after its tombstone ended is stripped and deleted
/// in that one pass (the delete reads tombstones only, after the strip made this one).
#[tokio::test]
async fn a_record_the_cleaner_reaches_after_its_tombstone_ended_goes_in_one_pass() {
    let pool = db(2).await;
    let token = owner(&pool, &alice(), t(0)).await;
    host_write(&pool, &alice(), &token, t(0)).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(purge(&mut conn, t(TOMBSTONE_ENDS), 100).await.unwrap(), 2);
    assert_eq!(count(&pool, "idempotency_records").await, 0);
}

#[tokio::test]
async fn purge_works_in_batches_and_drops_abandoned_claims() {
    let pool = db(2).await;
    for i in 0..5 {
        let s = scope("tok_alice", None, &format!("k{i}"));
        let token = owner(&pool, &s, t(0)).await;
        host_write(&pool, &s, &token, t(0)).await.unwrap();
    }
    owner(&pool, &scope("tok_alice", None, "abandoned"), t(0)).await;
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(purge(&mut conn, t(EXPIRES), 2).await.unwrap(), 3);
    assert_eq!(
        count(&pool, "idempotency_records WHERE state = 'tombstone'").await,
        2
    );
    assert_eq!(purge(&mut conn, t(EXPIRES), 10).await.unwrap(), 3);
    assert_eq!(
        count(&pool, "idempotency_records WHERE state = 'tombstone'").await,
        5
    );
    assert_eq!(count(&pool, "idempotency_records").await, 5);
}

#[tokio::test]
async fn an_ended_tombstone_the_cleaner_missed_is_taken_over() {
    let pool = db(2).await;
    let token = owner(&pool, &alice(), t(0)).await;
    host_write(&pool, &alice(), &token, t(0)).await.unwrap();
    let next = owner(&pool, &alice(), t(TOMBSTONE_ENDS)).await;
    assert_eq!(stored(&pool).await, ("in_progress".into(), next.0));
    let body: Option<Vec<u8>> = sqlx::query_scalar("SELECT response_body FROM idempotency_records")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(body, None);
}

/// 50 tasks begin on one scope at `now`, through a pool.
async fn race(pool: &PgPool, now: DateTime<Utc>) -> (Vec<LeaseToken>, usize) {
    let barrier = Arc::new(Barrier::new(50));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (pool, barrier) = (pool.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                start(&pool, &alice(), BODY, now).await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    tally(outcomes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_begins_on_one_scope_make_exactly_one_owner() {
    let pool = db(20).await;
    let (owners, waiting) = race(&pool, t(0)).await;
    assert_eq!((owners.len(), waiting), (1, 49));
    assert_eq!(count(&pool, "idempotency_records").await, 1);
    assert_eq!(
        stored(&pool).await,
        ("in_progress".into(), owners[0].0.clone())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_takeovers_of_an_expired_lease_make_exactly_one_owner() {
    let pool = db(20).await;
    let first = owner(&pool, &alice(), t(0)).await;
    let (owners, waiting) = race(&pool, t(30)).await;
    assert_eq!((owners.len(), waiting), (1, 49));
    assert_ne!(owners[0], first);
    assert_eq!(count(&pool, "idempotency_records").await, 1);
    assert_eq!(
        stored(&pool).await,
        ("in_progress".into(), owners[0].0.clone())
    );
}

/// `http::postgres::run`, the entry point a handler calls, on a pool.
#[cfg(feature = "axum")]
mod run {
    use axum::http::StatusCode;
    use serde_json::json;
    use vow_idempotency::http::postgres::run;
    use vow_idempotency::http::{Done, Failure, Outcome, Request, IDEMPOTENT_REPLAYED};
    use vow_idempotency::StoredResponse;

    use super::*;

    fn request() -> Option<Request<'static>> {
        Some(Request::new(alice(), BODY.as_bytes(), t(0)))
    }

    /// Inserts `msg_1` twice into a table where it is unique: PostgreSQL aborts the
    /// transaction, and the operation answers a final 409.
    async fn duplicate(conn: &mut PgConnection) -> Result<Done<()>, Failure<sqlx::Error>> {
        insert_message(&mut *conn, "msg_1").await;
        let taken = sqlx::query("INSERT INTO unique_ids (id) VALUES ('msg_1'), ('msg_1')")
            .execute(&mut *conn)
            .await;
        match taken {
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(Failure::Final(
                StoredResponse::json(409, &json!({"code": "taken"})),
            )),
            other => panic!("expected a unique violation, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_refusal_that_aborted_the_transaction_is_stored_and_replayed() {
        let pool = db(4).await;
        sqlx::query("CREATE TABLE unique_ids (id text PRIMARY KEY)")
            .execute(&pool)
            .await
            .unwrap();
        let first = run(&pool, request(), |c| Box::pin(duplicate(c))).await;
        let Outcome::Answered(first) = first else {
            panic!("{first:?}")
        };
        assert_eq!(first.status(), StatusCode::CONFLICT);
        assert!(!first.headers().contains_key(IDEMPOTENT_REPLAYED));
        assert_eq!(count(&pool, "messages").await, 0, "rolled back");
        assert_eq!(
            count(&pool, "idempotency_records WHERE response_status = 409").await,
            1
        );

        let again = run(&pool, request(), |c| Box::pin(duplicate(c))).await;
        let Outcome::Answered(again) = again else {
            panic!("{again:?}")
        };
        assert_eq!(again.status(), StatusCode::CONFLICT);
        assert_eq!(again.headers()[IDEMPOTENT_REPLAYED], "true");
        assert_eq!(count(&pool, "messages").await, 0, "never ran again");
    }

    #[tokio::test]
    async fn an_operation_error_rolls_back_releases_and_the_retry_runs() {
        let pool = db(4).await;
        let failed = run(&pool, request(), |c| {
            Box::pin(async move {
                insert_message(c, "msg_1").await;
                Err::<Done<()>, _>(Failure::Retry("the queue is full"))
            })
        })
        .await;
        assert!(matches!(failed, Outcome::Failed("the queue is full")));
        assert_eq!(count(&pool, "messages").await, 0);
        assert_eq!(count(&pool, "idempotency_records").await, 0);

        let ran = run(&pool, request(), |c| {
            Box::pin(async move {
                insert_message(c, "msg_1").await;
                let response = StoredResponse::json(202, &json!({"id": "msg_1"}));
                Ok::<_, Failure<()>>(Done { value: 1, response })
            })
        })
        .await;
        assert!(matches!(ran, Outcome::Ran { value: 1, .. }), "{ran:?}");
        assert_eq!(count(&pool, "messages").await, 1);
        assert_eq!(
            count(&pool, "idempotency_records WHERE state = 'completed'").await,
            1
        );
    }
}
