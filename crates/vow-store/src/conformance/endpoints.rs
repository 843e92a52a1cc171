//! Cases about endpoints: every field round-trips, uid uniqueness per application, tenant
//! isolation, cascade of deliveries, paging, and signing secrets with rotation.

use vow_core::{AppId, EndpointId};

use super::support::*;
use crate::{
    DeliveryOptions, EndpointFields, EndpointKey, EndpointSecret, NewEndpoint, Order, Seek, Store,
};

fn full_fields() -> EndpointFields {
    EndpointFields {
        url: "https://hooks.example.com/vow?x=1".into(),
        uid: Some("primary".into()),
        description: "The main receiver".into(),
        disabled: true,
        event_types: Some(strings(&["user.created", "user.deleted"])),
        channels: Some(strings(&["project_1", "eu"])),
        throttle_rate: Some(7),
        metadata: map(&[("team", "billing"), ("émoji", "✓")]),
        headers: map(&[("X-Custom", "1"), ("Authorization", "Bearer abc")]),
        delivery: DeliveryOptions {
            signature_style: vow_core::SignatureStyle::SeedTimestamped,
            timeout_ms: Some(2_500),
            retry_schedule: Some("1s,2m,1h".parse().expect("a valid schedule")),
        },
    }
}

async fn list_ids(store: &dyn Store, app: AppId) -> Vec<EndpointId> {
    let seek = Seek::for_iterator(None, Order::Ascending, 100);
    let all = store.list_endpoints(app, &seek).await.unwrap();
    all.into_iter().map(|e| e.id).collect()
}

fn secret(key: &str, valid_until: Option<i64>) -> EndpointSecret {
    EndpointSecret {
        key: key.to_string(),
        valid_until: valid_until.map(t),
    }
}

/// Every field of an endpoint round-trips through create, get by id, get by uid and list.
pub async fn an_endpoint_round_trips_every_field(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let created = create_endpoint_with(store, app.id, full_fields()).await;
    assert_eq!(created.app_id, app.id);
    assert_eq!(created.fields, full_fields());
    assert_eq!(created.created_at, t(1));
    assert_eq!(created.updated_at, t(1));

    let by_id = store
        .get_endpoint(app.id, &EndpointKey::Id(created.id))
        .await
        .unwrap();
    assert_eq!(by_id, Some(created.clone()));
    let by_uid = store
        .get_endpoint(app.id, &EndpointKey::Uid("primary".into()))
        .await
        .unwrap();
    assert_eq!(by_uid, Some(created.clone()));

    // The minimal endpoint: no uid, no filters, empty maps.
    let minimal = create_endpoint(store, app.id).await;
    let read = store
        .get_endpoint(app.id, &EndpointKey::Id(minimal.id))
        .await
        .unwrap();
    assert_eq!(read, Some(minimal.clone()));
    assert_eq!(minimal.fields, endpoint_fields("https://example.com/hook"));

    let seek = Seek::for_iterator(None, Order::Ascending, 100);
    let mut listed = store.list_endpoints(app.id, &seek).await.unwrap();
    let mut expected = vec![created, minimal];
    listed.sort_by_key(|e| e.id);
    expected.sort_by_key(|e| e.id);
    assert_eq!(listed, expected);
    let missing = store
        .get_endpoint(app.id, &EndpointKey::Uid("secondary".into()))
        .await
        .unwrap();
    assert_eq!(missing, None);
}

/// `update_endpoint` replaces every field (clearing filters and the uid too) and keeps
/// `created_at`.
pub async fn an_endpoint_update_replaces_every_field(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let created = create_endpoint_with(store, app.id, full_fields()).await;
    let replaced = EndpointFields {
        url: "http://other.example.org/in".into(),
        uid: Some("renamed".into()),
        description: String::new(),
        disabled: false,
        event_types: None,
        channels: Some(strings(&["only-this"])),
        throttle_rate: None,
        metadata: map(&[]),
        headers: map(&[("X-New", "yes")]),
        delivery: DeliveryOptions::default(),
    };
    let updated = store
        .update_endpoint(app.id, created.id, replaced.clone())
        .await
        .unwrap();
    assert_eq!(updated.id, created.id);
    assert_eq!(updated.app_id, app.id);
    assert_eq!(updated.fields, replaced);
    assert_eq!(updated.created_at, created.created_at);
    assert!(updated.updated_at >= created.updated_at);
    let read = store
        .get_endpoint(app.id, &EndpointKey::Id(created.id))
        .await
        .unwrap();
    assert_eq!(read, Some(updated.clone()));
    let old_uid = store
        .get_endpoint(app.id, &EndpointKey::Uid("primary".into()))
        .await
        .unwrap();
    assert_eq!(old_uid, None);

    let cleared = EndpointFields {
        uid: None,
        ..replaced
    };
    let updated = store
        .update_endpoint(app.id, created.id, cleared)
        .await
        .unwrap();
    assert_eq!(updated.fields.uid, None);
    let new_uid = store
        .get_endpoint(app.id, &EndpointKey::Uid("renamed".into()))
        .await
        .unwrap();
    assert_eq!(new_uid, None);
}

