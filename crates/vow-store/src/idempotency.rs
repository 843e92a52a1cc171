//! `Idempotency-Key` records in the store (ADR 6): the types the [`crate::Store`] methods
//! `begin_idempotent` and `release_idempotent` take, re-exported from `vow-idempotency`, plus
//! what a keyed write carries to complete its record in the same transaction ([`Completion`]),
//! what it returns ([`Applied`]) and whether it queued work ([`QueuesWork`]).
//!
//! How long records live ([`Settings`]: the lease, the replay window, the tombstone) is the
//! caller's to say, on every call that writes a deadline: stores keep no settings of their own,
//! so the server's configuration is the one place they come from.
//!
//! Every API write that honours the header (the creates, and the inbound operations: a pull
//! consumer's claim, complete and fail, an operator's resolve, replay, release and discard) is
//! one store method that takes an `Option<Completion<T>>` (`create_application_keyed`, ...):
//! with one, the backend fences the token, runs the write, renders the response and completes
//! the record, all in the write's transaction; each backend writes that rule once, in a small
//! generic helper, with [`Completion::split`] and [`FreshClaim::settle`] from here.

pub use vow_idempotency::{
    Begun, Fingerprint, KeyState, KeyStatus, LeaseToken, Recorded, Scope, Settings, StoredResponse,
};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::inbound::decisions::Decided;
use crate::inbound::processing::WorkClaim;
use crate::inbound::source_replay::SourceReplayed;
use crate::inbound::{InboundEvent, Source};
use crate::{Application, CreatedMessage, Delivery, Endpoint, EventType, StoreError, StoreResult};

/// What a keyed write returns: its result and, with a [`Completion`], the response stored
/// with it in the same transaction.
pub type Applied<T> = (T, Option<StoredResponse>);

/// Whether a write's result queued work for the delivery workers (the server wakes them, and
/// PostgreSQL tells the other processes).
pub trait QueuesWork {
    /// Whether delivery workers have new work to look at.
    fn queues_work(&self) -> bool {
        false
    }
}

impl QueuesWork for CreatedMessage {
    fn queues_work(&self) -> bool {
        self.deliveries > 0
    }
}

impl QueuesWork for Delivery {
    fn queues_work(&self) -> bool {
        true
    }
}

/// How many deliveries a replay made due again.
impl QueuesWork for u64 {
    fn queues_work(&self) -> bool {
        *self > 0
    }
}

impl QueuesWork for () {}
impl QueuesWork for Application {}
impl QueuesWork for EventType {}
impl QueuesWork for Endpoint {}
impl QueuesWork for Source {}
impl QueuesWork for WorkClaim {}
impl QueuesWork for InboundEvent {}
impl QueuesWork for Decided {}
/// Inbound work: the caller wakes the forwarders (delivery workers have none).
impl QueuesWork for SourceReplayed {}

/// The response a [`Completion`] stores and replays.
pub enum Render<T> {
    /// Rendered before the write, because the write's success answers exactly this (a
    /// message create: its row is the request's values). The store can then claim the key with
    /// its response, and nothing is rendered inside the transaction; a failed write rolls the
    /// record back with it.
    Ready(StoredResponse),
    /// Rendered from the write's result, inside the transaction.
    From(Box<dyn FnOnce(&T) -> StoredResponse + Send>),
}

impl<T> Render<T> {
    /// The response for `written`.
    pub fn response(self, written: &T) -> StoredResponse {
        match self {
            Self::Ready(response) => response,
            Self::From(render) => render(written),
        }
    }
}

/// The record part of a [`Completion`], without its response (see [`Completion::split`]).
#[derive(Debug)]
pub struct Record {
    /// [`Completion::scope`].
    pub scope: Scope,
    /// [`Completion::token`].
    pub token: LeaseToken,
    /// [`Completion::fresh`].
    pub fresh: Option<FreshClaim>,
    /// [`Completion::now`].
    pub now: DateTime<Utc>,
    /// [`Completion::settings`].
    pub settings: Settings,
}

/// What completes an idempotency record in the transaction of the write it protects: the record
/// (its scope and the owner's lease token, checked first) and the response to store.
pub struct Completion<T> {
    /// The record's scope.
    pub scope: Scope,
    /// The owner's lease token: from [`Begun::Owner`] or [`Begun::TakenOver`], or, with
    /// `fresh`, a new one the record is claimed with.
    pub token: LeaseToken,
    /// `Some` to claim the key inside the transaction, with no record begun: the transaction
    /// runs the write, then records the key as completed (one insert, one commit for all). A
    /// key whose record was abandoned (an expired lease, an ended tombstone) is taken over by
    /// that record's token and completed instead; a key with any other record by then is
    /// [`crate::StoreError::Fenced`], writing nothing (the caller begins the record to learn its
    /// answer). `None`: the record was begun; the transaction fences it by `token` first and
    /// completes it last.
    pub fresh: Option<FreshClaim>,
    /// When the record completes (its expiry counts from here).
    pub now: DateTime<Utc>,
    /// How long the completed record is replayed and then kept as a tombstone (the caller's
    /// configuration; [`Settings::default`] is 24 h and 7 days).
    pub settings: Settings,
    /// The stored response, rendered before the write or from its result.
    pub render: Render<T>,
}

