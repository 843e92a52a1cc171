//! The one write a keyed operation ends in ([`Commit`]): with a key, it completes the record in
//! the same store transaction (claiming it there on the hot path), and says where the record
//! stands afterwards ([`Progress`]); [`Produced`] picks a write's result out of [`Written`].

use std::sync::{Arc, Mutex};

use axum::response::Response;
use chrono::{DateTime, Utc};
use vow_store::idempotency::{
    Completion, FreshClaim, LeaseToken, Render, Scope, Settings, StoredResponse, Write, Written,
};
use vow_store::inbound::decisions::Decided;
use vow_store::inbound::processing::WorkClaim;
use vow_store::inbound::{InboundEvent, Source};
use vow_store::{Application, CreatedMessage, Delivery, Endpoint, EventType, StoreError};

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

    /// Runs `write` in one store transaction, with the response `render` makes of its result
    /// stored in that transaction when there is a key, and wakes the delivery workers when the
    /// write queued work. Returns the result and the response to answer.
    pub async fn write<T: Produced>(
        self,
        write: Write,
        render: impl FnOnce(&T) -> StoredResponse + Send + 'static,
    ) -> ApiResult<(T, Response)> {
        let render = Render::From(Box::new(move |written: &Written| match T::view(written) {
            Some(value) => render(value),
            None => mismatch(written),
        }));
        self.commit(write, render).await
    }

    /// [`Commit::write`] for a write whose success answers `response`, rendered before it (a
    /// message create: its row is the request's values). With a key, the store claims the key
    /// with the response, and renders nothing inside the transaction.
    pub async fn write_answering<T: Produced>(
        self,
        write: Write,
        response: StoredResponse,
    ) -> ApiResult<(T, Response)> {
        self.commit(write, Render::Ready(response)).await
    }

    async fn commit<T: Produced>(self, write: Write, render: Render) -> ApiResult<(T, Response)> {
        let store = &self.state.store;
        let (written, response) = match self.record {
            None => {
                let (written, _) = store.apply(write, None).await?;
                let response = render.response(&written);
                (written, Some(response))
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
                let applied = store.apply(write, Some(completion)).await;
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
        if written.queues_work() {
            self.state.wake.notify_one();
        }
        let response = response.ok_or_else(|| mismatch_error(&written))?;
        let value = T::take(written).ok_or_else(|| ApiError::Internal("write mismatch".into()))?;
        Ok((value, respond::stored(response)))
    }
}

/// What a [`Write`] produces, taken out of [`Written`] by type.
pub trait Produced: Sized + Send + 'static {
    /// The value, if `written` holds one of this type.
    fn view(written: &Written) -> Option<&Self>;
    /// The value, owned.
    fn take(written: Written) -> Option<Self>;
}

macro_rules! produced {
    ($($type:ty => $variant:ident),* $(,)?) => {$(
        impl Produced for $type {
            fn view(written: &Written) -> Option<&Self> {
                match written {
                    Written::$variant(value) => Some(value),
                    _ => None,
                }
            }
            fn take(written: Written) -> Option<Self> {
                match written {
                    Written::$variant(value) => Some(value),
                    _ => None,
                }
            }
        }
    )*};
}

produced!(
    Application => Application,
    EventType => EventType,
    Endpoint => Endpoint,
    CreatedMessage => Message,
    Delivery => Resent,
    u64 => Replayed,
    Source => Source,
    WorkClaim => InboundClaimed,
    InboundEvent => InboundEvent,
    Decided => Decided,
);

impl Produced for () {
    fn view(written: &Written) -> Option<&Self> {
        matches!(written, Written::SecretRotated).then_some(&())
    }
    fn take(written: Written) -> Option<Self> {
        matches!(written, Written::SecretRotated).then_some(())
    }
}

/// A handler asked for another result than its write produces: a bug, answered 500.
fn mismatch(written: &Written) -> StoredResponse {
    tracing::error!(
        ?written,
        "a write produced another result than its handler renders"
    );
    StoredResponse {
        status: 500,
        headers: Vec::new(),
        body: Vec::new(),
        resource: None,
    }
}

fn mismatch_error(written: &Written) -> ApiError {
    ApiError::Internal(format!("a write produced {written:?}, not what its handler renders").into())
}
