//! [`vow_store::InboundStore`] on PostgreSQL: a claim is one transaction (see `events`), and so is
//! each processing write (see `work`: its functions run in the transaction they are given, here a
//! fresh one, in `crate::idempotency::apply` the keyed API write's); several processes may share
//! the tables.
//!
//! # Layout
//! - `sources`: the `sources` table.
//! - `activity`: a source's activity after a cursor, for `vow tail --source`.
//! - `events`: the claim, `inbound_events` and `inbound_rejections`.
//! - `group_claims`: concurrent claims in one transaction and one commit (the one-claim path of
//!   `events` takes what a batch leaves).
//! - `digests`: the replay guard's `inbound_digests`, consulted by the claim.
//! - `forwards`: `inbound_forwards`, each destination's outcome of an event.
//! - `work`: processing: claims under leases (with the ordering by version kept in
//!   `inbound_entities`), recording outcomes, renewals.
//! - `operators`: operators' decisions (replay, resolve), each destination on its own.
//! - `replays`: bulk replays of a source's dead letters, and their progress.

/// `$body` with `$tx` bound to a fresh transaction of `$store`'s pool, committed when `$body`
/// returns a value (an error returns before the commit, so the transaction rolls back).
macro_rules! in_transaction {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut $tx = $store.pool.begin().await.map_err($crate::error::db_error)?;
        let out = $body;
        $tx.commit().await.map_err($crate::error::db_error)?;
        Ok(out)
    }};
}

pub(crate) mod activity;
pub(crate) mod digests;
pub(crate) mod events;
pub(crate) mod forwards;
pub(crate) mod group_claims;
pub(crate) mod operators;
pub(crate) mod replays;
pub(crate) mod sources;
pub(crate) mod work;
