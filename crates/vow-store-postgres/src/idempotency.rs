//! `Idempotency-Key` records (ADR 6): [`begin`] and [`release`] run on a pooled connection
//! outside any transaction (each statement commits, so a claim is visible at once); [`apply`] is
//! ONE transaction that locks the record by its token (fence), runs the API's write with the
//! entity module that owns it, renders the response and completes the record, so the write and
//! its stored response commit together or not at all.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use vow_idempotency::postgres as records;
use vow_store::idempotency::{
    Begun, Completion, Fingerprint, KeyStatus, LeaseToken, Recorded, Render, Scope, Settings,
    StoredResponse, Write, Written,
};
use vow_store::inbound::decisions::Decision;
use vow_store::IdempotencyRecords;
use vow_store::{StoreError, StoreResult};

use crate::error::{db_error, record_error};
use crate::inbound::{events, operators, sources, work};
use crate::queue::operator;
use crate::PgStore;
use crate::{application, endpoint, event_type, message};

/// [`vow_store::IdempotencyRecords::apply`] as ONE transaction: with a completion, locks the record by its
/// token (fence), runs the write ([`perform`]), renders the response and completes the record,
/// so the write and its stored response commit together or not at all.
pub(crate) async fn apply(
    pool: &PgPool,
    write: Write,
    completion: Option<Completion>,
) -> StoreResult<(Written, Option<StoredResponse>)> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    match apply_in(&mut tx, write, completion).await {
        Ok(outcome) => {
            tx.commit().await.map_err(db_error)?;
            Ok(outcome)
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

/// [`apply`]'s work inside its transaction, which the caller commits or rolls back.
async fn apply_in(
    tx: &mut PgConnection,
    write: Write,
    completion: Option<Completion>,
) -> StoreResult<(Written, Option<StoredResponse>)> {
    let outcome = match completion {
        None => (perform(tx, write).await?, None),
        Some(Completion {
            scope,
            token,
            fresh,
            now,
            settings,
            render,
        }) => {
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
                // The hot path: the claim carries the response, rendered before the write, and
                // is folded into the read that comes first.
                let (write, render) = match (write, render) {
                    (Write::CreateMessage { new, only, app }, Render::Ready(response)) => {
                        if let Some(app) = app {
                            application::create(tx, app).await?;
                        }
                        let claim = records::Claim {
                            response: Some(&response),
                            ..claim
                        };
                        let (recorded, created) =
                            message::create_claiming(tx, new, only, &claim).await?;
                        if recorded == Recorded::TookOver {
                            f.took_over();
                        }
                        return Ok((Written::Message(created), Some(response)));
                    }
                    other => other,
                };
                // Claim first, so a concurrent request with the key waits for this outcome.
                match records::claim_completed(tx, &claim)
                    .await
                    .map_err(record_error)?
                {
                    Recorded::Fresh => {}
                    Recorded::TookOver => f.took_over(),
                    // Nothing written yet; dropping the transaction rolls the claim back.
                    _ => return Err(StoreError::Fenced),
                }
                let written = perform(tx, write).await?;
                let response = render.response(&written);
                records::store_response(tx, &scope, &token, &response)
                    .await
                    .map_err(record_error)?;
                return Ok((written, Some(response)));
            }
            records::fence(tx, &scope, &token)
                .await
                .map_err(record_error)?;
            let written = perform(tx, write).await?;
            let response = render.response(&written);
            records::complete(tx, &scope, &token, &response, now, &settings)
                .await
                .map_err(record_error)?;
            (written, Some(response))
        }
    };
    Ok(outcome)
}

/// Runs `write` inside the caller's transaction, with the entity module that owns its SQL.
async fn perform(conn: &mut PgConnection, write: Write) -> StoreResult<Written> {
    Ok(match write {
        Write::CreateApplication(new) => {
            Written::Application(application::create(conn, new).await?)
        }
        Write::CreateEventType(new) => Written::EventType(event_type::create(conn, new).await?),
        Write::UpdateEventType(updated) => {
            Written::EventType(event_type::update(conn, updated).await?)
        }
        Write::CreateEndpoint(new) => Written::Endpoint(endpoint::create(conn, new).await?),
        Write::CreateSource(new) => Written::Source(sources::create(conn, new).await?),
        Write::CreateMessage { new, only, app } => {
            if let Some(app) = app {
                application::create(conn, app).await?;
            }
            Written::Message(message::create_in(conn, new, only).await?)
        }
        Write::RotateEndpointSecret {
            app,
            endpoint,
            new_key,
            old_valid_until,
        } => {
            endpoint::rotate_secret(conn, app, endpoint, new_key, old_valid_until).await?;
            Written::SecretRotated
        }
        Write::Resend {
            app,
            msg,
            endpoint,
            now,
        } => Written::Resent(operator::resend(conn, app, msg, endpoint, now).await?),
        Write::Replay {
            app,
            endpoint,
            filter,
            now,
            spacing,
        } => Written::Replayed(
            operator::replay(conn, app, endpoint, &filter, now, spacing, false).await?,
        ),
        Write::ClaimInboundWork(request) => {
            Written::InboundClaimed(work::claim(conn, &request).await?)
        }
        Write::RecordInboundWork(outcome) => {
            Written::InboundEvent(work::record(conn, outcome).await?.into_event()?)
        }
        Write::ResolveUncertain {
            source,
            event,
            resolution,
            destination,
            now,
        } => {
            let decision = Decision::Resolve(resolution);
            Written::Decided(
                operators::decide(conn, source, event, decision, destination, now).await?,
            )
        }
        Write::ReplayInbound {
            source,
            event,
            destination,
            now,
        } => Written::Decided(
            operators::decide(conn, source, event, Decision::Replay, destination, now).await?,
        ),
        Write::ResolveQuarantined {
            source,
            event,
            to,
            now,
        } => Written::InboundEvent(events::resolve(conn, source, event, to, now).await?),
        other => {
            return Err(StoreError::Backend(
                format!("no PostgreSQL write for {other:?}").into(),
            ))
        }
    })
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

    async fn apply(
        &self,
        write: Write,
        completion: Option<Completion>,
    ) -> StoreResult<(Written, Option<StoredResponse>)> {
        let (written, response) = apply(&self.pool, write, completion).await?;
        self.notifier.written(&written);
        Ok((written, response))
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
