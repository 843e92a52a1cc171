//! The retry policies, outbound and inbound. Pure functions of their inputs, `now` and an RNG;
//! no IO, clocks or globals.
//!
//! The delivery outcome policy says when a failed webhook attempt is retried, when a delivery is
//! dead-lettered, and when an endpoint is disabled; the inbound forwarding policy ([`next_try`])
//! when an inbound event whose forward failed is due again.
//!
//! A worker makes an attempt, describes it as an [`AttemptResult`], and asks [`decide()`] what to do,
//! passing an [`AttemptContext`] (which attempt this was, and how many earlier ones got a client
//! error), the [`RetrySchedule`] (global, or the endpoint's own), `now` and an RNG for jitter. The
//! answer is a [`Decision`]: delivered, retry at a time, dead-letter (with a
//! [`DeadLetterReason`]), or dead-letter and disable the endpoint (410 Gone). The worker counts the
//! endpoint's consecutive dead-letters and asks [`should_disable`].
//!
//! # Layout
//! - [`schedule`]: [`RetrySchedule`], its string form (`30s,2m,8m`) and serde.
//! - [`delay`]: one delay's text form, and [`equal_jitter`].
//! - [`retry_after`]: reading a `Retry-After` header (delta-seconds or HTTP-date).
//! - [`outcome`]: the input and output types.
//! - [`mod@decide`]: [`decide()`] and [`should_disable`].
//! - [`inbound`]: the inbound forwarding policy, [`next_try`] (when a failed forward is due again).

pub mod decide;
pub mod delay;
pub mod inbound;
pub mod outcome;
pub mod retry_after;
pub mod schedule;

pub use decide::{
    decide, should_disable, DEFAULT_DISABLE_THRESHOLD, MAX_CLIENT_ERROR_RESPONSES, MIN_RETRY_AFTER,
};
pub use delay::{equal_jitter, parse_delay, ItemProblem, MAX_DELAY};
pub use inbound::{next_try, NextTry};
pub use outcome::{AttemptContext, AttemptResult, DeadLetterReason, Decision, Failure};
pub use retry_after::parse_retry_after;
pub use schedule::{RetrySchedule, ScheduleError, MAX_RETRIES};
