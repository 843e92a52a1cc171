//! [`Stores`]: the one backend a process runs on, seen through each of its traits, with the
//! wake-ups of its workers. Below start-up and the workers that are handed it (the cleaner).

use std::sync::Arc;

use tokio::sync::Notify;
use vow_store::{DeliveryQueue, InboundStore, Store};

/// One backend, seen through each of its traits.
#[derive(Clone)]
pub struct Stores {
    /// Everything the API reads and writes.
    pub store: Arc<dyn Store>,
    /// The delivery queue.
    pub queue: Arc<dyn DeliveryQueue>,
    /// Inbound sources and events.
    pub inbound: Arc<dyn InboundStore>,
    /// Notified whenever delivery work may have become due (by this process or, on
    /// PostgreSQL, by any process).
    pub wake: Arc<Notify>,
    /// Notified whenever an inbound event became due to be forwarded by this process.
    pub inbound_wake: Arc<Notify>,
}

impl Stores {
    /// Wraps a backend.
    pub fn new<S: Store>(backend: S) -> Self {
        Self::from_arc(Arc::new(backend))
    }

    /// Wraps a backend the caller keeps a handle to too (a test that reaches behind the
    /// traits).
    pub fn from_arc<S: Store>(backend: Arc<S>) -> Self {
        Self {
            store: backend.clone(),
            queue: backend.clone(),
            inbound: backend,
            wake: Arc::new(Notify::new()),
            inbound_wake: Arc::new(Notify::new()),
        }
    }
}
