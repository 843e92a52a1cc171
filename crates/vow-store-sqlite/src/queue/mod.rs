//! [`vow_store::DeliveryQueue`] on SQLite (one trait per module): every method that changes state
//! is one writer job (so one transaction, and serialised with every other write: two claims can
//! never overlap); listings, stats and `next_due` run on the read connections.
//!
//! # Layout
//! - `claim`: claiming with leases, renewing them, `next_due`.
//! - `activity`: the delivery activity per minute that recording adds to (the Overview's).
//! - `record`: recording outcomes (fencing by lease token, auto-disabling endpoints).
//! - `attempt`: the attempts log.
//! - `retention`: expunging content, and retention's purges (expired content, old messages).
//! - `operator`: resend, replay, endpoint stats.
//! - `attempted`: attempted destinations of a message, attempted messages of an endpoint.

pub(crate) mod activity;
mod attempt;
mod attempted;
pub(crate) mod claim;
pub(crate) mod operator;
mod record;
mod retention;
