//! Replaying a source's dead letters in bulk (issue 16, `vow replay --source`): every forward
//! of the source's events that the single-event replay ([`super::decisions`]) would requeue
//! (`dead_lettered` or `rejected`), of events received in a time range, optionally at one
//! destination only. Events being processed are skipped and counted; events of other sources
//! are never read. Each replay has an id ([`ReplayId`]), written on every forward it requeues
//! (`inbound_forwards.replay_id`), so [`SourceReplays::source_replay_stats`] counts that
//! replay's forwards by where they stand now. A forward belongs to the last replay that
//! requeued it; a single-event replay of it clears the id.
//!
//! On PostgreSQL a replay is one transaction of set-based statements (it locks only the
//! events it takes). On SQLite, whose one writer serves every write, a replay without a key
//! runs in batches of events by id, each its own writer job: 100,000 dead letters took about
//! 4 s in all in a debug build, and a write arriving meanwhile waited one batch (50-170 ms,
//! against 2.4 s as one job; `vow-store-sqlite`'s `source_replay_speed`). A keyed replay is
//! one transaction on both, as its key is claimed in it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{DestinationId, ReplayId, SourceId};

use super::decisions::{Decision, DECIDABLE};
use super::processing::Outcome;
use super::InboundState;
use crate::idempotency::{Applied, Completion};
use crate::StoreResult;

/// Which forwards of a source a replay takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceReplayFilter {
    /// Only events received at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only events received before this time.
    pub until: Option<DateTime<Utc>>,
    /// Only forwards to this destination.
    pub destination: Option<DestinationId>,
}

/// What a replay did (or, for a dry run, would do), in forwards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceReplayed {
    /// Forwards requeued (due now, with fresh attempts for their events).
    pub requeued: u64,
    /// Forwards that match but whose event is being processed: left alone.
    pub skipped: u64,
}

/// Where one replay's forwards stand now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceReplayStats {
    /// Forwarded successfully since.
    pub completed: u64,
    /// Waiting for an attempt (or a retry).
    pub pending: u64,
    /// Their event is being forwarded right now.
    pub processing: u64,
    /// Refused by the destination again (a final 4xx).
    pub rejected: u64,
    /// Out of attempts again.
    pub dead_lettered: u64,
    /// Sent, but whether it took effect is unknown (an operator decides).
    pub uncertain: u64,
}

impl SourceReplayStats {
    /// Counts `n` forwards with `outcome` whose event is `processing` or not.
    pub fn add(&mut self, outcome: Outcome, processing: bool, n: u64) {
        let slot = match outcome {
            Outcome::Retryable if processing => &mut self.processing,
            Outcome::Retryable => &mut self.pending,
            Outcome::Completed => &mut self.completed,
            Outcome::Rejected => &mut self.rejected,
            Outcome::DeadLettered => &mut self.dead_lettered,
            Outcome::Uncertain => &mut self.uncertain,
        };
        *slot += n;
    }
}

/// The outcomes a replay requeues (those of the single-event replay).
pub fn replayed_outcomes() -> &'static [Outcome] {
    Decision::Replay.acts_on()
}

/// The outcome a requeued forward gets, and the state its event gets: a retryable forward
/// outweighs every other outcome, so the aggregate of a replayed event is always this.
pub fn requeued() -> (Outcome, InboundState) {
    let outcome = Decision::Replay.outcome();
    (outcome, outcome.state())
}

/// The event states a replay acts in; a matching forward of an event in another state (being
/// processed) is skipped.
pub fn replayable_states() -> &'static [InboundState] {
    &DECIDABLE
}

/// Bulk replays of a source's dead letters, and their progress.
#[async_trait]
pub trait SourceReplays: Send + Sync + 'static {
    /// Requeues the forwards of `source` that `filter` picks (see the module docs) as replay
    /// `id` at `now`, completing `keyed`'s record in the same transaction.
    async fn replay_source_keyed(
        &self,
        source: SourceId,
        id: ReplayId,
        filter: &SourceReplayFilter,
        now: DateTime<Utc>,
        keyed: Option<Completion<SourceReplayed>>,
    ) -> StoreResult<Applied<SourceReplayed>>;

    /// What [`SourceReplays::replay_source_keyed`] would do now, changing nothing.
    async fn count_source_replay(
        &self,
        source: SourceId,
        filter: &SourceReplayFilter,
    ) -> StoreResult<SourceReplayed>;

    /// Where the forwards of `source` last requeued by replay `id` stand (all zero for an id
    /// that requeued nothing there).
    async fn source_replay_stats(
        &self,
        source: SourceId,
        id: ReplayId,
    ) -> StoreResult<SourceReplayStats>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_requeues_what_the_single_replay_does_and_its_events_are_due() {
        assert_eq!(
            replayed_outcomes(),
            [Outcome::DeadLettered, Outcome::Rejected]
        );
        assert_eq!(requeued(), (Outcome::Retryable, InboundState::Retryable));
        assert!(!replayable_states().contains(&InboundState::Processing));
    }

    #[test]
    fn stats_tell_a_forward_being_sent_from_one_waiting() {
        let mut s = SourceReplayStats::default();
        s.add(Outcome::Retryable, true, 2);
        s.add(Outcome::Retryable, false, 3);
        s.add(Outcome::Completed, false, 4);
        s.add(Outcome::DeadLettered, false, 1);
        assert_eq!(
            (s.processing, s.pending, s.completed, s.dead_lettered),
            (2, 3, 4, 1)
        );
    }
}
