//! Relay endpoints: deliveries to a developer's machine through `vow listen`, with no public URL.
//!
//! A relay endpoint is an ordinary endpoint of its application (fan-out, filters, secrets,
//! retries, dead letters, replay and the console all apply) whose URL is [`RELAY_URL`]. An
//! attempt to it is signed exactly as an HTTP attempt is, but instead of a request it is handed
//! to the `vow listen` connected for that endpoint through this process's [`Hub`]; the listener
//! posts the exact bytes to its local URL and reports the local response, which becomes the
//! attempt's response and is classified by the same policy as any HTTP response.
//!
//! With no listener connected, an attempt waits a little ([`LISTENER_WAIT`]) for one, holding
//! its lease, when one is expected back (it went away in the last minute: it is reconnecting);
//! then the delivery is put back, due again shortly ([`waiting`]), without an attempt row and
//! without spending a retry. The endpoint's backlog stays in the store (only the endpoint's
//! in-flight room waits in memory), so a reconnecting listener gets the waiting deliveries at
//! once. A relay endpoint whose listener is long gone holds no in-flight slot: its deliveries
//! are put back at once, due again in a few seconds ([`RETRY_ABSENT`]), and the process that
//! missed the listener looks again after [`hub::PASS_OVER`] (at once when the listener connects
//! to it). The wait is bounded: a delivery older than [`MAX_WAIT`] that still finds no listener
//! is dead-lettered (replayable like any other).
//!
//! One process holds a listener's connection: in a several-node PostgreSQL deployment an attempt
//! claimed by another node finds no listener there and is put back, and that node passes over
//! the endpoint for a while ([`hub::PASS_OVER`], unless the listener connects to it), so the
//! node that holds the listener takes the delivery when it is due again. An inbound event is
//! claimed whole, for all its destinations, by whichever node comes first: a forward to a relay
//! destination whose listener that node does not hold fails as a refused connection would, and
//! is retried on the event's schedule.
//!
//! # Layout
//! - [`wire`]: what travels over a listener's connection (deliveries down, results up).
//! - [`hub`]: [`Hub`], the connected listeners of this process and the attempts waiting for
//!   their answers.

pub mod expiry;
pub mod hub;
pub mod targets;
pub mod wire;

use std::time::Duration;

use chrono::{DateTime, Utc};
use vow_store::queue::{ClaimedDelivery, NextState};

pub use hub::{Handed, Hub, LISTENER_WAIT};

/// The URL of every relay endpoint: the one endpoint URL that is not `http(s)`.
pub const RELAY_URL: &str = "relay://listen";

/// How soon a delivery that found no listener is due again, when one is expected back soon.
pub const RETRY_WAITING: Duration = Duration::from_secs(1);

/// How soon a delivery that found no listener is due again, when none is expected (it never
/// connected to this process, or left over a minute ago).
pub const RETRY_ABSENT: Duration = Duration::from_secs(5);

/// How old a delivery to a relay endpoint may get while no listener is connected.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// Whether `url` is a relay endpoint's.
pub fn is_relay(url: &str) -> bool {
    url == RELAY_URL
}

/// Where a delivery that found no listener at `now` goes: back to pending, due again after
/// [`RETRY_WAITING`] when a listener is `expected` back soon, else [`RETRY_ABSENT`] (no attempt
/// is recorded, no retry spent), or dead-lettered once it is older than [`MAX_WAIT`].
pub fn waiting(claimed: &ClaimedDelivery, now: DateTime<Utc>, expected: bool) -> NextState {
    let age = now - claimed.delivery.created_at;
    if age > chrono::Duration::from_std(MAX_WAIT).unwrap_or(chrono::Duration::MAX) {
        return NextState::DeadLetter {
            reason: format!(
                "no `vow listen` was connected to this relay endpoint for {} hours",
                MAX_WAIT.as_secs() / 3600
            ),
            disable_endpoint: false,
        };
    }
    let again = if expected {
        RETRY_WAITING
    } else {
        RETRY_ABSENT
    };
    let again = chrono::Duration::from_std(again).unwrap_or_default();
    NextState::RetryAt {
        at: now + again,
        client_errors: claimed.delivery.client_errors,
    }
}
