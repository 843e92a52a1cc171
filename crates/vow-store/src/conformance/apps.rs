//! Cases about applications: CRUD, uid uniqueness, cascade on delete, paging.

use vow_core::AppId;

use super::support::*;
use crate::{
    AppKey, ApplicationFields, EndpointKey, MessageFilter, MessageKey, NewApplication, Order, Seek,
    Store,
};

/// An application is read back, equal to what `create_application` returned, by id and by uid.
pub async fn an_application_is_read_back_by_id_and_by_uid(store: &dyn Store) {
    let fields = ApplicationFields {
        name: "Acme Inc.".into(),
        uid: Some("acme".into()),
        throttle_rate: Some(250),
        metadata: map(&[("tier", "gold"), ("région", "eu-west")]),
    };
    let id = AppId::new();
    let created = store
        .create_application(NewApplication {
            id,
            fields: fields.clone(),
            now: t(0),
        })
        .await
        .unwrap();
    assert_eq!(created.id, id);
    assert_eq!(created.fields, fields);
    assert_eq!(created.created_at, t(0));
    assert_eq!(created.updated_at, t(0));

    assert_eq!(get_app(store, id).await, Some(created.clone()));
    let by_uid = store
        .get_application(&AppKey::Uid("acme".into()))
        .await
        .unwrap();
    assert_eq!(by_uid, Some(created.clone()));

    assert_eq!(get_app(store, AppId::new()).await, None);
    let missing = store
        .get_application(&AppKey::Uid("acme2".into()))
        .await
        .unwrap();
    assert_eq!(missing, None);

    // Applications without a uid never clash with each other.
    let a = create_app(store, "no uid 1").await;
    let b = create_app(store, "no uid 2").await;
    assert_eq!(get_app(store, a.id).await.unwrap().fields.uid, None);
    assert_eq!(
        get_app(store, b.id).await.unwrap().fields,
        app_fields("no uid 2")
    );
    assert_eq!(app_ids(store).await.len(), 3);
}

/// `update_application` replaces every field, keeps `created_at`, and moves the uid.
pub async fn updating_an_application_replaces_its_fields(store: &dyn Store) {
    let created = create_app_with(
        store,
        ApplicationFields {
            name: "Old".into(),
            uid: Some("old-uid".into()),
            throttle_rate: Some(10),
            metadata: map(&[("a", "1")]),
        },
    )
    .await;
    let fields = ApplicationFields {
        name: "New".into(),
        uid: Some("new-uid".into()),
        throttle_rate: None,
        metadata: map(&[("b", "2")]),
    };
    let updated = store
        .update_application(created.id, fields.clone())
        .await
        .unwrap();
    assert_eq!(updated.id, created.id);
    assert_eq!(updated.fields, fields);
    assert_eq!(updated.created_at, created.created_at);
    assert!(updated.updated_at >= created.updated_at);
    assert_eq!(get_app(store, created.id).await, Some(updated.clone()));

    let old = store
        .get_application(&AppKey::Uid("old-uid".into()))
        .await
        .unwrap();
    assert_eq!(old, None, "the old uid no longer names it");
    let new = store
        .get_application(&AppKey::Uid("new-uid".into()))
        .await
        .unwrap();
    assert_eq!(new, Some(updated.clone()));

    // Clearing the uid.
    let cleared = store
        .update_application(created.id, app_fields("New"))
        .await
        .unwrap();
    assert_eq!(cleared.fields.uid, None);
    let gone = store
        .get_application(&AppKey::Uid("new-uid".into()))
        .await
        .unwrap();
    assert_eq!(gone, None);
}

