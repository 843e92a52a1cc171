//! The one write a keyed operation ends in ([`Commit`]): with a key, it completes the record in
//! the same store transaction (claiming it there on the hot path), through the operation's
//! typed store method, called with the [`Completion`] to pass on; and how the operation ended,
//! told to the keyed flow ([`owned`]).

use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::response::{IntoResponse, Response};
use vow_idempotency::http::{Ended, Owner};
use vow_store::idempotency::{Applied, Completion, FreshClaim, QueuesWork, Render, StoredResponse};
use vow_store::{Store, StoreError, StoreResult};

#[cfg(feature = "fault-hooks")]
use super::fault;
use super::respond;
use crate::actions::Action;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Where the owner's record stands while and after its operation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// Not completed: the operation ended before its write committed, or without one.
    Open,
    /// The write's fresh claim took an abandoned record over; the write has not committed yet.
    TookOver,
    /// Completed in the write's transaction (whose fresh claim took an abandoned record over,
    /// or not).
    Completed {
        /// Whether it took one over.
        took_over: bool,
    },
    /// The key has another record (or it was taken over); this request wrote nothing.
    Fenced,
}

/// The owner's record, as a [`Commit`] completes it.
struct Owned {
    owner: Owner,
    progress: Arc<Mutex<Progress>>,
}

/// The one write an operation ends in: with a key, it completes the record in the same store
/// transaction; without one it is the plain write.
pub struct Commit {
    state: AppState,
    record: Option<Owned>,
}

/// How the operation ended, for the keyed flow.
type Ending = Ended<ApiResult<Response>, ApiError, StoreError>;

/// Runs `op` as `owner`, the owner of its record, and says how it ended: its write completed
/// the record, found it held (fenced), or never committed; then its answer is final and stored
/// (a success without a write, a 404 or 409 refusal), not final (any other error), or the store
/// failed.
pub(super) async fn owned<F, Fut>(state: &AppState, owner: Owner, op: F) -> Ending
where
    F: FnOnce(Commit) -> Fut,
    Fut: Future<Output = ApiResult<Response>>,
{
    let progress = Arc::new(Mutex::new(Progress::Open));
    let commit = Commit {
        state: state.clone(),
        record: Some(Owned {
            owner,
            progress: progress.clone(),
        }),
    };
    let outcome = op(commit).await;
    let progress = *lock(&progress);
    #[cfg(feature = "fault-hooks")]
    if matches!(progress, Progress::Completed { .. }) && fault::hang_after_commit() {
        // Fault injection for the crash tests: committed, and never answered.
        std::future::pending::<()>().await;
    }
    match (progress, outcome) {
        (Progress::Completed { took_over }, answer) => Ended::Completed { answer, took_over },
        (Progress::Fenced, _) => Ended::Fenced,
        // An answer reached without a write (a refusal, get-if-exists): final, stored.
        (_, Ok(out)) => stored(out).await,
        (_, Err(e @ (ApiError::NotFound(_) | ApiError::Conflict(_)))) => {
            stored(e.into_response()).await
        }
        (_, Err(ApiError::Unavailable(cause))) => Ended::Unavailable(cause),
        (_, Err(e)) => Ended::Failed(e),
    }
}

/// A final answer, to store and send.
async fn stored(out: Response) -> Ending {
    match respond::to_stored(out).await {
        Ok((stored, sent)) => Ended::Final { stored, sent },
        Err(e) => Ended::Failed(e),
    }
}

fn lock(progress: &Mutex<Progress>) -> std::sync::MutexGuard<'_, Progress> {
    progress.lock().unwrap_or_else(|e| e.into_inner())
}

impl Commit {
    /// The plain write of a request without a key.
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

    /// Runs `action` as [`Commit::write`] runs a write: the same transaction whether an API
    /// route or a form asked for it.
    pub async fn act<A: Action>(
        self,
        action: A,
        render: impl FnOnce(&A::Done) -> StoredResponse + Send + 'static,
    ) -> ApiResult<(A::Done, Response)> {
        self.write(|store, keyed| action.write(store, keyed), render)
            .await
    }

    /// Runs `action` as [`Commit::write_answering`] runs a write: answering `response`.
    pub async fn act_answering<A: Action>(
        self,
        action: A,
        response: StoredResponse,
    ) -> ApiResult<(A::Done, Response)> {
        (self.write_answering(|store, keyed| action.write(store, keyed), response)).await
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
            Some(Owned { owner, progress }) => {
                let fresh = owner.fresh.map(|fresh| {
                    let claimed = progress.clone();
                    FreshClaim {
                        fingerprint: fresh.fingerprint,
                        canonical_body: fresh.canonical_body,
                        on_takeover: Some(Box::new(move || *lock(&claimed) = Progress::TookOver)),
                    }
                });
                let completion = Completion {
                    scope: owner.scope,
                    token: owner.token,
                    fresh,
                    now: owner.now,
                    settings: owner.settings,
                    render,
                };
                let applied = write(store, Some(completion)).await;
                let mut progress = lock(&progress);
                let took_over = *progress == Progress::TookOver;
                match applied {
                    Ok(applied) => {
                        *progress = Progress::Completed { took_over };
                        applied
                    }
                    Err(StoreError::Fenced) => {
                        *progress = Progress::Fenced;
                        return Err(ApiError::Internal(Box::new(StoreError::Fenced)));
                    }
                    Err(e) => {
                        // Rolled back, takeover and all.
                        *progress = Progress::Open;
                        return Err(e.into());
                    }
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