/// A uid taken within the application refuses a create (nothing stored) and an update (nothing
/// changed); another application may use the same uid.
pub async fn an_endpoint_uid_conflict_writes_nothing(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let other_app = create_app(store, "Other").await;
    let with_uid = |uid: &str| EndpointFields {
        uid: Some(uid.into()),
        ..endpoint_fields("https://example.com/a")
    };
    let first = create_endpoint_with(store, app.id, with_uid("taken")).await;

    let refused = EndpointId::new();
    let r = store
        .create_endpoint(NewEndpoint {
            id: refused,
            app_id: app.id,
            fields: with_uid("taken"),
            secret: "whsec_c2Vjb25k".into(),
            now: t(2),
        })
        .await;
    assert_conflict(r, "uid");
    assert_eq!(list_ids(store, app.id).await, vec![first.id]);
    let read = store
        .get_endpoint(app.id, &EndpointKey::Id(refused))
        .await
        .unwrap();
    assert_eq!(read, None);
    assert_not_found(
        store.endpoint_secrets(app.id, refused, t(2)).await,
        "endpoint",
    );

    let second = create_endpoint_with(store, app.id, with_uid("second")).await;
    let r = store
        .update_endpoint(app.id, second.id, with_uid("taken"))
        .await;
    assert_conflict(r, "uid");
    let read = store
        .get_endpoint(app.id, &EndpointKey::Id(second.id))
        .await
        .unwrap();
    assert_eq!(read, Some(second));

    // Same uid, another application: fine.
    let elsewhere = create_endpoint_with(store, other_app.id, with_uid("taken")).await;
    let read = store
        .get_endpoint(other_app.id, &EndpointKey::Uid("taken".into()))
        .await
        .unwrap();
    assert_eq!(read.map(|e| e.id), Some(elsewhere.id));
    let read = store
        .get_endpoint(app.id, &EndpointKey::Uid("taken".into()))
        .await
        .unwrap();
    assert_eq!(read.map(|e| e.id), Some(first.id));
}

/// An endpoint of application A is not found through application B, by id or uid, and
/// updates, deletes and secret operations through B are `NotFound` and change nothing.
pub async fn an_endpoint_is_invisible_through_another_application(store: &dyn Store) {
    let a = create_app(store, "A").await;
    let b = create_app(store, "B").await;
    let ep = create_endpoint_with(store, a.id, full_fields()).await;

    let by_id = store
        .get_endpoint(b.id, &EndpointKey::Id(ep.id))
        .await
        .unwrap();
    assert_eq!(by_id, None);
    let by_uid = store
        .get_endpoint(b.id, &EndpointKey::Uid("primary".into()))
        .await
        .unwrap();
    assert_eq!(by_uid, None);
    assert!(list_ids(store, b.id).await.is_empty());

    let r = store
        .update_endpoint(b.id, ep.id, endpoint_fields("https://evil.example.com"))
        .await;
    assert_not_found(r, "endpoint");
    assert_not_found(store.delete_endpoint(b.id, ep.id).await, "endpoint");
    assert_not_found(store.endpoint_secrets(b.id, ep.id, t(1)).await, "endpoint");
    let r = store
        .rotate_endpoint_secret(b.id, ep.id, "whsec_ZXZpbA==".into(), t(100))
        .await;
    assert_not_found(r, "endpoint");

    let read = store
        .get_endpoint(a.id, &EndpointKey::Id(ep.id))
        .await
        .unwrap();
    assert_eq!(read, Some(ep.clone()));
    let secrets = store.endpoint_secrets(a.id, ep.id, t(1)).await.unwrap();
    assert_eq!(secrets.len(), 1, "the rotation through B did not happen");
    assert_eq!(secrets[0].valid_until, None);
}

/// Creating an endpoint for an application that does not exist is `NotFound("application")`.
pub async fn an_endpoint_of_a_missing_application_is_not_found(store: &dyn Store) {
    let ghost = AppId::new();
    let id = EndpointId::new();
    let r = store
        .create_endpoint(NewEndpoint {
            id,
            app_id: ghost,
            fields: endpoint_fields("https://example.com"),
            secret: "whsec_Z2hvc3Q=".into(),
            now: t(1),
        })
        .await;
    assert_not_found(r, "application");
    assert!(list_ids(store, ghost).await.is_empty());
    assert_not_found(store.endpoint_secrets(ghost, id, t(1)).await, "endpoint");
}

