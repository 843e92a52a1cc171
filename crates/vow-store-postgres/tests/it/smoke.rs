//! This backend's own choices, beyond the shared suite: the exact conflict sentences, clocks on
//! update, JSON columns, what a deleted endpoint leaves behind.

use chrono::Duration;
use vow_core::EndpointId;
use vow_store::prelude::*;
use vow_store::{EventType, MessageKey, NewEndpoint, StoreError};

use crate::support::{app, endpoint, endpoint_fields, message, new_app, now, store};

fn conflict(err: StoreError) -> String {
    match err {
        StoreError::Conflict(msg) => msg,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

fn event_type(name: &str) -> EventType {
    EventType {
        name: name.into(),
        description: format!("{name} happened"),
        archived: false,
        deprecated: false,
        feature_flag: Some("beta".into()),
        schemas: Some(serde_json::json!({"1": {"type": "object", "b": 1, "a": [1.5, null]}})),
        created_at: now(),
        updated_at: now(),
    }
}

#[tokio::test]
async fn conflicts_say_in_a_sentence_what_clashed() {
    let store = store().await;
    let taken = store
        .create_application(new_app(Some("acme")))
        .await
        .unwrap();
    let err = store
        .create_application(new_app(Some("acme")))
        .await
        .unwrap_err();
    assert_eq!(conflict(err), "an application with this uid already exists");
    let other = app(&store, None).await;
    let mut fields = other.fields.clone();
    fields.uid = Some("acme".into());
    let err = store
        .update_application(other.id, fields)
        .await
        .unwrap_err();
    assert_eq!(conflict(err), "an application with this uid already exists");

    let mut fields = endpoint_fields("https://example.com/hook");
    fields.uid = Some("main".into());
    endpoint(&store, taken.id, fields.clone()).await;
    let err = store
        .create_endpoint(NewEndpoint {
            id: EndpointId::new(),
            app_id: taken.id,
            fields,
            secret: "whsec_x".into(),
            now: now(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        conflict(err),
        "an endpoint with this uid already exists in this application"
    );

    store.create_event_type(event_type("a.b")).await.unwrap();
    let err = store
        .create_event_type(event_type("a.b"))
        .await
        .unwrap_err();
    assert_eq!(conflict(err), "an event type with this name already exists");

    store
        .create_message(message(taken.id, "t", Some("evt")))
        .await
        .unwrap();
    let err = store
        .create_message(message(taken.id, "t", Some("evt")))
        .await
        .unwrap_err();
    assert_eq!(conflict(err), "a message with this eventId already exists");
}

#[tokio::test]
async fn an_update_never_moves_updated_at_backwards() {
    let store = store().await;
    // Created by a node whose clock is a day ahead of ours.
    let mut new = new_app(None);
    new.now = now() + Duration::days(1);
    let created = store.create_application(new).await.unwrap();
    let mut fields = created.fields.clone();
    fields.name = "Renamed".into();
    let updated = store.update_application(created.id, fields).await.unwrap();
    assert_eq!(updated.fields.name, "Renamed");
    assert_eq!(updated.created_at, created.created_at);
    assert_eq!(updated.updated_at, created.updated_at);

    let ep = endpoint(&store, created.id, endpoint_fields("https://a.example")).await;
    let mut fields = ep.fields.clone();
    fields.disabled = true;
    let updated = store
        .update_endpoint(created.id, ep.id, fields)
        .await
        .unwrap();
    assert!(updated.fields.disabled);
    assert!(updated.updated_at >= ep.updated_at);
}

#[tokio::test]
async fn event_type_schemas_and_flags_round_trip() {
    let store = store().await;
    let created = store.create_event_type(event_type("x")).await.unwrap();
    assert_eq!(created, event_type("x").with_times(&created));
    let mut null_schema = event_type("y");
    null_schema.schemas = Some(serde_json::Value::Null);
    let created = store.create_event_type(null_schema.clone()).await.unwrap();
    assert_eq!(created, null_schema.with_times(&created));
    assert_eq!(store.get_event_type("y").await.unwrap(), Some(created));
}

trait WithTimes {
    fn with_times(self, from: &EventType) -> EventType;
}

impl WithTimes for EventType {
    fn with_times(mut self, from: &EventType) -> EventType {
        self.created_at = from.created_at;
        self.updated_at = from.updated_at;
        self
    }
}

#[tokio::test]
async fn deleting_an_endpoint_keeps_the_message_and_other_deliveries() {
    let store = store().await;
    let a = app(&store, None).await;
    let gone = endpoint(&store, a.id, endpoint_fields("https://gone.example")).await;
    let kept = endpoint(&store, a.id, endpoint_fields("https://kept.example")).await;
    let m = message(a.id, "t", None);
    store.create_message(m.clone()).await.unwrap();
    store.delete_endpoint(a.id, gone.id).await.unwrap();
    let left = store.list_deliveries(a.id, m.id).await.unwrap();
    assert_eq!(
        left.iter().map(|d| d.endpoint_id).collect::<Vec<_>>(),
        [kept.id]
    );
    assert!(store
        .get_message(a.id, &MessageKey::Id(m.id))
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn an_application_without_endpoints_stores_a_message_without_deliveries() {
    let store = store().await;
    let a = app(&store, None).await;
    let created = store
        .create_message(message(a.id, "t", None))
        .await
        .unwrap();
    assert_eq!(created.deliveries, 0);
    assert_eq!(store.backend(), "postgres");
}
