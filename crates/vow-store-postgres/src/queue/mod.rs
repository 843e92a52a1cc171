//! The [`vow_store::DeliveryQueue`] traits of [`crate::PgStore`], one module each: the store is
//! the queue.
//!
//! Several processes share one database, so every promise of the trait holds across pools:
//! - a claim is one statement (`FOR UPDATE SKIP LOCKED` picks due, un-leased rows nobody else is
//!   claiming, and the same statement stamps them with a fresh lease token), so two claims never
//!   return one delivery;
//! - a record locks the deliveries it names first and writes an outcome only while its lease token
//!   still matches (fencing), all outcomes of a batch in one transaction;
//! - the endpoint's consecutive dead-letter count is read and written under a row lock, so two
//!   processes dead-lettering at once count both.
//!
//! # Layout
//! - `claim`: claiming, lease renewal and `next_due`.
//! - `floors`: where a claim's walk over an endpoint's pending rows starts.
//! - `pace`: the send slots of throttled endpoints, shared by every process.
//! - `activity`: the delivery activity per minute that recording adds to (the Overview's).
//! - `record`: recording outcomes, dead-letter counting and auto-disabling.
//! - `attempt`: the attempt rows: listing, reading, expunging one.
//! - `operator`: resend, replay and endpoint statistics.
//! - `retention`: expunging a message's content and purging expired content.
//! - `attempted`: attempted destinations of a message, attempted messages of an endpoint.

pub(crate) mod activity;
mod attempt;
mod attempted;
pub(crate) mod claim;
pub(crate) mod floors;
pub(crate) mod operator;
mod pace;
mod record;
mod retention;
