//! `Idempotency-Key` records in the store (ADR 6): the types the [`crate::Store`] methods
//! `begin_idempotent`, `release_idempotent` and `create_message_idempotent` take, re-exported
//! from `vow-idempotency`, and [`Completion`], what a create carries to complete its record in
//! the same transaction.

pub use vow_idempotency::{Begun, Fingerprint, LeaseToken, Scope, Settings, StoredResponse};

use crate::CreatedMessage;

/// Turns the committed create into the response to store and replay.
pub type Render = Box<dyn FnOnce(&CreatedMessage) -> StoredResponse + Send>;

/// What completes an idempotency record in the transaction of the write it protects: the record
/// (its scope and the owner's lease token, checked first) and the response to store.
pub struct Completion {
    /// The record's scope.
    pub scope: Scope,
    /// The owner's lease token, from [`Begun::Owner`].
    pub token: LeaseToken,
    /// Renders the stored response from the write's result, inside the transaction.
    pub render: Render,
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The record settings every store uses (30 s lease, 24 h replay, 7 day tombstones).
pub fn settings() -> Settings {
    Settings::default()
}
