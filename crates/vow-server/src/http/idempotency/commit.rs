//! The one write a keyed operation ends in ([`Commit`]): with a key, it completes the record in
//! the same store transaction (claiming it there on the hot path), and says where the record
//! stands afterwards ([`Progress`]). The write is the operation's typed store method, called
//! with the completion to pass on.

use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::response::Response;
use chrono::{DateTime, Utc};
use vow_store::idempotency::{
    Applied, Completion, FreshClaim, LeaseToken, QueuesWork, Render, Scope, Settings,
    StoredResponse,
};
use vow_store::{Store, StoreError, StoreResult};

use super::respond;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Where the owner's record stands after its operation ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Progress {
    /// Not completed: the operation ended before its write committed, or without one.
    Open,
    /// Completed in the write's transaction.
    Completed,
    /// Another request took the record over; this one wrote nothing.
    Fenced,
}

/// The owner's record, as a [`Commit`] completes it.
pub(super) struct Owned {
    pub(super) scope: Scope,
    pub(super) token: LeaseToken,
    pub(super) fresh: Option<FreshClaim>,
    pub(super) now: DateTime<Utc>,
    pub(super) settings: Settings,
    pub(super) progress: Arc<Mutex<Progress>>,
}

/// The one write an operation ends in: with a key, it completes the record in the same store
/// transaction; without one it is the plain write.
pub struct Commit {
    pub(super) state: AppState,
    pub(super) record: Option<Owned>,
}

impl Commit {
    pub(super) fn plain(state: AppState) -> Self {
        Self {
            state,
            record: None,
        }
    }

    /// The handler's state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Runs `write`, the typed store method of one keyed operation, in one store transaction,
    /// with the response `render` makes of its result stored in that transaction when there is
    /// a key, and wakes the delivery workers when the write queued work. `write` gets the store
    /// and the completion to pass on (`None` without a key). Returns the result and the
    /// response to answer.
    pub async fn write<T, W, F>(
        self,
        write: W,
        render: impl FnOnce(&T) -> StoredResponse + Send + 'static,
    ) -> ApiResult<(T, Response)>
    where
        T: QueuesWork + Send + 'static,
        W: FnOnce(Arc<dyn Store>, Option<Completion<T>>) -> F,
        F: Future<Output = StoreResult<Applied<T>>>,
    {
        self.commit(write, Render::From(Box::new(render))).await
    }

    /// [`Commit::write`] for a write whose success answers `response`, rendered before it (a
    /// message create: its row is the request's values). With a key, the store claims the key
    /// with the response, and renders nothing inside the transaction.
    pub async fn write_answering<T, W, F>(
        self,
        write: W,
        response: StoredResponse,
    ) -> ApiResult<(T, Response)>
    where
        T: QueuesWork + Send + 'static,
        W: FnOnce(Arc<dyn Store>, Option<Completion<T>>) -> F,
        F: Future<Output = StoreResult<Applied<T>>>,
    {
        self.commit(write, Render::Ready(response)).await
    }

    async fn commit<T, W, F>(self, write: W, render: Render<T>) -> ApiResult<(T, Response)>
    where
        T: QueuesWork,
        W: FnOnce(Arc<dyn Store>, Option<Completion<T>>) -> F,
        F: Future<Output = StoreResult<Applied<T>>>,
    {
        let store = self.state.store.clone();
        let (value, response) = match self.record {
            None => {
                let (value, _) = write(store, None).await?;
                let response = render.response(&value);
                (value, Some(response))
            }
            Some(owned) => {
                let completion = Completion {
                    scope: owned.scope,
                    token: owned.token,
                    fresh: owned.fresh,
                    now: owned.now,
                    settings: owned.settings,
                    render,
                };
                let applied = write(store, Some(completion)).await;
                let mut progress = owned.progress.lock().unwrap_or_else(|e| e.into_inner());
                match applied {
                    Ok(applied) => {
                        *progress = Progress::Completed;
                        applied
                    }
                    Err(StoreError::Fenced) => {
                        *progress = Progress::Fenced;
                        return Err(ApiError::Internal(Box::new(StoreError::Fenced)));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        if value.queues_work() {
            self.state.wake.notify_one();
        }
        let response = response
            .ok_or_else(|| ApiError::Internal("a keyed write stored no response".into()))?;
        Ok((value, respond::stored(response)))
    }
}
