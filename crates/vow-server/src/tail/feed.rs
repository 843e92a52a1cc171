//! The polling behind a tail stream: rows read from the store by a keyset cursor, every
//! [`POLL`], each sent once, whatever is tailed ([`Tailed`]: delivery attempts, a source's
//! activity).
//!
//! A row's key is made when it is written, and the row lands a moment later (attempt outcomes
//! are written in batches, maybe by another node whose clock differs a little), so a row can
//! land below a key already read: reading only past the last key read would miss it. Each read
//! therefore goes back to [`SETTLE`] before the previous read began, and skips the keys it sent
//! already. A row that lands more than [`SETTLE`] after its key was made (the store was down,
//! clocks further apart) may be missed.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use vow_core::AttemptId;
use vow_store::inbound::activity::ActivityKey;
use vow_store::StoreResult;

/// How long a stream waits between reads.
pub const POLL: Duration = Duration::from_millis(400);

/// How far behind the previous read each read starts again.
pub const SETTLE: Duration = Duration::from_secs(3);

/// Rows per store read; a read pages on until a page is short.
const PAGE: usize = 500;

/// A row's place in a tail: ordered as the store reads, made at a time, with a text form
/// (a stream's SSE ids, its `after`).
pub trait Cursor: Ord + Clone + Display + FromStr + Send + Sync + 'static {
    /// The smallest key of a row made at `time`.
    fn first_at(time: DateTime<Utc>) -> Self;
    /// When the row of this key was made.
    fn made_at(&self) -> DateTime<Utc>;
}

impl Cursor for AttemptId {
    fn first_at(time: DateTime<Utc>) -> Self {
        AttemptId::first_at(time)
    }

    fn made_at(&self) -> DateTime<Utc> {
        AttemptId::made_at(self)
    }
}

impl Cursor for ActivityKey {
    fn first_at(time: DateTime<Utc>) -> Self {
        ActivityKey::first_at(time)
    }

    fn made_at(&self) -> DateTime<Utc> {
        self.at
    }
}

/// What a feed reads: rows after a key, in key order.
pub trait Tailed: Send + Sync + 'static {
    /// One row.
    type Row: Send + 'static;
    /// Where a row stands.
    type Key: Cursor;
    /// `row`'s key.
    fn key(row: &Self::Row) -> Self::Key;
    /// At most `limit` rows after `after`, in key order.
    fn page(
        &self,
        after: &Self::Key,
        limit: usize,
    ) -> impl Future<Output = StoreResult<Vec<Self::Row>>> + Send;
}

/// One stream's position in what it tails.
pub struct Feed<T: Tailed> {
    tailed: T,
    /// Where the stream starts: nothing at or before it is read.
    start: T::Key,
    /// Where the next read starts (exclusive).
    from: T::Key,
    /// The keys sent at or after `from`, which the next read sees again.
    sent: BTreeSet<T::Key>,
}

impl<T: Tailed> Feed<T> {
    /// A feed of the rows of `tailed` after `start`. `resumed`: the last key a client got
    /// before its stream dropped; the feed reads again from [`SETTLE`] before it (never before
    /// `start`), so what landed late meanwhile comes too, and the client skips what it has.
    pub fn new(tailed: T, start: T::Key, resumed: Option<T::Key>) -> Self {
        let from = match resumed {
            Some(last) => start.clone().max(settled_before(last.made_at())),
            None => start.clone(),
        };
        Self {
            tailed,
            start,
            from,
            sent: BTreeSet::new(),
        }
    }

    /// The rows not sent yet, in key order; `now` is when this read began.
    pub async fn read(&mut self, now: DateTime<Utc>) -> StoreResult<Vec<T::Row>> {
        let mut fresh = Vec::new();
        let mut cursor = self.from.clone();
        loop {
            let page = self.tailed.page(&cursor, PAGE).await?;
            let full = page.len() == PAGE;
            if let Some(last) = page.last() {
                cursor = T::key(last);
            }
            fresh.extend(page.into_iter().filter(|r| !self.sent.contains(&T::key(r))));
            if !full {
                break;
            }
        }
        self.from = self.start.clone().max(settled_before(now));
        self.sent.extend(fresh.iter().map(T::key));
        self.sent = self.sent.split_off(&self.from);
        Ok(fresh)
    }

    /// Reads every [`POLL`] and streams what each read finds, until the stream is dropped (the
    /// client went away). A failed read is logged and tried again at the next poll.
    pub fn stream(mut self) -> ReceiverStream<T::Row> {
        let (tx, rx) = mpsc::channel(PAGE);
        tokio::spawn(async move {
            loop {
                match self.read(Utc::now()).await {
                    Ok(fresh) => {
                        for row in fresh {
                            if tx.send(row).await.is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "reading the store for a tail failed"),
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
fn settled_before<K: Cursor>(time: DateTime<Utc>) -> K {
    let settle = chrono::Duration::from_std(SETTLE).unwrap_or_default();
    K::first_at(time - settle)
}
