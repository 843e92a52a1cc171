//! `Idempotency-Key` records (ADR 6) on the writer: begin and release are writer jobs of their
//! own; [`keyed`] runs inside the ONE writer job of a keyed write: it fences the record, runs
//! the write, renders the response and completes the record, so the write and its stored
//! response commit together or not at all.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::Connection;
use vow_idempotency::sqlite as records;
use vow_store::idempotency::{
    Applied, Begun, Completion, Fingerprint, KeyStatus, LeaseToken, Record, Scope, Settings,
    StoredResponse,
};
use vow_store::IdempotencyRecords;
use vow_store::StoreError;
use vow_store::StoreResult;

use crate::error::{from_sqlite, Error, Result};
use crate::SqliteStore;

/// Runs `write` on the writer's connection and, with `keyed`, completes its record in the same
/// writer job: fences the token (or, on a fresh claim, records the key as completed after the
/// write), renders the response and stores it. Any error rolls the job back, write and all.
pub(crate) fn keyed<T>(
    conn: &Connection,
    keyed: Option<Completion<T>>,
    write: impl FnOnce(&Connection) -> Result<T>,
) -> Result<Applied<T>> {
    let Some(completion) = keyed else {
        return Ok((write(conn)?, None));
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
        let written = write(conn)?;
        let response = render.response(&written);
        let recorded = records::record_completed(
            conn,
            &scope,
            &f.fingerprint,
            &f.canonical_body,
            &token,
            &response,
            now,
            &settings,
        );
        // On Fenced the writer rolls this job back to its savepoint: the write is gone too.
        f.settle(recorded.map_err(convert)?)?;
        return Ok((written, Some(response)));
    }
    records::fence(conn, &scope, &token).map_err(convert)?;
    let written = write(conn)?;
    let response = render.response(&written);
    records::complete(conn, &scope, &token, &response, now, &settings).map_err(convert)?;
    Ok((written, Some(response)))
}

/// The record store's error as the crate's.
fn convert(e: vow_idempotency::Error) -> Error {
    match e {
        vow_idempotency::Error::Fenced => Error::Store(StoreError::Fenced),
        vow_idempotency::Error::Sqlite(e) => Error::Store(from_sqlite(e)),
        other => Error::Store(StoreError::Backend(Box::new(other))),
    }
}

#[async_trait]
impl IdempotencyRecords for SqliteStore {
    async fn begin_idempotent(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<Begun> {
        let (scope, fingerprint, settings) = (scope.clone(), *fingerprint, *settings);
        let body = canonical_body.to_owned();
        self.write(move |conn| {
            let scope: &Scope = &scope;
            let fingerprint: &Fingerprint = &fingerprint;
            let canonical_body: &str = &body;
            let settings: &Settings = &settings;
            records::begin(conn, scope, fingerprint, canonical_body, now, settings).map_err(convert)
        })
        .await
    }

    async fn release_idempotent(&self, scope: &Scope, token: &LeaseToken) -> StoreResult<bool> {
        let (scope, token) = (scope.clone(), token.clone());
        self.write(move |conn| {
            let scope: &Scope = &scope;
            let token: &LeaseToken = &token;
            records::release(conn, scope, token).map_err(convert)
        })
        .await
    }

    async fn purge_idempotent(&self, now: DateTime<Utc>, batch: usize) -> StoreResult<usize> {
        self.write(move |conn| records::purge(conn, now, batch).map_err(convert))
            .await
    }

    async fn complete_idempotent(
        &self,
        scope: &Scope,
        token: &LeaseToken,
        response: StoredResponse,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<()> {
        let (scope, token, settings) = (scope.clone(), token.clone(), *settings);
        self.write(move |conn| {
            let scope: &Scope = &scope;
            let token: &LeaseToken = &token;
            let response: &StoredResponse = &response;
            let settings: &Settings = &settings;
            records::complete(conn, scope, token, response, now, settings).map_err(convert)
        })
        .await
    }

    async fn idempotency_status(
        &self,
        scope: &Scope,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<KeyStatus>> {
        let scope = scope.clone();
        self.read(move |conn| {
            let scope: &Scope = &scope;
            records::status(conn, scope, now).map_err(convert)
        })
        .await
    }

    async fn oldest_idempotent_claim(
        &self,
        settings: &Settings,
    ) -> StoreResult<Option<DateTime<Utc>>> {
        let settings = *settings;
        self.read(move |conn| {
            let settings: &Settings = &settings;
            records::oldest_in_progress(conn, settings).map_err(convert)
        })
        .await
    }
}
