//! The claims on PostgreSQL (feature `postgres`), times as `timestamptz`. The host runs
//! [`SCHEMA`] in its migrations, next to its own tables.
//!
//! [`claim`] takes a `&mut PgConnection`, so it runs inside the host's `sqlx::Transaction`
//! (`&mut *tx`) with its business change. Under `READ COMMITTED` (the default) a concurrent
//! claim of the same identity waits for the first transaction: if it commits, the insert does
//! nothing and the claim is read; if it rolls back, the insert succeeds. (Under `REPEATABLE READ`
//! or `SERIALIZABLE` the waiter fails with a serialization error instead: a 503, and the provider
//! delivers again.) [`quarantine`] takes the pool, so it commits on a connection of its own,
//! whatever happens to the business transaction. [`process`] does all of it in the right order.

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{PgConnection, PgPool, Postgres, Row, Transaction};

use crate::error::{Error, Result};
use crate::event::{Decision, Delivery, Identity, PayloadDigest};
use crate::outcome::{self, Outcome};

/// The claims and the quarantine (idempotent). See the crate docs for the design.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS receiver_claims (
    source      text        NOT NULL,
    account     text        NOT NULL,
    event_id    text        NOT NULL,
    digest      text        NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (source, account, event_id)
);
CREATE TABLE IF NOT EXISTS receiver_quarantine (
    source      text        NOT NULL,
    account     text        NOT NULL,
    event_id    text        NOT NULL,
    digest      text        NOT NULL,
    payload     bytea       NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (source, account, event_id, digest)
);
";

/// A boxed, sendable future borrowing for `'c`: what the business closure returns.
pub type BoxFuture<'c, T> = Pin<Box<dyn Future<Output = T> + Send + 'c>>;

/// Claims `identity` for a payload with `digest`, inside the caller's transaction: one
/// `INSERT … ON CONFLICT DO NOTHING`; only when it inserts nothing is the claim there read, to
/// tell a [`Decision::Duplicate`] (same digest) from a [`Decision::Quarantined`] one. A
/// [`Decision::Claimed`] claim is the caller's to commit with its business change, or to roll
/// back with it.
pub async fn claim(
    conn: &mut PgConnection,
    identity: &Identity,
    digest: &PayloadDigest,
    at: DateTime<Utc>,
) -> Result<Decision> {
    const INSERT: &str = "INSERT INTO receiver_claims \
         (source, account, event_id, digest, received_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";
    const READ: &str = "SELECT digest FROM receiver_claims \
         WHERE source = $1 AND account = $2 AND event_id = $3";
    let inserted = bind(INSERT, identity)
        .bind(digest.hex())
        .bind(at)
        .execute(&mut *conn)
        .await?;
    if inserted.rows_affected() == 1 {
        return Ok(Decision::Claimed);
    }
    let stored: String = bind(READ, identity)
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)?;
    let stored = stored.parse().map_err(|_| Error::Corrupt("digest"))?;
    Ok(Decision::on_conflict(&stored, digest))
}

/// Keeps `payload` (digest `digest`) aside under `identity`, committed at once on a connection
/// of `pool` (never inside a transaction). The same payload quarantined again is stored once;
/// whether this call stored it.
pub async fn quarantine(
    pool: &PgPool,
    identity: &Identity,
    digest: &PayloadDigest,
    payload: &[u8],
    at: DateTime<Utc>,
) -> Result<bool> {
    const INSERT: &str = "INSERT INTO receiver_quarantine \
         (source, account, event_id, digest, payload, received_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING";
    let inserted = bind(INSERT, identity)
        .bind(digest.hex())
        .bind(payload)
        .bind(at)
        .execute(pool)
        .await?;
    Ok(inserted.rows_affected() == 1)
}

/// `sql` with `identity` bound as `$1`..`$3`.
fn bind<'q>(sql: &'q str, identity: &'q Identity) -> Query<'q, Postgres, PgArguments> {
    sqlx::query(sql)
        .bind(identity.source())
        .bind(identity.account())
        .bind(identity.event_id())
}

/// Processes `delivery` exactly once on `pool`: in ONE transaction, [`claim`] its identity and,
/// when claimed (or when it has no event id), run `op` — the business change, on the
/// transaction's connection, which it must not commit or roll back — and commit both. `op`
/// failing rolls back both ([`Outcome::Failed`]). A duplicate ends the transaction having
/// written nothing; a quarantine ends it, then stores the payload with [`quarantine`].
///
/// ```no_run
/// # use sqlx::PgPool;
/// # use vow_receiver::{postgres, Delivery, Outcome};
/// # async fn credit(pool: PgPool, delivery: Delivery) {
/// let outcome = postgres::process(&pool, &delivery, |conn| {
///     Box::pin(async move {
///         sqlx::query("UPDATE balances SET balance = balance + 5 WHERE account = 'a1'")
///             .execute(&mut *conn)
///             .await
///     })
/// })
/// .await;
/// assert!(matches!(outcome, Outcome::Processed(_) | Outcome::Duplicate));
/// # }
/// ```
pub async fn process<T, E, F>(pool: &PgPool, delivery: &Delivery, op: F) -> Outcome<T, E>
where
    F: for<'c> FnOnce(&'c mut PgConnection) -> BoxFuture<'c, std::result::Result<T, E>> + Send,
    T: Send,
    E: Send,
{
    run(pool, delivery, op)
        .await
        .unwrap_or_else(Outcome::StoreFailed)
}

async fn run<T, E, F>(pool: &PgPool, delivery: &Delivery, op: F) -> Result<Outcome<T, E>>
where
    F: for<'c> FnOnce(&'c mut PgConnection) -> BoxFuture<'c, std::result::Result<T, E>> + Send,
    T: Send,
    E: Send,
{
    let (digest, at) = (delivery.digest(), delivery.received_at());
    let mut tx = pool.begin().await?;
    let claimed = match delivery.identity() {
        Some(identity) => Some((identity, claim(&mut tx, identity, digest, at).await?)),
        None => None,
    };
    match claimed {
        None | Some((_, Decision::Claimed)) => match op(&mut tx).await {
            Ok(value) => {
                tx.commit().await?;
                Ok(Outcome::Processed(value))
            }
            Err(e) => {
                abandon(tx).await;
                Ok(Outcome::Failed(e))
            }
        },
        Some((_, Decision::Duplicate)) => {
            abandon(tx).await;
            Ok(Outcome::Duplicate)
        }
        Some((identity, Decision::Quarantined)) => {
            abandon(tx).await;
            let newly = quarantine(pool, identity, digest, delivery.body(), at).await?;
            outcome::log_quarantine(identity, newly);
            Ok(Outcome::Quarantined)
        }
    }
}

/// Rolls `tx` back. Nothing in it is kept either way: a transaction that is not committed is
/// never kept (sqlx also rolls one back when it is dropped).
async fn abandon(tx: Transaction<'_, Postgres>) {
    if let Err(error) = tx.rollback().await {
        tracing::debug!(%error, "rolling back an unneeded webhook claim transaction failed");
    }
}