/// Deleting an endpoint removes it, its secrets and its deliveries; the message and other
/// endpoints' deliveries stay.
pub async fn deleting_an_endpoint_removes_its_deliveries(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let doomed = create_endpoint(store, app.id).await;
    let kept = create_endpoint(store, app.id).await;
    let msg = store
        .create_message(new_message(app.id, "user.created"))
        .await
        .unwrap();
    assert_eq!(msg.deliveries, 2);

    store.delete_endpoint(app.id, doomed.id).await.unwrap();

    let read = store
        .get_endpoint(app.id, &EndpointKey::Id(doomed.id))
        .await
        .unwrap();
    assert_eq!(read, None);
    assert_eq!(list_ids(store, app.id).await, vec![kept.id]);
    assert_not_found(
        store.endpoint_secrets(app.id, doomed.id, t(1)).await,
        "endpoint",
    );
    let deliveries = store.list_deliveries(app.id, msg.message.id).await.unwrap();
    let targets: Vec<EndpointId> = deliveries.iter().map(|d| d.endpoint_id).collect();
    assert_eq!(targets, vec![kept.id]);
    let read = store
        .get_message(app.id, &crate::MessageKey::Id(msg.message.id))
        .await
        .unwrap();
    assert_eq!(read, Some(msg.message));
    assert_not_found(store.delete_endpoint(app.id, doomed.id).await, "endpoint");
}

/// An application's endpoints page by id in both directions, without gaps, repeats, or
/// another application's endpoints.
pub async fn endpoints_page_through_in_both_directions_without_gaps(store: &dyn Store) {
    let app = create_app(store, "App").await;
    let noise = create_app(store, "Noise").await;
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(create_endpoint(store, app.id).await.id.to_string());
        create_endpoint(store, noise.id).await;
    }
    ids.sort();
    assert_pages(&ids, |seek| async move {
        let page = store.list_endpoints(app.id, &seek).await.unwrap();
        page.iter().map(|e| e.id.to_string()).collect()
    })
    .await;
}

/// The current secret comes first; a rotated-out one stays valid until its deadline and is
/// gone after it; rotated-out ones are listed newest first.
pub async fn the_current_secret_comes_first_and_a_rotated_one_lasts_until_its_deadline(
    store: &dyn Store,
) {
    let app = create_app(store, "App").await;
    let ep = store
        .create_endpoint(NewEndpoint {
            id: EndpointId::new(),
            app_id: app.id,
            fields: endpoint_fields("https://example.com"),
            secret: "whsec_Zmlyc3Q=".into(),
            now: t(1),
        })
        .await
        .unwrap();
    let secrets = |now: i64| store.endpoint_secrets(app.id, ep.id, t(now));
    assert_eq!(
        secrets(10).await.unwrap(),
        vec![secret("whsec_Zmlyc3Q=", None)]
    );

    store
        .rotate_endpoint_secret(app.id, ep.id, "whsec_c2Vjb25k".into(), t(100))
        .await
        .unwrap();
    assert_eq!(
        secrets(50).await.unwrap(),
        vec![
            secret("whsec_c2Vjb25k", None),
            secret("whsec_Zmlyc3Q=", Some(100)),
        ]
    );

    store
        .rotate_endpoint_secret(app.id, ep.id, "whsec_dGhpcmQ=".into(), t(200))
        .await
        .unwrap();
    assert_eq!(
        secrets(50).await.unwrap(),
        vec![
            secret("whsec_dGhpcmQ=", None),
            secret("whsec_c2Vjb25k", Some(200)),
            secret("whsec_Zmlyc3Q=", Some(100)),
        ]
    );
    assert_eq!(
        secrets(150).await.unwrap(),
        vec![
            secret("whsec_dGhpcmQ=", None),
            secret("whsec_c2Vjb25k", Some(200)),
        ],
        "the first secret is gone after its deadline"
    );
    assert_eq!(
        secrets(300).await.unwrap(),
        vec![secret("whsec_dGhpcmQ=", None)]
    );

    let ghost = EndpointId::new();
    assert_not_found(
        store.endpoint_secrets(app.id, ghost, t(1)).await,
        "endpoint",
    );
    let r = store
        .rotate_endpoint_secret(app.id, ghost, "whsec_eA==".into(), t(1))
        .await;
    assert_not_found(r, "endpoint");
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_endpoints {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            an_endpoint_round_trips_every_field,
            an_endpoint_update_replaces_every_field,
            an_endpoint_uid_conflict_writes_nothing,
            an_endpoint_is_invisible_through_another_application,
            an_endpoint_of_a_missing_application_is_not_found,
            deleting_an_endpoint_removes_its_deliveries,
            endpoints_page_through_in_both_directions_without_gaps,
            the_current_secret_comes_first_and_a_rotated_one_lasts_until_its_deadline,
        );
    };
}
