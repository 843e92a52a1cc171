//! Inbound webhooks (issue 5): sources through the API, and `POST /in/...` verifying, claiming,
//! deduplicating and quarantining deliveries, on both stores. Requests are signed the way each
//! provider documents it, with HMAC computed independently of vow-signature; outcomes are
//! counted in the store, not only read from status codes.
//!
//! # Layout
//! - `support`: signing, sending, reading back.
//! - `sources`: the source API.
//! - `ingest`: verification and the claim.
//! - `headers`: which provider headers are stored and forwarded.
//! - `processing`: forwarding to destinations, outcomes, uncertainty, pull mode, ordering.
//! - `rejection_log`: the bounded rejection log and its exact counts.
//! - `versions`: ordering by what versions mean.
//! - `quarantine`: reused ids, operators' decisions, the operational event, retention.
//! - `keyed_operations`: `Idempotency-Key` on pull consumers' and operators' operations.
//! - `replays`: the replay guard; replay and resolve per destination.

mod headers;
mod ingest;
mod keyed_operations;
mod processing;
mod quarantine;
mod rejection_log;
mod replays;
mod sources;
pub(crate) mod support;
mod versions;
