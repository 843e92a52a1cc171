//! When each relay target (a `vow listen` session: a relay endpoint of an application, or a
//! relay destination of an inbound source) last had its listener connected, durably, so any
//! node can expire the ones whose listener is gone, whichever node held it.
//!
//! The node a listener is connected to renews its `seen_at` ([`RelayListeners::relays_seen`]);
//! every node takes the targets not seen since a cut-off ([`RelayListeners::take_stale_relays`]),
//! each exactly once (the record is removed as it is taken), and deletes them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{AppId, DestinationId, EndpointId, SourceId};

use crate::StoreResult;

/// A `vow listen` session's target, with what it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RelayTarget {
    /// A relay endpoint of an application.
    Endpoint {
        /// Its application.
        app: AppId,
        /// The endpoint.
        id: EndpointId,
    },
    /// A relay destination of an inbound source.
    Destination {
        /// Its source.
        source: SourceId,
        /// The destination.
        id: DestinationId,
    },
}

impl RelayTarget {
    /// The stored kind: `endpoint` or `destination`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Endpoint { .. } => "endpoint",
            Self::Destination { .. } => "destination",
        }
    }

    /// The owner's id (application or source), as stored.
    pub fn owner(&self) -> String {
        match self {
            Self::Endpoint { app, .. } => app.to_string(),
            Self::Destination { source, .. } => source.to_string(),
        }
    }

    /// The target's own id, as stored.
    pub fn id(&self) -> String {
        match self {
            Self::Endpoint { id, .. } => id.to_string(),
            Self::Destination { id, .. } => id.to_string(),
        }
    }

    /// The target a stored `(kind, owner, id)` names; `None` for a row this version cannot read.
    pub fn parse(kind: &str, owner: &str, id: &str) -> Option<Self> {
        match kind {
            "endpoint" => Some(Self::Endpoint {
                app: owner.parse().ok()?,
                id: id.parse().ok()?,
            }),
            "destination" => Some(Self::Destination {
                source: owner.parse().ok()?,
                id: id.parse().ok()?,
            }),
            _ => None,
        }
    }
}

/// The last time each relay target's listener was connected.
#[async_trait]
pub trait RelayListeners: Send + Sync + 'static {
    /// Records that `targets` were connected (or created) at `now`, adding the ones not
    /// recorded yet.
    async fn relays_seen(&self, targets: &[RelayTarget], now: DateTime<Utc>) -> StoreResult<()>;

    /// Takes up to `batch` targets last seen before `before`: their records are removed, so
    /// of several nodes taking at once each target goes to one.
    async fn take_stale_relays(
        &self,
        before: DateTime<Utc>,
        batch: usize,
    ) -> StoreResult<Vec<RelayTarget>>;
}
