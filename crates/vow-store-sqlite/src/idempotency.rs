//! `Idempotency-Key` records (ADR 6) on the writer: [`begin`] and [`release`] are writer jobs of
//! their own; [`create_message`] is ONE writer job that fences the record, runs the ordinary
//! message create ([`messages::create`]), renders the response and completes the record, so the
//! message and its stored response commit together or not at all.

use chrono::{DateTime, Utc};
use rusqlite::Connection;
use vow_idempotency::sqlite as records;
use vow_store::idempotency::{
    settings, Begun, Completion, Fingerprint, LeaseToken, Scope, StoredResponse,
};
use vow_store::{CreatedMessage, NewMessage, StoreError};

use crate::error::{from_sqlite, Error, Result};
use crate::messages;

pub(crate) fn begin(
    conn: &Connection,
    scope: &Scope,
    fingerprint: &Fingerprint,
    canonical_body: &str,
    now: DateTime<Utc>,
) -> Result<Begun> {
    records::begin(conn, scope, fingerprint, canonical_body, now, &settings()).map_err(convert)
}

pub(crate) fn release(conn: &Connection, scope: &Scope, token: &LeaseToken) -> Result<bool> {
    records::release(conn, scope, token).map_err(convert)
}

pub(crate) fn purge(conn: &Connection, now: DateTime<Utc>, batch: usize) -> Result<usize> {
    records::purge(conn, now, batch).map_err(convert)
}

pub(crate) fn complete(
    conn: &Connection,
    scope: &Scope,
    token: &LeaseToken,
    response: &StoredResponse,
    now: DateTime<Utc>,
) -> Result<()> {
    records::complete(conn, scope, token, response, now, &settings()).map_err(convert)
}

pub(crate) fn create_message(
    conn: &Connection,
    new: NewMessage,
    completion: Completion,
) -> Result<(CreatedMessage, StoredResponse)> {
    let Completion {
        scope,
        token,
        render,
    } = completion;
    records::fence(conn, &scope, &token).map_err(convert)?;
    let now = new.now;
    let created = messages::create(conn, new, None)?;
    let response = render(&created);
    records::complete(conn, &scope, &token, &response, now, &settings()).map_err(convert)?;
    Ok((created, response))
}

/// The record store's error as the crate's.
fn convert(e: vow_idempotency::Error) -> Error {
    match e {
        vow_idempotency::Error::Fenced => Error::Store(StoreError::Fenced),
        vow_idempotency::Error::Sqlite(e) => Error::Store(from_sqlite(e)),
        other => Error::Store(StoreError::Backend(Box::new(other))),
    }
}
