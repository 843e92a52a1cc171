//! Cases about console sessions and app-portal tokens ([`crate::Sessions`]).

use vow_core::AppId;

use super::support::{create_app, t};
use crate::session::{Session, SessionScope};
use crate::{Store, StoreError};

fn session(id_hash: &str, scope: SessionScope, expires_in: i64) -> Session {
    Session {
        id_hash: id_hash.to_string(),
        scope,
        csrf: format!("csrf-{id_hash}"),
        created_at: t(0),
        expires_at: t(expires_in),
        read_only: false,
    }
}

/// A session reads back whole until it expires, then reads as absent; ending it removes it.
pub async fn a_session_reads_back_until_it_expires_or_ends(store: &dyn Store) {
    let stored = store
        .create_session(session("h1", SessionScope::Console, 60))
        .await
        .unwrap();
    assert_eq!(stored, session("h1", SessionScope::Console, 60));
    assert_eq!(store.session("h1", t(59)).await.unwrap(), Some(stored));
    assert_eq!(store.session("h1", t(60)).await.unwrap(), None, "expired");
    assert_eq!(store.session("other", t(1)).await.unwrap(), None);
    assert!(store.end_session("h1").await.unwrap());
    assert!(!store.end_session("h1").await.unwrap(), "already ended");
    assert_eq!(store.session("h1", t(1)).await.unwrap(), None);
}

/// A portal session names its application; one for a missing application is refused and
/// nothing is stored; deleting the application ends its sessions.
pub async fn a_portal_session_belongs_to_its_application(store: &dyn Store) {
    let app = create_app(store, "portal").await;
    let scope = SessionScope::Portal(app.id);
    let stored = store
        .create_session(session("p1", scope, 60))
        .await
        .unwrap();
    assert_eq!(store.session("p1", t(1)).await.unwrap(), Some(stored));

    let missing = SessionScope::Portal(AppId::new());
    let err = store
        .create_session(session("p2", missing, 60))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::NotFound("application")),
        "{err:?}"
    );
    assert_eq!(store.session("p2", t(1)).await.unwrap(), None);

    store.delete_application(app.id).await.unwrap();
    assert_eq!(store.session("p1", t(1)).await.unwrap(), None);
}

/// A portal session may be read-only, and reads back so; a console session may not be.
pub async fn only_a_portal_session_may_be_read_only(store: &dyn Store) {
    let app = create_app(store, "read-only").await;
    let read_only = Session {
        read_only: true,
        ..session("ro", SessionScope::Portal(app.id), 60)
    };
    let stored = store.create_session(read_only.clone()).await.unwrap();
    assert_eq!(stored, read_only);
    let back = store.session("ro", t(1)).await.unwrap().expect("stored");
    assert!(back.read_only, "{back:?}");
    let writer = store
        .create_session(session("rw", SessionScope::Portal(app.id), 60))
        .await
        .unwrap();
    assert!(!writer.read_only);
    assert!(!store.session("rw", t(1)).await.unwrap().unwrap().read_only);

    let console = Session {
        read_only: true,
        ..session("c1", SessionScope::Console, 60)
    };
    store.create_session(console).await.unwrap_err();
    assert_eq!(
        store.session("c1", t(1)).await.unwrap(),
        None,
        "nothing stored"
    );
}

/// Purging deletes only expired sessions, at most a batch at a time.
pub async fn purging_sessions_deletes_only_expired_ones_in_batches(store: &dyn Store) {
    for (i, expires_in) in [10, 20, 30, 100].into_iter().enumerate() {
        store
            .create_session(session(&format!("s{i}"), SessionScope::Console, expires_in))
            .await
            .unwrap();
    }
    assert_eq!(store.purge_sessions(t(50), 2).await.unwrap(), 2);
    assert_eq!(store.purge_sessions(t(50), 2).await.unwrap(), 1);
    assert_eq!(store.purge_sessions(t(50), 2).await.unwrap(), 0);
    assert!(store.session("s3", t(50)).await.unwrap().is_some());
    assert_eq!(store.session("s0", t(0)).await.unwrap(), None, "purged");
}

/// This module's cases, which [`conformance_suite!`](crate::conformance_suite) runs: a case
/// added to this module is listed here, and nowhere else.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases_sessions {
    ($make:expr) => {
        $crate::conformance_suite!(@cases ($make)
            a_session_reads_back_until_it_expires_or_ends,
            a_portal_session_belongs_to_its_application,
            only_a_portal_session_may_be_read_only,
            purging_sessions_deletes_only_expired_ones_in_batches,
        );
    };
}
