//! Inbound webhooks (issue 5): sources through the API, and `POST /in/...` verifying, claiming,
//! deduplicating and quarantining deliveries, on both stores. Requests are signed the way each
//! provider documents it, with HMAC computed independently of vow-signature; outcomes are
//! counted in the store, not only read from status codes.
//!
//! # Layout
//! - `support`: signing, sending, reading back.
//! - `sources`: the source API.
//! - `ingest`: verification and the claim.
//! - `processing`: forwarding to destinations, outcomes, uncertainty, pull mode, ordering.
//! - `quarantine`: reused ids, operators' decisions, the operational event, retention.
//! - `replays`: the replay guard; replay and resolve per destination.

mod ingest;
mod processing;
mod quarantine;
mod replays;
mod sources;
pub(crate) mod support;
