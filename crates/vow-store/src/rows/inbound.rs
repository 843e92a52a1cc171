//! The inbound models as rows: sources, events (with their content), rejections and their
//! counts, and forwards.

use vow_core::DestinationId;

use super::read::{Columns, FromColumns, Reader};
use crate::inbound::activity::ForwardActivity;
use crate::inbound::processing::{Forward, Outcome};
use crate::inbound::{
    InboundContent, InboundEvent, InboundState, Rejection, RejectionCount, Source, SourceFields,
};

/// The stored destination of a pull consumer's outcome (`inbound_forwards.destination`).
pub const PULL: &str = "pull";

/// A destination as stored: its id, or [`PULL`].
pub fn destination_key(destination: Option<&DestinationId>) -> String {
    destination.map_or_else(|| PULL.to_string(), ToString::to_string)
}

/// A source's replaceable columns, in the order of [`SourceFields`]' fields: what a create
/// inserts and an update sets (both backends bind the values in this order).
pub const SOURCE_FIELDS: [&str; 11] = [
    "description",
    "scheme",
    "hmac",
    "secrets",
    "tolerance_secs",
    "event_id",
    "account",
    "version_pointer",
    "entity_pointer",
    "destinations",
    "replay_window_secs",
];

impl FromColumns for Source {
    const COLUMNS: &'static str = "id, token, description, scheme, hmac, secrets, \
                                  tolerance_secs, replay_window_secs, event_id, account, \
                                  version_pointer, entity_pointer, destinations, created_at, \
                                  updated_at";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(Source {
            id: r.parse()?,
            token: r.text()?,
            fields: SourceFields {
                description: r.text()?,
                scheme: r.text()?,
                hmac: r.opt_json()?,
                secrets: r.json()?,
                tolerance_secs: r.int()?,
                replay_window_secs: r.opt_int()?,
                event_id: r.opt_json()?,
                account: r.opt_json()?,
                version_pointer: r.opt_text()?,
                entity_pointer: r.opt_text()?,
                destinations: r.json()?,
            },
            created_at: r.time()?,
            updated_at: r.time()?,
        })
    }
}

impl FromColumns for InboundEvent {
    const COLUMNS: &'static str = "id, source_id, account, event_id, state, conflicts_with, \
                                  sha256, size, duplicates, version, entity, received_at, \
                                  updated_at, attempts, next_attempt_at, last_error";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(InboundEvent {
            id: r.parse()?,
            source_id: r.parse()?,
            account: r.text()?,
            event_id: r.opt_text()?,
            state: r.named(InboundState::parse)?,
            conflicts_with: r.opt_parse()?,
            sha256: r.text()?,
            size: r.int()?,
            duplicates: r.int()?,
            version: r.opt_text()?,
            entity: r.opt_text()?,
            received_at: r.time()?,
            updated_at: r.time()?,
            attempts: r.int()?,
            next_attempt_at: r.opt_time()?,
            last_error: r.opt_text()?,
        })
    }
}

/// An event and its content, from the event's columns then `headers, payload` (`SELECT
/// {COLUMNS}, headers, payload`); the content is `None` once retention removed it.
pub fn event_with_content<C: Columns + ?Sized>(
    row: &C,
) -> Result<(InboundEvent, Option<InboundContent>), C::Error> {
    let mut r = Reader::new(row);
    let event = r.take()?;
    let headers: Option<Vec<(String, String)>> = r.opt_json()?;
    let content = r.opt_bytes()?.map(|payload| InboundContent {
        headers: headers.unwrap_or_default(),
        payload,
    });
    Ok((event, content))
}

impl FromColumns for Rejection {
    const COLUMNS: &'static str = "id, source_id, reason, status, body_size, received_at";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(Rejection {
            id: r.parse()?,
            source_id: r.parse()?,
            reason: r.text()?,
            status: r.int()?,
            body_size: r.int()?,
            now: r.time()?,
        })
    }
}

impl FromColumns for RejectionCount {
    const COLUMNS: &'static str = "reason, count, first_at, last_at";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(RejectionCount {
            reason: r.text()?,
            count: r.int()?,
            first_at: r.time()?,
            last_at: r.time()?,
        })
    }
}

impl FromColumns for Forward {
    const COLUMNS: &'static str = "destination, outcome, attempts, status, error, updated_at";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        let destination = match r.text()? {
            key if key == PULL => None,
            key => Some(key.parse().map_err(|e| r.corrupt(r.at() - 1, e))?),
        };
        Ok(Forward {
            destination,
            outcome: r.named(Outcome::parse)?,
            attempts: r.int()?,
            status: r.opt_int()?,
            error: r.opt_text()?,
            updated_at: r.time()?,
        })
    }
}

impl FromColumns for ForwardActivity {
    /// From `inbound_forwards f JOIN inbound_events e ON e.id = f.event_id`.
    const COLUMNS: &'static str = "f.destination, f.outcome, f.attempts, f.status, f.error, \
                                  f.updated_at, f.event_id, e.event_id";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        Ok(ForwardActivity {
            forward: r.take()?,
            event: r.parse()?,
            provider_event_id: r.opt_text()?,
        })
    }
}
