//! Relay targets in the store: a source's relay destination added for a `vow listen --source`
//! session, and any target (that destination, or an application's relay endpoint) removed when
//! its session ends or expires ([`super::expiry`]).
//!
//! A source's destinations are one field of the source, so adding or removing one rewrites it:
//! this process's edits are serialised, so sessions starting and ending at once lose none
//! (an operator's concurrent edit of the same source may still race, as two edits do today).

use chrono::{DateTime, Utc};
use tokio::sync::Mutex;
use vow_core::{DestinationId, SourceId};
use vow_store::inbound::{Destination, Source};
use vow_store::relay::RelayTarget;
use vow_store::{EndpointKey, InboundStore, Store, StoreError, StoreResult};

use super::{is_relay, RELAY_URL};

/// Serialises this process's edits of sources' destinations.
static EDITS: Mutex<()> = Mutex::const_new(());

/// Adds a relay destination (signed with a new secret) to `source`, unless it has `max`
/// destinations already (`None`), and records it as seen at `now`.
pub async fn add_destination(
    store: &dyn Store,
    inbound: &dyn InboundStore,
    source: &Source,
    max: usize,
    now: DateTime<Utc>,
) -> StoreResult<Option<Destination>> {
    let _edit = EDITS.lock().await;
    let mut fields = current(inbound, source.id).await?.fields;
    if fields.destinations.len() >= max {
        return Ok(None);
    }
    let destination = Destination {
        id: DestinationId::new(),
        url: RELAY_URL.to_owned(),
        secret: crate::secret::generate(),
        idempotent: false,
    };
    // Seen first: a destination the sweep does not know of would never expire.
    let target = RelayTarget::Destination {
        source: source.id,
        id: destination.id,
    };
    store.relays_seen(&[target], now).await?;
    fields.destinations.push(destination.clone());
    inbound.update_source(source.id, fields, now).await?;
    Ok(Some(destination))
}

/// Removes `target` if it is still there and still a relay target; whether it was.
pub async fn remove(
    store: &dyn Store,
    inbound: &dyn InboundStore,
    target: RelayTarget,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    match target {
        RelayTarget::Endpoint { app, id } => {
            let found = store.get_endpoint(app, &EndpointKey::Id(id)).await?;
            if !found.is_some_and(|e| is_relay(&e.fields.url)) {
                return Ok(false);
            }
            match store.delete_endpoint(app, id).await {
                Ok(()) => Ok(true),
                Err(StoreError::NotFound(_)) => Ok(false),
                Err(e) => Err(e),
            }
        }
        RelayTarget::Destination { source, id } => {
            remove_destination(inbound, source, id, now).await
        }
    }
}

async fn remove_destination(
    inbound: &dyn InboundStore,
    source: SourceId,
    id: DestinationId,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let _edit = EDITS.lock().await;
    let Some(found) = inbound.get_source(source).await? else {
        return Ok(false);
    };
    let mut fields = found.fields;
    let before = fields.destinations.len();
    fields
        .destinations
        .retain(|d| !(d.id == id && is_relay(&d.url)));
    if fields.destinations.len() == before {
        return Ok(false);
    }
    match inbound.update_source(source, fields, now).await {
        Ok(_) => Ok(true),
        Err(StoreError::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `source` as stored now.
async fn current(inbound: &dyn InboundStore, source: SourceId) -> StoreResult<Source> {
    inbound
        .get_source(source)
        .await?
        .ok_or_else(|| StoreError::NotFound("source"))
}
