//! Resending one message to one endpoint: a new delivery, due now, whatever became of the
//! earlier ones.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use vow_core::{AppId, EndpointId, MessageId};
use vow_store::idempotency::{Applied, Completion};
use vow_store::{Delivery, Store, StoreResult};

use super::Action;

/// A resend of `msg` to `endpoint`.
#[derive(Debug, Clone, Copy)]
pub struct Resend {
    /// The application.
    pub app: AppId,
    /// The message.
    pub msg: MessageId,
    /// The endpoint.
    pub endpoint: EndpointId,
    /// When the delivery falls due.
    pub now: DateTime<Utc>,
}

impl Action for Resend {
    type Done = Delivery;

    async fn write(
        self,
        store: Arc<dyn Store>,
        keyed: Option<Completion<Delivery>>,
    ) -> StoreResult<Applied<Delivery>> {
        let Resend {
            app,
            msg,
            endpoint,
            now,
        } = self;
        store.resend_keyed(app, msg, endpoint, now, keyed).await
    }
}
