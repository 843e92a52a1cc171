//! Shared helpers: fresh stores, raw connections for poking at the server, and model builders.

use chrono::{DateTime, SubsecRound, Utc};
use sqlx::{Connection, PgConnection};
use vow_core::{AppId, EndpointId, MessageId};
pub use vow_pg_testing::server_url;
use vow_store::prelude::*;
use vow_store::{
    Application, ApplicationFields, Endpoint, EndpointFields, NewApplication, NewEndpoint,
    NewMessage,
};
use vow_store_postgres::testing::fresh_store;
use vow_store_postgres::PgStore;

/// Now, at the precision PostgreSQL keeps (microseconds), so round trips compare equal.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// A fresh migrated store.
pub async fn store() -> PgStore {
    fresh_store().await.0
}

/// A raw connection to `url`, for what the store API cannot do (lock a table, kill a backend).
pub async fn raw(url: &str) -> PgConnection {
    PgConnection::connect(url).await.expect("raw connection")
}

/// Waits (up to 20 s) until at least `count` connections wait on locks that `holder` (a backend
/// pid) holds, directly or queued behind another connection that waits for it.
pub async fn blocked_by(watcher: &mut PgConnection, holder: i32, count: i64) {
    let waiting = async {
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "WITH RECURSIVE waiting (pid) AS (
                     SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))
                   UNION
                     SELECT a.pid FROM pg_stat_activity a, waiting w
                     WHERE w.pid = ANY(pg_blocking_pids(a.pid)))
                 SELECT count(*) FROM waiting",
            )
            .bind(holder)
            .fetch_one(&mut *watcher)
            .await
            .unwrap();
            if waiting >= count {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), waiting)
        .await
        .unwrap_or_else(|_| panic!("{count} connection(s) wait behind backend {holder}"));
}

/// A brand-new database with no schema; returns its URL.
pub async fn empty_database() -> String {
    let server = server_url();
    let name = format!(
        "vow_test_empty_{}",
        MessageId::new().to_string()[4..].to_lowercase()
    );
    let mut admin = raw(&server).await;
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut admin)
        .await
        .expect("create database");
    let mut url = url::Url::parse(&server).unwrap();
    url.set_path(&name);
    url.to_string()
}

pub fn new_app(uid: Option<&str>) -> NewApplication {
    NewApplication {
        id: AppId::new(),
        fields: ApplicationFields {
            name: "Acme".into(),
            uid: uid.map(str::to_string),
            throttle_rate: None,
            metadata: Default::default(),
        },
        now: now(),
    }
}

pub async fn app(store: &PgStore, uid: Option<&str>) -> Application {
    store
        .create_application(new_app(uid))
        .await
        .expect("create application")
}

pub fn endpoint_fields(url: &str) -> EndpointFields {
    EndpointFields {
        url: url.into(),
        ..Default::default()
    }
}

pub async fn endpoint(store: &PgStore, app: AppId, fields: EndpointFields) -> Endpoint {
    store
        .create_endpoint(NewEndpoint {
            id: EndpointId::new(),
            app_id: app,
            fields,
            secret: format!("whsec_{}", EndpointId::new()),
            now: now(),
        })
        .await
        .expect("create endpoint")
}

pub fn message(app: AppId, event_type: &str, event_id: Option<&str>) -> NewMessage {
    let now = now();
    NewMessage {
        id: MessageId::new(),
        app_id: app,
        event_id: event_id.map(str::to_string),
        event_type: event_type.into(),
        channels: None,
        payload: r#"{"hello":"world"}"#.into(),
        payload_expires_at: now + chrono::Duration::days(90),
        now,
        traceparent: None,
    }
}
