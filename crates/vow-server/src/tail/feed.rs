//! The polling behind a tail stream: attempts read from the store by a keyset cursor on their
//! ids, every [`POLL`], each sent once.
//!
//! An attempt's id is made when its request finishes and its row lands a moment later (outcomes
//! are written in batches, maybe by another node whose clock differs a little), so a row can
//! land below an id already read: reading only past the last id read would miss it. Each read
//! therefore goes back to [`SETTLE`] before the previous read began, and skips the ids it sent
//! already. An attempt whose row lands more than [`SETTLE`] after its id was made (the store
//! was down, clocks further apart) may be missed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use vow_core::AttemptId;
use vow_store::queue::{TailFilter, TailedAttempt};
use vow_store::{DeliveryQueue, StoreResult};

/// How long a stream waits between reads.
pub const POLL: Duration = Duration::from_millis(400);

/// How far behind the previous read each read starts again.
pub const SETTLE: Duration = Duration::from_secs(3);

/// Attempts per store read; a read pages on until a page is short.
const PAGE: usize = 500;

/// One stream's position in the attempts.
pub struct Feed {
    queue: Arc<dyn DeliveryQueue>,
    filter: TailFilter,
    /// Where the stream starts: nothing at or before it is read.
    start: AttemptId,
    /// Where the next read starts (exclusive).
    from: AttemptId,
    /// The ids sent at or after `from`, which the next read sees again.
    sent: BTreeSet<AttemptId>,
}

impl Feed {
    /// A feed of the attempts `filter` selects after `start`. `resumed`: the last id a client
    /// got before its stream dropped; the feed reads again from [`SETTLE`] before it (never
    /// before `start`), so what landed late meanwhile comes too, and the client skips what it
    /// has.
    pub fn new(
        queue: Arc<dyn DeliveryQueue>,
        filter: TailFilter,
        start: AttemptId,
        resumed: Option<AttemptId>,
    ) -> Self {
        let from = resumed.map_or(start, |last| start.max(settled_before(last.made_at())));
        Self {
            queue,
            filter,
            start,
            from,
            sent: BTreeSet::new(),
        }
    }

    /// The attempts not sent yet, in id order; `now` is when this read began.
    pub async fn read(&mut self, now: DateTime<Utc>) -> StoreResult<Vec<TailedAttempt>> {
        let mut fresh = Vec::new();
        let mut cursor = self.from;
        loop {
            let page = self.queue.tail_attempts(&self.filter, cursor, PAGE).await?;
            let full = page.len() == PAGE;
            if let Some(last) = page.last() {
                cursor = last.id;
            }
            fresh.extend(page.into_iter().filter(|a| !self.sent.contains(&a.id)));
            if !full {
                break;
            }
        }
        self.from = self.start.max(settled_before(now));
        self.sent.extend(fresh.iter().map(|a| a.id));
        self.sent = self.sent.split_off(&self.from);
        Ok(fresh)
    }

    /// Reads every [`POLL`] and streams what each read finds, until the stream is dropped (the
    /// client went away). A failed read is logged and tried again at the next poll.
    pub fn stream(mut self) -> ReceiverStream<TailedAttempt> {
        let (tx, rx) = mpsc::channel(PAGE);
        tokio::spawn(async move {
            loop {
                match self.read(Utc::now()).await {
                    Ok(fresh) => {
                        for attempt in fresh {
                            if tx.send(attempt).await.is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "reading attempts for a tail failed"),
                }
                tokio::select! {
                    () = tx.closed() => return,
                    () = tokio::time::sleep(POLL) => {}
                }
            }
        });
        ReceiverStream::new(rx)
    }
}

/// The cursor below which every row made before `SETTLE` ahead of `time` has landed.
fn settled_before(time: DateTime<Utc>) -> AttemptId {
    let settle = chrono::Duration::from_std(SETTLE).unwrap_or_default();
    AttemptId::first_at(time - settle)
}
