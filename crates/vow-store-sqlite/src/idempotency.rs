//! `Idempotency-Key` records (ADR 6) on the writer: [`begin`] and [`release`] are writer jobs of
//! their own; [`apply`] is ONE writer job that fences the record, runs the API's write with the
//! entity module that owns it, renders the response and completes the record, so the write and
//! its stored response commit together or not at all.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::Connection;
use vow_idempotency::sqlite as records;
use vow_store::idempotency::{
    Begun, Completion, Fingerprint, KeyStatus, LeaseToken, Recorded, Scope, Settings,
    StoredResponse, Write, Written,
};
use vow_store::inbound::decisions::Decision;
use vow_store::IdempotencyRecords;
use vow_store::StoreError;
use vow_store::StoreResult;

use crate::error::{from_sqlite, Error, Result};
use crate::inbound::{events, sources, work};
use crate::queue::operator;
use crate::SqliteStore;
use crate::{application, endpoint, event_type, message};

/// Runs `write` with the entity module that owns its SQL.
fn perform(conn: &Connection, write: Write) -> Result<Written> {
    Ok(match write {
        Write::CreateApplication(new) => Written::Application(application::create(conn, new)?),
        Write::CreateEventType(new) => Written::EventType(event_type::create(conn, new)?),
        Write::UpdateEventType(updated) => Written::EventType(event_type::update(conn, updated)?),
        Write::CreateEndpoint(new) => Written::Endpoint(endpoint::create(conn, new)?),
        Write::CreateSource(new) => Written::Source(sources::create(conn, new)?),
        Write::CreateMessage { new, only, app } => {
            if let Some(app) = app {
                application::create(conn, app)?;
            }
            Written::Message(message::create(conn, new, only)?)
        }
        Write::RotateEndpointSecret {
            app,
            endpoint,
            new_key,
            old_valid_until,
        } => {
            endpoint::rotate_secret(conn, app, endpoint, &new_key, old_valid_until)?;
            Written::SecretRotated
        }
        Write::Resend {
            app,
            msg,
            endpoint,
            now,
        } => Written::Resent(operator::resend(conn, app, msg, endpoint, now)?),
        Write::Replay {
            app,
            endpoint,
            filter,
            now,
            spacing,
        } => Written::Replayed(operator::replay(
            conn, app, endpoint, &filter, now, spacing, false,
        )?),
        Write::ClaimInboundWork(request) => Written::InboundClaimed(work::claim(conn, &request)?),
        Write::RecordInboundWork(outcome) => {
            Written::InboundEvent(work::record(conn, outcome)?.into_event()?)
        }
        Write::ResolveUncertain {
            source,
            event,
            resolution,
            destination,
            now,
        } => {
            let decision = Decision::Resolve(resolution);
            Written::Decided(work::decide(
                conn,
                source,
                event,
                decision,
                destination,
                now,
            )?)
        }
        Write::ReplayInbound {
            source,
            event,
            destination,
            now,
        } => Written::Decided(work::decide(
            conn,
            source,
            event,
            Decision::Replay,
            destination,
            now,
        )?),
        Write::ResolveQuarantined {
            source,
            event,
            to,
            now,
        } => Written::InboundEvent(events::resolve(conn, source, event, to, now)?),
        other => {
            return Err(Error::Store(StoreError::Backend(
                format!("no SQLite write for {other:?}").into(),
            )))
        }
    })
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

    async fn apply(
        &self,
        write: Write,
        completion: Option<Completion>,
    ) -> StoreResult<(Written, Option<StoredResponse>)> {
        self.write(move |conn| {
            let Some(Completion {
                scope,
                token,
                fresh,
                now,
                settings,
                render,
            }) = completion
            else {
                return Ok((perform(conn, write)?, None));
            };
            if let Some(mut f) = fresh {
                let written = perform(conn, write)?;
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
                match recorded.map_err(convert)? {
                    Recorded::Fresh => {}
                    Recorded::TookOver => f.took_over(),
                    // The writer rolls this job back to its savepoint: the write is gone too.
                    _ => return Err(Error::Store(StoreError::Fenced)),
                }
                return Ok((written, Some(response)));
            }
            records::fence(conn, &scope, &token).map_err(convert)?;
            let written = perform(conn, write)?;
            let response = render.response(&written);
            records::complete(conn, &scope, &token, &response, now, &settings).map_err(convert)?;
            Ok((written, Some(response)))
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
