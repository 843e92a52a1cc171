//! The operator actions, each written once and called both by its API route and by the
//! console's and portal's forms: replay and recover ([`replay`]), rotate a secret, send a test
//! event, enable or disable ([`endpoint`]), resend one message ([`resend`]), release or discard
//! a quarantined inbound event ([`inbound`]), replay an inbound source's dead letters
//! ([`source_replay`]).
//!
//! An action is a value holding its checked inputs; [`Action::write`] is its one store
//! transaction. An API route runs it inside its Idempotency-Key flow
//! ([`Commit::act`](crate::http::idempotency::Commit::act)); a form runs it with [`apply`].

pub mod endpoint;
pub mod inbound;
pub mod replay;
pub mod resend;
pub mod source_replay;

use std::future::Future;
use std::sync::Arc;

use vow_store::idempotency::{Applied, Completion, QueuesWork};
use vow_store::{Store, StoreResult};

use crate::error::ApiResult;
use crate::state::AppState;

/// One operator action: its checked inputs, and the write that carries it out.
pub trait Action: Send + Sized + 'static {
    /// What the write returns.
    type Done: QueuesWork + Send + 'static;

    /// The action's one store transaction, completing `keyed`'s record in it when there is one.
    fn write(
        self,
        store: Arc<dyn Store>,
        keyed: Option<Completion<Self::Done>>,
    ) -> impl Future<Output = StoreResult<Applied<Self::Done>>> + Send;
}

/// Runs `action` without an Idempotency-Key (a form's post), and wakes the delivery workers
/// when it queued work.
pub async fn apply<A: Action>(state: &AppState, action: A) -> ApiResult<A::Done> {
    let (done, _) = action.write(state.store.clone(), None).await?;
    if done.queues_work() {
        state.wake.notify_one();
    }
    Ok(done)
}
