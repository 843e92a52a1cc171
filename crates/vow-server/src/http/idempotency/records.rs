//! vow's store as the keyed flow's record store ([`Records`]): its `Idempotency-Key` records
//! (`vow_store::IdempotencyRecords`), its clock, the claim of a key inside a keyed write's own
//! transaction (every keyed store method takes a fresh claim), and vow's metrics for what the
//! flow tells.

use chrono::{DateTime, Utc};
use vow_idempotency::http::{Event, RecordStore};
use vow_store::idempotency::StoredResponse;
use vow_store::idempotency::{Begun, Fingerprint, KeyStatus, LeaseToken, Scope, Settings};
use vow_store::StoreError;

use super::respond;
use crate::state::AppState;

/// The records of the handler's state.
pub(super) struct Records<'a>(pub(super) &'a AppState);

impl RecordStore for Records<'_> {
    type Error = StoreError;

    fn is_fenced(error: &StoreError) -> bool {
        matches!(error, StoreError::Fenced)
    }

    /// Every keyed store method claims a fresh key in its own transaction.
    fn claims_in_the_write(&self) -> bool {
        true
    }

    fn now(&self) -> DateTime<Utc> {
        self.0.now()
    }

    async fn begin(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> Result<Begun, StoreError> {
        let store = &self.0.store;
        (store.begin_idempotent(scope, fingerprint, canonical_body, now, settings)).await
    }

    async fn status(
        &self,
        scope: &Scope,
        now: DateTime<Utc>,
    ) -> Result<Option<KeyStatus>, StoreError> {
        self.0.store.idempotency_status(scope, now).await
    }

    async fn complete(
        &self,
        scope: &Scope,
        token: &LeaseToken,
        response: StoredResponse,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> Result<(), StoreError> {
        let store = &self.0.store;
        (store.complete_idempotent(scope, token, response, now, settings)).await
    }

    async fn release(&self, scope: &Scope, token: &LeaseToken) -> Result<bool, StoreError> {
        self.0.store.release_idempotent(scope, token).await
    }

    fn observe(&self, event: Event<'_>) {
        match event {
            Event::Waited => metrics::counter!(crate::metrics::IDEMPOTENT_WAITS).increment(1),
            Event::TookOver => metrics::counter!(crate::metrics::IDEMPOTENT_TAKEOVERS).increment(1),
            Event::Replayed => metrics::counter!(crate::metrics::IDEMPOTENT_REPLAYS).increment(1),
            Event::Refused(problem) => respond::count(problem),
            _ => {}
        }
    }
}
