//! The "at most once" flow of a request with a key ([`run`]), on any [`RecordStore`]: the one
//! flow there is, run by vow's server over its store and by this crate's `sqlite::run` and
//! `postgres::run`.
//!
//! 1. **In flight here** (with a registry): a duplicate of a request running on this node waits
//!    for it (up to `Prefer: wait`, holding nothing) and answers 409 if it still runs then, or
//!    the key's final answer, before it touches the store.
//! 2. **Claim**: where the store claims in the write and the request does not wait, the
//!    operation's write claims the key in its own transaction (no read of the record first), so
//!    claim, write and stored response commit together; a key with a record rolls that write
//!    back ([`Ended::Fenced`]), and the record, begun then, answers. Otherwise the record is
//!    begun first ([`begin_until`] polls while another request holds it and the wait allows) and
//!    [`next`] decides: run, replay, or refuse (422 reused or expired, 409 in progress).
//! 3. **Ended**: a completed write answers with `Idempotency-Expires`; a final refusal that
//!    wrote nothing is stored and answered; an outcome that is not final stores nothing and
//!    releases a begun record, so a retry runs (without one, a key with a record is answered by
//!    it, as it would have been had the record been read first); the store failing is 503.

use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::in_flight::{Entered, InFlight, Running};
use super::keyed::{Ended, Event, Fresh, Keyed, Owner, RecordStore, Settled};
use super::next::{begin_until, next, Next};
use super::respond::{replay, with_expires};
use crate::record::{Begun, LeaseToken, StoredResponse};
use crate::{KeyState, Problem};

/// Runs `op` at most once for `request` on `store` (see the module docs): `op` is given the
/// record its write completes ([`Owner`]) and says how it ended. `in_flight`, when given, is the
/// registry of the keyed requests running on this node.
pub async fn run<S, T, E, F, Fut>(
    store: &S,
    request: &Keyed,
    in_flight: Option<&Arc<InFlight>>,
    op: F,
) -> Settled<T, E, S::Error>
where
    S: RecordStore,
    F: FnOnce(Owner) -> Fut,
    Fut: Future<Output = Ended<T, E, S::Error>>,
{
    let flow = Flow { store, request };
    let _running = match in_flight {
        Some(registry) => match flow.enter(registry).await {
            Ok(running) => Some(running),
            Err(answered) => return answered,
        },
        None => None,
    };
    if !store.claims_in_the_write() || request.wait.is_some_and(|w| !w.is_zero()) {
        let (begun, now) = match flow.begin_waiting(store.now()).await {
            Ok(begun) => begun,
            Err(e) => return Settled::Unavailable(e),
        };
        return match flow.owned(begun) {
            Ok(token) => flow.execute(op, token, None, now).await,
            Err(answered) => answered,
        };
    }
    let fresh = Fresh {
        fingerprint: request.fingerprint,
        canonical_body: request.canonical_body.clone(),
    };
    let now = store.now();
    flow.execute(op, LeaseToken::generate(), Some(fresh), now)
        .await
}

/// One keyed request on its store.
struct Flow<'a, S> {
    store: &'a S,
    request: &'a Keyed,
}