/// Deleting an application removes its endpoints, their secrets, its messages and deliveries;
/// another application's rows stay, and the uid is free again.
pub async fn deleting_an_application_removes_everything_under_it(store: &dyn Store) {
    let doomed = create_app_with(
        store,
        ApplicationFields {
            uid: Some("doomed".into()),
            ..app_fields("Doomed")
        },
    )
    .await;
    let kept = create_app(store, "Kept").await;
    let doomed_ep = create_endpoint(store, doomed.id).await;
    let kept_ep = create_endpoint(store, kept.id).await;
    let doomed_msg = store
        .create_message(new_message(doomed.id, "user.created"))
        .await
        .unwrap();
    let kept_msg = store
        .create_message(new_message(kept.id, "user.created"))
        .await
        .unwrap();
    assert_eq!(doomed_msg.deliveries, 1);

    store.delete_application(doomed.id).await.unwrap();

    assert_eq!(get_app(store, doomed.id).await, None);
    let ep = store
        .get_endpoint(doomed.id, &EndpointKey::Id(doomed_ep.id))
        .await
        .unwrap();
    assert_eq!(ep, None);
    let all = Seek::for_iterator(None, Order::Ascending, 100);
    assert!(store
        .list_endpoints(doomed.id, &all)
        .await
        .unwrap()
        .is_empty());
    assert_not_found(
        store.endpoint_secrets(doomed.id, doomed_ep.id, t(1)).await,
        "endpoint",
    );
    let msg = store
        .get_message(doomed.id, &MessageKey::Id(doomed_msg.message.id))
        .await
        .unwrap();
    assert_eq!(msg, None);
    let msgs = store
        .list_messages(doomed.id, &MessageFilter::default(), &all)
        .await
        .unwrap();
    assert!(msgs.is_empty());
    let deliveries = store
        .list_deliveries(doomed.id, doomed_msg.message.id)
        .await
        .unwrap();
    assert!(
        deliveries.is_empty(),
        "deliveries cascade with the application"
    );

    // The other application is untouched.
    assert!(get_app(store, kept.id).await.is_some());
    let ep = store
        .get_endpoint(kept.id, &EndpointKey::Id(kept_ep.id))
        .await
        .unwrap();
    assert_eq!(ep, Some(kept_ep));
    let msg = store
        .get_message(kept.id, &MessageKey::Id(kept_msg.message.id))
        .await
        .unwrap();
    assert_eq!(msg, Some(kept_msg.message.clone()));
    let deliveries = store
        .list_deliveries(kept.id, kept_msg.message.id)
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1);

    assert_not_found(store.delete_application(doomed.id).await, "application");
    // The uid is free again.
    let again = create_app_with(
        store,
        ApplicationFields {
            uid: Some("doomed".into()),
            ..app_fields("Again")
        },
    )
    .await;
    assert_eq!(app_ids(store).await.len(), 2);
    assert_ne!(again.id, doomed.id);
}

/// A taken uid refuses a create (nothing stored) and an update (nothing changed).
pub async fn an_application_uid_conflict_writes_nothing(store: &dyn Store) {
    let with_uid = |uid: &str| ApplicationFields {
        uid: Some(uid.into()),
        ..app_fields("App")
    };
    let first = create_app_with(store, with_uid("taken")).await;
    let refused = AppId::new();
    let r = store
        .create_application(NewApplication {
            id: refused,
            fields: with_uid("taken"),
            now: t(0),
        })
        .await;
    assert_conflict(r, "uid");
    assert_eq!(get_app(store, refused).await, None);
    assert_eq!(app_ids(store).await, vec![first.id.to_string()]);

    let other = create_app_with(store, with_uid("other")).await;
    let r = store.update_application(other.id, with_uid("taken")).await;
    assert_conflict(r, "uid");
    assert_eq!(get_app(store, other.id).await, Some(other));
    let owner = store
        .get_application(&AppKey::Uid("taken".into()))
        .await
        .unwrap();
    assert_eq!(owner.map(|a| a.id), Some(first.id));
}

/// Updating or deleting an application that does not exist is `NotFound` and creates nothing.
pub async fn a_missing_application_is_not_found(store: &dyn Store) {
    let ghost = AppId::new();
    assert_not_found(
        store.update_application(ghost, app_fields("x")).await,
        "application",
    );
    assert_not_found(store.delete_application(ghost).await, "application");
    assert_eq!(get_app(store, ghost).await, None);
    assert!(app_ids(store).await.is_empty());
}

/// Applications page by id in both directions, with no gaps and no repeats.
pub async fn applications_page_through_in_both_directions_without_gaps(store: &dyn Store) {
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(create_app(store, &format!("app {i}")).await.id.to_string());
    }
    ids.sort();
    assert_pages(&ids, |seek| async move {
        let apps = store.list_applications(&seek).await.unwrap();
        apps.iter().map(|a| a.id.to_string()).collect()
    })
    .await;
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_apps {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            an_application_is_read_back_by_id_and_by_uid,
            updating_an_application_replaces_its_fields,
            deleting_an_application_removes_everything_under_it,
            an_application_uid_conflict_writes_nothing,
            a_missing_application_is_not_found,
            applications_page_through_in_both_directions_without_gaps,
        );
    };
}