impl<T> Completion<T> {
    /// The record to fence and complete, and the response to store.
    pub fn split(self) -> (Record, Render<T>) {
        let Self {
            scope,
            token,
            fresh,
            now,
            settings,
            render,
        } = self;
        let record = Record {
            scope,
            token,
            fresh,
            now,
            settings,
        };
        (record, render)
    }

    /// A fresh claim whose response was rendered before the write ([`Render::Ready`]): its
    /// record (with no `fresh`), the claim and the response, so a backend can fold the claim
    /// into the write's first statement. Any other completion back as it was.
    pub fn ready_claim(self) -> ReadyClaim<T> {
        match self {
            Self {
                scope,
                token,
                fresh: Some(fresh),
                now,
                settings,
                render: Render::Ready(response),
            } => {
                let record = Record {
                    scope,
                    token,
                    fresh: None,
                    now,
                    settings,
                };
                ReadyClaim::Ready(record, fresh, response)
            }
            other => ReadyClaim::Not(other),
        }
    }
}

/// What [`Completion::ready_claim`] found.
#[derive(Debug)]
pub enum ReadyClaim<T> {
    /// A fresh claim with its response ready: the record (with no `fresh`), the claim and the
    /// response.
    Ready(Record, FreshClaim, StoredResponse),
    /// Any other completion, as it was.
    Not(Completion<T>),
}

/// What a fresh claim records: the request's fingerprint and canonical body.
pub struct FreshClaim {
    /// The request's fingerprint.
    pub fingerprint: Fingerprint,
    /// The request's canonical body.
    pub canonical_body: String,
    /// Called, inside the transaction, when the claim took over an abandoned record (the
    /// caller's metrics and log).
    pub on_takeover: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl FreshClaim {
    /// Runs the takeover hook, if any.
    pub fn took_over(&mut self) {
        if let Some(hook) = self.on_takeover.take() {
            hook();
        }
    }

    /// What a fresh claim's outcome means for the write in its transaction: go on (after the
    /// takeover hook, when it took an abandoned record over), or [`StoreError::Fenced`] when
    /// the key has another record (the caller rolls the transaction back).
    pub fn settle(&mut self, recorded: Recorded) -> StoreResult<()> {
        match recorded {
            Recorded::Fresh => Ok(()),
            Recorded::TookOver => {
                self.took_over();
                Ok(())
            }
            _ => Err(StoreError::Fenced),
        }
    }
}

impl std::fmt::Debug for FreshClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshClaim")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl<T> std::fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// `Idempotency-Key` records: claimed, completed (alone or in the transaction of the write they
/// protect), released, aged and inspected.
#[async_trait]
pub trait IdempotencyRecords: Send + Sync + 'static {
    /// Claims `scope` for a request with `fingerprint` and `canonical_body` at `now`, in its own
    /// short transaction, or says why not ([`Begun`]). A claim (new, or taken over) gets
    /// `settings`' lease and expiry.
    async fn begin_idempotent(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<Begun>;

    /// Deletes the `in_progress` record `token` owns (an outcome that is not final). Whether
    /// there was one.
    async fn release_idempotent(&self, scope: &Scope, token: &LeaseToken) -> StoreResult<bool>;

    /// Ages idempotency records at `now`, at most `batch` rows: an expired completed record
    /// becomes a tombstone (scope, fingerprint, resource; no bodies), and ended tombstones and
    /// abandoned claims are deleted. How many rows changed. Each row carries its own deadlines,
    /// set from the [`Settings`] it was written with.
    async fn purge_idempotent(&self, now: DateTime<Utc>, batch: usize) -> StoreResult<usize>;

    /// Completes the record `token` owns with `response`, on its own: for a final outcome that
    /// wrote nothing (the create answered 404 or 409), so a retry replays it.
    /// [`crate::StoreError::Fenced`] when the token no longer owns the record. Its expiry and
    /// tombstone count from `now` by `settings`.
    async fn complete_idempotent(
        &self,
        scope: &Scope,
        token: &LeaseToken,
        response: StoredResponse,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<()>;

    /// Where `scope`'s key stands at `now` (`None`: the key is free).
    async fn idempotency_status(
        &self,
        scope: &Scope,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<KeyStatus>>;

    /// When the oldest idempotency claim still in progress began, if any (a stuck request
    /// shows here until its record expires): its lease's end less `settings`' lease.
    async fn oldest_idempotent_claim(
        &self,
        settings: &Settings,
    ) -> StoreResult<Option<DateTime<Utc>>>;
}
