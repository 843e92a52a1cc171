//! `vow tail`'s server side: a live stream of delivery attempts, or of an inbound source's
//! activity, read from the store.
//!
//! The stream polls the store ([`feed`]) by a keyset cursor (attempt ids, ULIDs so
//! time-sortable; a source's activity by time and ids), only while a client is connected, so
//! what any vow process sharing the database wrote appears, not only this one's. Each row goes
//! out once as a server-sent event ([`wire`], [`activity`]). The route is `crate::http::api::tail`; the client, `crate::cli::tail`.
//!
//! # Layout
//! - [`feed`]: the polling of anything [`feed::Tailed`], and the settling window that catches
//!   rows committed late.
//! - [`attempts`]: delivery attempts, tailed by id.
//! - [`activity`]: a source's activity (arrivals, forward outcomes, refusals), tailed by
//!   time and ids, and what one of it carries on the wire.
//! - [`wire`]: what one attempt carries, and the event names.

pub mod activity;
pub mod attempts;
pub mod feed;
pub mod wire;
