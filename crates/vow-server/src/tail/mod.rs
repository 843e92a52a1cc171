//! `vow tail`'s server side: a live stream of delivery attempts, read from the store.
//!
//! The stream polls the store ([`feed`]) by a keyset cursor on attempt ids (ULIDs, so
//! time-sortable), only while a client is connected, so an attempt any vow process sharing the
//! database made appears, not only this one's. Each attempt goes out once as a server-sent
//! event ([`wire`]). The route is `crate::http::api::tail`; the client, `crate::cli::tail`.
//!
//! # Layout
//! - [`feed`]: the polling, and the settling window that catches attempts committed late.
//! - [`wire`]: what one event carries, and the event names.

pub mod feed;
pub mod wire;
