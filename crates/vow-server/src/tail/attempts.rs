//! Delivery attempts as a feed tails them ([`super::feed::Tailed`]), by attempt id.

use std::sync::Arc;

use vow_core::AttemptId;
use vow_store::queue::{TailFilter, TailedAttempt};
use vow_store::{DeliveryQueue, StoreResult};

use super::feed::Tailed;

/// The attempts `filter` selects.
pub struct Attempts {
    /// Where they are read.
    pub queue: Arc<dyn DeliveryQueue>,
    /// Which.
    pub filter: TailFilter,
}

impl Tailed for Attempts {
    type Row = TailedAttempt;
    type Key = AttemptId;

    fn key(row: &TailedAttempt) -> AttemptId {
        row.id
    }

    async fn page(&self, after: &AttemptId, limit: usize) -> StoreResult<Vec<TailedAttempt>> {
        self.queue.tail_attempts(&self.filter, *after, limit).await
    }
}
