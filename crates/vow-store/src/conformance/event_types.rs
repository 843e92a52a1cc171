//! Cases about event types: CRUD, archiving, name uniqueness, expunge, paging by name.

use serde_json::json;

use super::support::*;
use crate::{EventType, Order, Seek, Store};

fn event_type(name: &str) -> EventType {
    EventType {
        name: name.to_string(),
        description: format!("{name} happened"),
        archived: false,
        deprecated: false,
        feature_flag: None,
        schemas: None,
        created_at: t(0),
        updated_at: t(0),
    }
}

async fn names(store: &dyn Store, include_archived: bool) -> Vec<String> {
    let seek = Seek::for_iterator(None, Order::Ascending, 100);
    let all = store
        .list_event_types(&seek, include_archived)
        .await
        .unwrap();
    all.into_iter().map(|e| e.name).collect()
}

/// An event type is read back as created, and an update replaces everything but its name and
/// creation time.
pub async fn an_event_type_is_created_read_back_and_updated(store: &dyn Store) {
    let new = EventType {
        feature_flag: Some("beta".into()),
        schemas: Some(json!({"1": {"type": "object", "properties": {"id": {"type": "string"}}}})),
        ..event_type("user.created")
    };
    let created = store.create_event_type(new.clone()).await.unwrap();
    assert_eq!(created, new);
    let read = store.get_event_type("user.created").await.unwrap();
    assert_eq!(read, Some(new.clone()));
    assert_eq!(store.get_event_type("user.deleted").await.unwrap(), None);

    let change = EventType {
        description: "a user signed up".into(),
        deprecated: true,
        feature_flag: None,
        schemas: Some(json!({"2": {"type": "object"}})),
        created_at: t(999),
        updated_at: t(10),
        ..new.clone()
    };
    let updated = store.update_event_type(change.clone()).await.unwrap();
    let expected = EventType {
        created_at: t(0),
        ..change
    };
    assert_eq!(updated, expected, "createdAt is kept, the rest replaced");
    let read = store.get_event_type("user.created").await.unwrap();
    assert_eq!(read, Some(expected));

    let r = store.update_event_type(event_type("no.such.type")).await;
    assert_not_found(r, "event type");
    assert_eq!(names(store, true).await, vec!["user.created"]);
}

/// Archived event types are listed only when asked, and are still found by name.
pub async fn archived_event_types_are_listed_only_when_asked(store: &dyn Store) {
    store.create_event_type(event_type("a.live")).await.unwrap();
    let archived = EventType {
        archived: true,
        ..event_type("b.archived")
    };
    store.create_event_type(archived.clone()).await.unwrap();
    store.create_event_type(event_type("c.live")).await.unwrap();
    assert_eq!(names(store, false).await, vec!["a.live", "c.live"]);
    assert_eq!(
        names(store, true).await,
        vec!["a.live", "b.archived", "c.live"]
    );
    let read = store.get_event_type("b.archived").await.unwrap();
    assert_eq!(read, Some(archived));

    // Archiving through an update hides it too; unarchiving shows it again.
    let mut c = event_type("c.live");
    c.archived = true;
    store.update_event_type(c.clone()).await.unwrap();
    assert_eq!(names(store, false).await, vec!["a.live"]);
    c.archived = false;
    store.update_event_type(c).await.unwrap();
    assert_eq!(names(store, false).await, vec!["a.live", "c.live"]);
}

/// A taken name (archived or not) refuses a create, and the existing row is unchanged.
pub async fn an_event_type_name_conflict_writes_nothing(store: &dyn Store) {
    let original = store
        .create_event_type(event_type("invoice.paid"))
        .await
        .unwrap();
    let again = EventType {
        description: "a different description".into(),
        ..event_type("invoice.paid")
    };
    assert_conflict(store.create_event_type(again).await, "name");
    let read = store.get_event_type("invoice.paid").await.unwrap();
    assert_eq!(read, Some(original));

    let archived = EventType {
        archived: true,
        ..event_type("old.thing")
    };
    store.create_event_type(archived).await.unwrap();
    assert_conflict(
        store.create_event_type(event_type("old.thing")).await,
        "name",
    );
    let read = store.get_event_type("old.thing").await.unwrap().unwrap();
    assert!(read.archived);
    assert_eq!(names(store, true).await, vec!["invoice.paid", "old.thing"]);
}

/// An expunged event type is gone for good, a second expunge is `NotFound`, the name is free.
pub async fn an_expunged_event_type_is_gone_and_its_name_is_free(store: &dyn Store) {
    store
        .create_event_type(event_type("temp.event"))
        .await
        .unwrap();
    store
        .create_event_type(event_type("kept.event"))
        .await
        .unwrap();
    store.expunge_event_type("temp.event").await.unwrap();
    assert_eq!(store.get_event_type("temp.event").await.unwrap(), None);
    assert_eq!(names(store, true).await, vec!["kept.event"]);
    assert_not_found(store.expunge_event_type("temp.event").await, "event type");
    let reborn = EventType {
        description: "reborn".into(),
        ..event_type("temp.event")
    };
    store.create_event_type(reborn.clone()).await.unwrap();
    assert_eq!(
        store.get_event_type("temp.event").await.unwrap(),
        Some(reborn)
    );
}

/// Event types page by name in both directions, with no gaps and no repeats.
pub async fn event_types_page_through_by_name_in_both_directions(store: &dyn Store) {
    let mut expected = Vec::new();
    for name in [
        "m.one", "a.two", "z.three", "b.four", "k.five", "c.six", "x.seven",
    ] {
        store.create_event_type(event_type(name)).await.unwrap();
        expected.push(name.to_string());
    }
    expected.sort();
    assert_pages(&expected, |seek| async move {
        let page = store.list_event_types(&seek, false).await.unwrap();
        page.into_iter().map(|e| e.name).collect()
    })
    .await;
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_event_types {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            an_event_type_is_created_read_back_and_updated,
            archived_event_types_are_listed_only_when_asked,
            an_event_type_name_conflict_writes_nothing,
            an_expunged_event_type_is_gone_and_its_name_is_free,
            event_types_page_through_by_name_in_both_directions,
        );
    };
}
