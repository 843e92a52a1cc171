//! The [`Store`] impl of [`PgStore`]: each method hands its pool to the entity module that owns
//! the SQL.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::{AppId, EndpointId, MessageId};
use vow_store::idempotency::{
    Begun, Completion, Fingerprint, KeyStatus, LeaseToken, Scope, Settings, StoredResponse, Write,
    Written,
};
use vow_store::{
    AppKey, Application, ApplicationFields, CreatedMessage, Delivery, Endpoint, EndpointFields,
    EndpointKey, EndpointSecret, EventType, Message, MessageFilter, MessageKey, NewApplication,
    NewEndpoint, NewMessage, Seek, Store, StoreResult,
};

use crate::error::db_error;
use crate::{
    application, delivery, endpoint, event_type, idempotency, message, secret, settings, PgStore,
};

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(db_error)
    }

    async fn init_admin_token_hash(&self, hash: &str) -> StoreResult<String> {
        settings::init_admin_token_hash(&self.pool, hash).await
    }

    async fn admin_token_hash(&self) -> StoreResult<Option<String>> {
        settings::admin_token_hash(&self.pool).await
    }

    async fn create_application(&self, new: NewApplication) -> StoreResult<Application> {
        application::create(&mut *self.conn().await?, new).await
    }

    async fn get_application(&self, key: &AppKey) -> StoreResult<Option<Application>> {
        application::get(&self.pool, key).await
    }

    async fn list_applications(&self, seek: &Seek) -> StoreResult<Vec<Application>> {
        application::list(&self.pool, seek).await
    }

    async fn update_application(
        &self,
        id: AppId,
        fields: ApplicationFields,
    ) -> StoreResult<Application> {
        application::update(&self.pool, id, fields).await
    }

    async fn delete_application(&self, id: AppId) -> StoreResult<()> {
        application::delete(&self.pool, id).await
    }

    async fn create_event_type(&self, new: EventType) -> StoreResult<EventType> {
        event_type::create(&mut *self.conn().await?, new).await
    }

    async fn get_event_type(&self, name: &str) -> StoreResult<Option<EventType>> {
        event_type::get(&self.pool, name).await
    }

    async fn list_event_types(
        &self,
        seek: &Seek,
        include_archived: bool,
    ) -> StoreResult<Vec<EventType>> {
        event_type::list(&self.pool, seek, include_archived).await
    }

    async fn update_event_type(&self, updated: EventType) -> StoreResult<EventType> {
        event_type::update(&mut *self.conn().await?, updated).await
    }

    async fn expunge_event_type(&self, name: &str) -> StoreResult<()> {
        event_type::expunge(&self.pool, name).await
    }

    async fn create_endpoint(&self, new: NewEndpoint) -> StoreResult<Endpoint> {
        endpoint::create(&mut *self.conn().await?, new).await
    }

    async fn get_endpoint(&self, app: AppId, key: &EndpointKey) -> StoreResult<Option<Endpoint>> {
        endpoint::get(&self.pool, app, key).await
    }

    async fn list_endpoints(&self, app: AppId, seek: &Seek) -> StoreResult<Vec<Endpoint>> {
        endpoint::list(&self.pool, app, None, seek).await
    }

    async fn update_endpoint(
        &self,
        app: AppId,
        id: EndpointId,
        fields: EndpointFields,
    ) -> StoreResult<Endpoint> {
        endpoint::update(&self.pool, app, id, fields).await
    }

    async fn delete_endpoint(&self, app: AppId, id: EndpointId) -> StoreResult<()> {
        endpoint::delete(&self.pool, app, id).await
    }

    async fn endpoint_secrets(
        &self,
        app: AppId,
        id: EndpointId,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<EndpointSecret>> {
        secret::valid_at(&self.pool, app, id, now).await
    }

    async fn rotate_endpoint_secret(
        &self,
        app: AppId,
        id: EndpointId,
        new_key: String,
        old_valid_until: DateTime<Utc>,
    ) -> StoreResult<()> {
        let mut conn = self.conn().await?;
        secret::rotate(&mut conn, app, id, new_key, old_valid_until).await
    }

    async fn create_message(&self, new: NewMessage) -> StoreResult<CreatedMessage> {
        let created = message::create(&self.pool, new, None).await?;
        self.notifier.created(&created);
        Ok(created)
    }

    async fn create_message_to_endpoint(
        &self,
        new: NewMessage,
        endpoint: EndpointId,
    ) -> StoreResult<CreatedMessage> {
        let created = message::create(&self.pool, new, Some(endpoint)).await?;
        self.notifier.created(&created);
        Ok(created)
    }

    async fn get_message(&self, app: AppId, key: &MessageKey) -> StoreResult<Option<Message>> {
        message::get(&self.pool, app, key).await
    }

    async fn list_messages(
        &self,
        app: AppId,
        filter: &MessageFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<Message>> {
        message::list(&self.pool, app, filter, None, seek).await
    }

    async fn list_deliveries(&self, app: AppId, msg: MessageId) -> StoreResult<Vec<Delivery>> {
        delivery::list_for_message(&self.pool, app, msg).await
    }

    async fn begin_idempotent(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        canonical_body: &str,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<Begun> {
        idempotency::begin(
            &self.pool,
            scope,
            fingerprint,
            canonical_body,
            now,
            settings,
        )
        .await
    }

    async fn release_idempotent(&self, scope: &Scope, token: &LeaseToken) -> StoreResult<bool> {
        idempotency::release(&self.pool, scope, token).await
    }

    async fn purge_idempotent(&self, now: DateTime<Utc>, batch: usize) -> StoreResult<usize> {
        idempotency::purge(&self.pool, now, batch).await
    }

    async fn complete_idempotent(
        &self,
        scope: &Scope,
        token: &LeaseToken,
        response: StoredResponse,
        now: DateTime<Utc>,
        settings: &Settings,
    ) -> StoreResult<()> {
        idempotency::complete(&self.pool, scope, token, &response, now, settings).await
    }

    async fn apply(
        &self,
        write: Write,
        completion: Option<Completion>,
    ) -> StoreResult<(Written, Option<StoredResponse>)> {
        let (written, response) = idempotency::apply(&self.pool, write, completion).await?;
        self.notifier.written(&written);
        Ok((written, response))
    }

    async fn idempotency_status(
        &self,
        scope: &Scope,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<KeyStatus>> {
        idempotency::status(&self.pool, scope, now).await
    }

    async fn oldest_idempotent_claim(
        &self,
        settings: &Settings,
    ) -> StoreResult<Option<DateTime<Utc>>> {
        idempotency::oldest_claim(&self.pool, settings).await
    }
}
