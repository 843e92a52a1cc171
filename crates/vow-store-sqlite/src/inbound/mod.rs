//! [`vow_store::InboundStore`] on SQLite: every write (a source change, a claim, a rejection, a
//! purge) is one writer job, so one transaction committed before its caller hears back: an
//! acknowledged claim is on disk. Reads run on the read connections.
//!
//! # Layout
//! - `sources`: the `sources` table.
//! - `activity`: a source's activity after a cursor, for `vow tail --source`.
//! - `events`: the claim, `inbound_events` and `inbound_rejections`.
//! - `digests`: the replay guard's `inbound_digests`, consulted by the claim.
//! - `forwards`: `inbound_forwards`, each destination's outcome of an event.
//! - `work`: processing: leases, outcomes per destination, version marks.
//! - `replays`: bulk replays of a source's dead letters, and their progress.

pub(crate) mod activity;
pub(crate) mod digests;
pub(crate) mod events;
pub(crate) mod forwards;
pub(crate) mod replays;
pub(crate) mod sources;
pub(crate) mod work;
