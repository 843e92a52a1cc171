//! The business rules every backend applies, written once as pure functions: the backends keep
//! only the SQL and row mapping around them.
//!
//! - [`supersede`]: which of an entity's due inbound events a claim takes, supersedes or leaves
//!   waiting (supersede-by-version).
//! - [`fan_out`]: which endpoints a new message gets a delivery to, and in which state.
//! - [`dead_letter`]: an endpoint's count of consecutive dead-letters, and when it is disabled.
//! - [`lease`]: leases on claimed work: fresh tokens, when a lease ends, and what settling an
//!   expired inbound lease records.
//! - [`pace`]: pacing an endpoint's sends to its `throttleRate`: the gap between two sends, and
//!   the pace kept in one process.
//! - [`recording`]: what recording an inbound attempt, or settling an expired inbound lease, does
//!   to each destination's outcome and to the event (dead-letters, last error, finality).

pub mod dead_letter;
pub mod fan_out;
pub mod lease;
pub mod pace;
pub mod recording;
pub mod supersede;
