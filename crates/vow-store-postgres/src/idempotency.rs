//! `Idempotency-Key` records (ADR 6): [`begin`] and [`release`] run on a pooled connection
//! outside any transaction (each statement commits, so a claim is visible at once); [`keyed`]
//! is the ONE transaction of a keyed write ([`transaction`]): it locks the record by its token
//! (fence), runs the write, renders the response and completes the record, so the write and
//! its stored response commit together or not at all.

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use vow_idempotency::postgres as records;
use vow_store::idempotency::{
    Applied, Begun, Completion, Fingerprint, KeyStatus, LeaseToken, Record, Scope, Settings,
    StoredResponse,
};
use vow_store::IdempotencyRecords;
use vow_store::StoreResult;

use crate::error::{db_error, record_error};
use crate::PgStore;

/// A step of one transaction, on its connection.
pub(crate) type InTx<'c, T> = Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 'c>>;

/// `work` as a step of any transaction (a closure bound to a `let` is not general over the
/// connection's lifetime unless it is given this signature where it is written).
pub(crate) fn step<T, F>(work: F) -> F
where
    F: for<'c> FnOnce(&'c mut PgConnection) -> InTx<'c, T>,
{
    work
}

/// Runs `work` in ONE transaction: committed when it succeeds, rolled back at once when not.
pub(crate) async fn transaction<T>(
    pool: &PgPool,
    work: impl for<'c> FnOnce(&'c mut PgConnection) -> InTx<'c, T>,
) -> StoreResult<T> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    match work(&mut tx).await {
        Ok(out) => {
            tx.commit().await.map_err(db_error)?;
            Ok(out)
        }
        Err(e) => {
            // Ended now, not when the connection is next used: the transaction may hold the
            // key's scope lock, and the caller's next step (begin) must not find it in flight.
            if let Err(cause) = tx.rollback().await {
                tracing::debug!(error = %cause, "rolling back a failed write failed");
            }
            Err(e)
        }
    }
}

/// Runs `write` in ONE transaction and, with `keyed`, completes its record there: fences the
/// token (or, on a fresh claim, claims the key first), runs the write, renders the response
/// and stores it, so the write and its stored response commit together or not at all.
pub(crate) async fn keyed<T: Send + 'static>(
    pool: &PgPool,
    keyed: Option<Completion<T>>,
    write: impl for<'c> FnOnce(&'c mut PgConnection) -> InTx<'c, T> + Send + 'static,
) -> StoreResult<Applied<T>> {
    transaction(pool, move |tx| Box::pin(keyed_in(tx, keyed, write))).await
}

/// [`keyed`]'s work inside its transaction, which the caller commits or rolls back.
async fn keyed_in<T: Send>(
    tx: &mut PgConnection,
    keyed: Option<Completion<T>>,
    write: impl for<'c> FnOnce(&'c mut PgConnection) -> InTx<'c, T> + Send,
) -> StoreResult<Applied<T>> {
    let Some(completion) = keyed else {
        return Ok((write(tx).await?, None));
    };
    let (record, render) = completion.split();
    let Record {
        scope,
        token,
        fresh,
        now,
        settings,
    } = record;
    if let Some(mut f) = fresh {
        let claim = records::Claim {
            scope: &scope,
            fingerprint: &f.fingerprint,
            canonical_body: &f.canonical_body,
            token: &token,
            now,
            settings: &settings,
            response: None,
        };
        // Claim first, so a concurrent request with the key waits for this outcome; on
        // Fenced nothing is written yet, and the rollback drops the claim.
        let recorded = records::claim_completed(tx, &claim)
            .await
            .map_err(record_error)?;
        f.settle(recorded)?;
        let written = write(tx).await?;
        let response = render.response(&written);
        records::store_response(tx, &scope, &token, &response)
            .await
            .map_err(record_error)?;
        return Ok((written, Some(response)));
    }
    records::fence(tx, &scope, &token)
        .await
        .map_err(record_error)?;
    let written = write(tx).await?;
    let response = render.response(&written);
    records::complete(tx, &scope, &token, &response, now, &settings)
        .await
        .map_err(record_error)?;
    Ok((written, Some(response)))
}

#[async_trait]
impl IdempotencyRecords for PgStore {
    async fn begin_idempotent(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<Begun> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        records::begin(&mut conn, scope, fingerprint, canonical_body, now, settings)
            .await
            .map_err(record_error)
    }

    async fn release_idempotent(&self, scope: &Scope, token: &LeaseToken) -> StoreResult<bool> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        records::release(&mut conn, scope, token)
            .await
            .map_err(record_error)
    }

    async fn purge_idempotent(&self, now: DateTime<Utc>, batch: usize) -> StoreResult<usize> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        records::purge(&mut conn, now, batch)
            .await
            .map_err(record_error)
    }

    async fn complete_idempotent(
        &self,
        scope: &Scope,
        token: &LeaseToken,
        response: StoredResponse,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<()> {
        let response: &StoredResponse = &response;
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        records::complete(&mut conn, scope, token, response, now, settings)
            .await
            .map_err(record_error)
    }

    async fn idempotency_status(
        &self,
        scope: &Scope,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<KeyStatus>> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        records::status(&mut conn, scope, now)
            .await
            .map_err(record_error)
    }

    async fn oldest_idempotent_claim(
        &self,
        settings: &Settings,
    ) -> StoreResult<Option<DateTime<Utc>>> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        records::oldest_in_progress(&mut conn, settings)
            .await
            .map_err(record_error)
    }
}