impl<S: RecordStore> Flow<'_, S> {
    /// Enters the request's scope in `registry`, waiting (holding nothing, up to its wait) while
    /// a duplicate runs here; else the answer.
    async fn enter<T, E>(
        &self,
        registry: &Arc<InFlight>,
    ) -> Result<Running, Settled<T, E, S::Error>> {
        let mut counted = false;
        loop {
            match registry.enter(&self.request.scope) {
                Entered::Running(running) => return Ok(running),
                Entered::Busy(busy) => {
                    if !counted && Instant::now() < self.request.until {
                        counted = true;
                        self.store.observe(Event::Waited);
                    }
                    if !busy.finished_by(self.request.until).await {
                        return Err(self.running_here().await);
                    }
                }
            }
        }
    }

    /// Runs `op` as the owner of the record `token` holds: begun already (`fresh: None`), or
    /// claimed by its write (`fresh`); then answers by how it ended.
    async fn execute<T, E, F, Fut>(
        &self,
        op: F,
        token: LeaseToken,
        fresh: Option<Fresh>,
        now: DateTime<Utc>,
    ) -> Settled<T, E, S::Error>
    where
        F: FnOnce(Owner) -> Fut,
        Fut: Future<Output = Ended<T, E, S::Error>>,
    {
        let begun = fresh.is_none().then(|| token.clone());
        let settings = self.request.settings;
        let owner = Owner {
            scope: self.request.scope.clone(),
            token,
            fresh,
            now,
            settings,
        };
        match op(owner).await {
            Ended::Completed { answer, took_over } => {
                if took_over {
                    self.took_over();
                }
                let expires_at = settings.deadlines(now).expires_at;
                Settled::Ran { answer, expires_at }
            }
            // The key has a record: answer as it says.
            Ended::Fenced => self.lost_claim().await,
            Ended::Final { stored, sent } => self.finish(stored, sent, now, begun).await,
            Ended::Failed(e) => match &begun {
                Some(token) => {
                    // Not final: the begun record goes, so a retry runs.
                    self.release(token).await;
                    Settled::Failed(e)
                }
                // Not final, so not stored; but a key with a record is answered by it.
                None => self.recorded_or(e).await,
            },
            Ended::Unavailable(cause) => {
                if let Some(token) = &begun {
                    self.release(token).await;
                }
                Settled::Unavailable(cause)
            }
        }
    }

    /// The answer to a duplicate of a request still running on this node once its wait is
    /// over: the key's final answer when its record has one (a replay, 422), else 409.
    async fn running_here<T, E>(&self) -> Settled<T, E, S::Error> {
        let scope = &self.request.scope;
        match self.store.status(scope, self.store.now()).await {
            Ok(Some(status)) if status.state != KeyState::InProgress => self.lost_claim().await,
            Ok(_) => self.refuse(Problem::InProgress { retry_after: 1 }),
            Err(cause) => Settled::Unavailable(cause),
        }
    }

    /// The answer of the key's record when it has one, else `e` (an outcome that is not final).
    async fn recorded_or<T, E>(&self, e: E) -> Settled<T, E, S::Error> {
        let scope = &self.request.scope;
        match self.store.status(scope, self.store.now()).await {
            Ok(None) => Settled::Failed(e),
            Ok(Some(_)) => match self.begin_waiting(self.store.now()).await {
                Ok((begun, _)) => match self.owned(begun) {
                    Err(answer) => answer,
                    // Freed meanwhile (or abandoned): this request's outcome stands, unstored.
                    Ok(token) => {
                        self.release(&token).await;
                        Settled::Failed(e)
                    }
                },
                Err(cause) => Settled::Unavailable(cause),
            },
            Err(cause) => Settled::Unavailable(cause),
        }
    }

    /// The lease token when `begun` lets this request run the operation, else the answer.
    #[allow(
        clippy::result_large_err,
        reason = "the error is the answer the caller gives at once; boxing it gains nothing"
    )]
    fn owned<T, E>(&self, begun: Begun) -> Result<LeaseToken, Settled<T, E, S::Error>> {
        match next(begun, &self.request.settings) {
            Next::Run { token, taken_over } => {
                if taken_over {
                    self.took_over();
                }
                Ok(token)
            }
            Next::Replay {
                response,
                expires_at,
            } => {
                self.store.observe(Event::Replayed);
                Err(Settled::Answered(replay(response, expires_at)))
            }
            Next::Refuse(refusal) => Err(self.refuse(refusal)),
        }
    }

    /// The answer when the key has a record, so this request's write was rolled back: its
    /// replay, 422, or 409 while it runs (or after `Prefer: wait`).
    async fn lost_claim<T, E>(&self) -> Settled<T, E, S::Error> {
        match self.begin_waiting(self.store.now()).await {
            Ok((begun, _)) => match self.owned(begun) {
                Err(answer) => answer,
                // The record was freed between this request's claim and its begin (the other
                // request failed, or its lease ended just then): this one's operation is spent,
                // so the client retries. A request with `Prefer: wait` begins first instead,
                // and runs its operation when its wait ends this way.
                Ok(token) => {
                    self.release(&token).await;
                    self.refuse(Problem::InProgress { retry_after: 1 })
                }
            },
            Err(cause) => Settled::Unavailable(cause),
        }
    }

    /// Stores `stored` as the record's final response and answers `sent`. Unless `begun` holds
    /// the record already, it is begun first; when the key has one (another request's), it
    /// answers instead.
    async fn finish<T, E>(
        &self,
        stored: StoredResponse,
        sent: Response,
        now: DateTime<Utc>,
        begun: Option<LeaseToken>,
    ) -> Settled<T, E, S::Error> {
        let token = match begun {
            Some(token) => token,
            None => match self.begin_waiting(now).await {
                Ok((begun, _)) => match self.owned(begun) {
                    Ok(token) => token,
                    Err(answer) => return answer,
                },
                Err(cause) => return Settled::Unavailable(cause),
            },
        };
        let (scope, settings) = (&self.request.scope, &self.request.settings);
        match self
            .store
            .complete(scope, &token, stored, now, settings)
            .await
        {
            Ok(()) => {}
            Err(e) if S::is_fenced(&e) => {}
            Err(e) => tracing::warn!(error = %e, key = %scope.key.hash(),
                "could not store a final outcome; a retry will run the request again"),
        }
        Settled::Answered(with_expires(sent, settings.deadlines(now).expires_at))
    }

    /// Begins the record at `now`; while another request holds it and the wait allows, polls
    /// until that request's outcome is stored (a replay), its lease ends or it is released
    /// (this request owns the record), or the wait is over (409). Each poll is one short
    /// statement: nothing is held between them. The outcome and the time it was decided at.
    async fn begin_waiting(&self, now: DateTime<Utc>) -> Result<(Begun, DateTime<Utc>), S::Error> {
        let Keyed {
            scope,
            fingerprint,
            canonical_body,
            settings,
            ..
        } = self.request;
        // A lock, not a `Cell`, so the future stays `Send`.
        let decided_at = Mutex::new(now);
        let begun = begin_until(self.request.until, |polls| {
            let at = if polls == 0 { now } else { self.store.now() };
            if polls == 1 {
                self.store.observe(Event::Waited);
            }
            *decided_at.lock().unwrap_or_else(|e| e.into_inner()) = at;
            self.store
                .begin(scope, fingerprint, canonical_body, at, settings)
        })
        .await?;
        let at = *decided_at.lock().unwrap_or_else(|e| e.into_inner());
        Ok((begun, at))
    }

    /// Deletes the record `token` holds, so a retry runs; one that cannot be deleted frees
    /// itself when its lease ends, so this only logs.
    async fn release(&self, token: &LeaseToken) {
        let scope = &self.request.scope;
        if let Err(e) = self.store.release(scope, token).await {
            tracing::warn!(error = %e, key = %scope.key.hash(),
                "could not release an idempotency record; it frees when its lease ends");
        }
    }

    /// Answers with `problem`.
    fn refuse<T, E>(&self, problem: Problem) -> Settled<T, E, S::Error> {
        self.store.observe(Event::Refused(&problem));
        Settled::Answered(problem.into_response())
    }

    /// Counts and logs a claim taken over after its first request's lease ran out.
    fn took_over(&self) {
        self.store.observe(Event::TookOver);
        tracing::info!(key = %self.request.scope.key.hash(), "took over an expired idempotency claim");
    }
}
