//! The claims on SQLite (feature `sqlite`), times in integer microseconds like the rest of vow.
//! The host runs [`SCHEMA`] in its migrations, next to its own tables.
//!
//! [`claim`] runs inside the host's transaction (`BEGIN IMMEDIATE`, so that concurrent writers
//! queue for the lock instead of failing on a stale snapshot), with its business change.
//! [`quarantine`] runs outside any transaction, so what it stores is kept whatever happens to
//! the business transaction. [`process`] does all of it in the right order.

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, TransactionBehavior};

use crate::error::{Error, Result};
use crate::event::{Decision, Delivery, Identity, PayloadDigest};
use crate::outcome::{self, Outcome};

/// The claims and the quarantine (idempotent). See the crate docs for the design.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS receiver_claims (
    source      TEXT    NOT NULL,
    account     TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    digest      TEXT    NOT NULL,
    received_at INTEGER NOT NULL,
    PRIMARY KEY (source, account, event_id)
);
CREATE TABLE IF NOT EXISTS receiver_quarantine (
    source      TEXT    NOT NULL,
    account     TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    digest      TEXT    NOT NULL,
    payload     BLOB    NOT NULL,
    received_at INTEGER NOT NULL,
    PRIMARY KEY (source, account, event_id, digest)
);
";

/// Claims `identity` for a payload with `digest`, inside the caller's transaction: one
/// `INSERT … ON CONFLICT DO NOTHING`; only when it inserts nothing is the claim there read, to
/// tell a [`Decision::Duplicate`] (same digest) from a [`Decision::Quarantined`] one. A
/// [`Decision::Claimed`] claim is the caller's to commit with its business change, or to roll
/// back with it.
pub fn claim(
    conn: &Connection,
    identity: &Identity,
    digest: &PayloadDigest,
    at: DateTime<Utc>,
) -> Result<Decision> {
    let (source, account, event_id) = (identity.source(), identity.account(), identity.event_id());
    let inserted = conn
        .prepare_cached(
            "INSERT INTO receiver_claims (source, account, event_id, digest, received_at) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
        )?
        .execute(params![
            source,
            account,
            event_id,
            digest.hex(),
            at.timestamp_micros()
        ])?;
    if inserted == 1 {
        return Ok(Decision::Claimed);
    }
    let stored: String = conn
        .prepare_cached(
            "SELECT digest FROM receiver_claims \
             WHERE source = ?1 AND account = ?2 AND event_id = ?3",
        )?
        .query_row(params![source, account, event_id], |r| r.get(0))?;
    let stored = stored.parse().map_err(|_| Error::Corrupt("digest"))?;
    Ok(Decision::on_conflict(&stored, digest))
}

/// Keeps `payload` (digest `digest`) aside under `identity`, committed at once: the connection
/// must be in autocommit mode ([`Error::InsideTransaction`] otherwise). The same payload
/// quarantined again is stored once; whether this call stored it.
pub fn quarantine(
    conn: &Connection,
    identity: &Identity,
    digest: &PayloadDigest,
    payload: &[u8],
    at: DateTime<Utc>,
) -> Result<bool> {
    if !conn.is_autocommit() {
        return Err(Error::InsideTransaction);
    }
    let inserted = conn
        .prepare_cached(
            "INSERT INTO receiver_quarantine \
             (source, account, event_id, digest, payload, received_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
        )?
        .execute(params![
            identity.source(),
            identity.account(),
            identity.event_id(),
            digest.hex(),
            payload,
            at.timestamp_micros()
        ])?;
    Ok(inserted == 1)
}

/// Processes `delivery` exactly once on `conn`, which must be in autocommit mode: in ONE
/// `BEGIN IMMEDIATE` transaction, [`claim`] its identity and, when claimed (or when it has no
/// event id), run `op` — the business change, on the same connection, which must not begin or
/// end transactions — and commit both. `op` failing rolls back both ([`Outcome::Failed`]). A
/// duplicate ends the transaction having written nothing; a quarantine ends it, then stores the
/// payload with [`quarantine`]. Blocking: call it off the async runtime (see
/// `process_shared` with the `axum` feature).
pub fn process<T, E>(
    conn: &mut Connection,
    delivery: &Delivery,
    op: impl FnOnce(&Connection) -> std::result::Result<T, E>,
) -> Outcome<T, E> {
    run(conn, delivery, op).unwrap_or_else(Outcome::StoreFailed)
}

fn run<T, E>(
    conn: &mut Connection,
    delivery: &Delivery,
    op: impl FnOnce(&Connection) -> std::result::Result<T, E>,
) -> Result<Outcome<T, E>> {
    let (digest, at) = (delivery.digest(), delivery.received_at());
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let claimed = match delivery.identity() {
        Some(identity) => Some((identity, claim(&tx, identity, digest, at)?)),
        None => None,
    };
    match claimed {
        None | Some((_, Decision::Claimed)) => match op(&tx) {
            Ok(value) => {
                tx.commit()?;
                Ok(Outcome::Processed(value))
            }
            Err(e) => Ok(Outcome::Failed(e)), // dropping `tx` rolls it back
        },
        Some((_, Decision::Duplicate)) => Ok(Outcome::Duplicate),
        Some((identity, Decision::Quarantined)) => {
            tx.rollback()?;
            let newly = quarantine(conn, identity, digest, delivery.body(), at)?;
            outcome::log_quarantine(identity, newly);
            Ok(Outcome::Quarantined)
        }
    }
}

/// [`process`] on a connection behind a mutex, in `spawn_blocking` with the lock held (feature
/// `axum`). A lock poisoned by a panicking `op` is taken back (its transaction rolled back as it
/// unwound) and the panic goes on in the caller.
#[cfg(feature = "axum")]
pub async fn process_shared<T, E, F>(
    db: &std::sync::Arc<std::sync::Mutex<Connection>>,
    delivery: Delivery,
    op: F,
) -> Outcome<T, E>
where
    F: FnOnce(&Connection) -> std::result::Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let shared = std::sync::Arc::clone(db);
    let ran = tokio::task::spawn_blocking(move || {
        let mut conn = shared.lock().unwrap_or_else(|poisoned| {
            shared.clear_poison();
            poisoned.into_inner()
        });
        process(&mut conn, &delivery, op)
    })
    .await;
    match ran {
        Ok(outcome) => outcome,
        Err(e) if e.is_panic() => {
            db.clear_poison(); // the panicking transaction rolled back as it unwound
            std::panic::resume_unwind(e.into_panic())
        }
        Err(e) => Outcome::StoreFailed(Error::Unavailable(Box::new(e))),
    }
}
