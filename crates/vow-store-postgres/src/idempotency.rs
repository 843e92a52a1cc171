//! `Idempotency-Key` records (ADR 6): [`begin`] and [`release`] run on a pooled connection
//! outside any transaction (each statement commits, so a claim is visible at once);
//! [`create_message`] is ONE transaction that locks the record by its token (fence), runs the
//! ordinary message writes ([`message::create_in`]), renders the response and completes the
//! record, so the message and its stored response commit together or not at all.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use vow_idempotency::postgres as records;
use vow_store::idempotency::{
    settings, Begun, Completion, Fingerprint, LeaseToken, Scope, StoredResponse,
};
use vow_store::{CreatedMessage, NewMessage, StoreError, StoreResult};

use crate::error::db_error;
use crate::message;

pub(crate) async fn begin(
    pool: &PgPool,
    scope: &Scope,
    fingerprint: &Fingerprint,
    canonical_body: &str,
    now: DateTime<Utc>,
) -> StoreResult<Begun> {
    let mut conn = pool.acquire().await.map_err(db_error)?;
    records::begin(
        &mut conn,
        scope,
        fingerprint,
        canonical_body,
        now,
        &settings(),
    )
    .await
    .map_err(convert)
}

pub(crate) async fn release(pool: &PgPool, scope: &Scope, token: &LeaseToken) -> StoreResult<bool> {
    let mut conn = pool.acquire().await.map_err(db_error)?;
    records::release(&mut conn, scope, token)
        .await
        .map_err(convert)
}

pub(crate) async fn purge(pool: &PgPool, now: DateTime<Utc>, batch: usize) -> StoreResult<usize> {
    let mut conn = pool.acquire().await.map_err(db_error)?;
    records::purge(&mut conn, now, batch).await.map_err(convert)
}

pub(crate) async fn complete(
    pool: &PgPool,
    scope: &Scope,
    token: &LeaseToken,
    response: &StoredResponse,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut conn = pool.acquire().await.map_err(db_error)?;
    records::complete(&mut conn, scope, token, response, now, &settings())
        .await
        .map_err(convert)
}

pub(crate) async fn create_message(
    pool: &PgPool,
    new: NewMessage,
    completion: Completion,
) -> StoreResult<(CreatedMessage, StoredResponse)> {
    let Completion {
        scope,
        token,
        render,
    } = completion;
    let now = new.now;
    let mut tx = pool.begin().await.map_err(db_error)?;
    records::fence(&mut tx, &scope, &token)
        .await
        .map_err(convert)?;
    let created = message::create_in(&mut tx, new, None).await?;
    let response = render(&created);
    records::complete(&mut tx, &scope, &token, &response, now, &settings())
        .await
        .map_err(convert)?;
    tx.commit().await.map_err(db_error)?;
    Ok((created, response))
}

/// The record store's error as the contract's.
fn convert(e: vow_idempotency::Error) -> StoreError {
    match e {
        vow_idempotency::Error::Fenced => StoreError::Fenced,
        vow_idempotency::Error::Postgres(e) => db_error(e),
        other => StoreError::Backend(Box::new(other)),
    }
}
