//! The app portal's API side: issuing a token (stored by its hash only), where the token
//! reaches (its own application; another application is a 404 like a missing one; anything else
//! a 403), read-only tokens, expiry and logout. Each case runs on SQLite and on PostgreSQL, and
//! counts stored rows rather than trusting status codes.

use std::path::PathBuf;

use chrono::Duration;
use reqwest::Method;
use serde_json::{json, Value};
use sqlx::Connection;
use vow_core::AppId;
use vow_server::auth::TokenHash;
use vow_server::startup::Stores;
use vow_server::Config;
use vow_store::session::{Session, SessionScope};
use vow_store::{AppKey, MessageFilter, Order, Seek};

use crate::helpers::{into_parts, test_config, test_config_toml, Backend, TestApp};

/// A server with `config` on a fresh store, and the store's rows, read with SQL of the test's own.
async fn spawn(backend: Backend, config: Config) -> (TestApp, Rows) {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("vow.db");
            let store = vow_store_sqlite::SqliteStore::open(&path).unwrap();
            let app = TestApp::spawn_on(backend, config, Stores::new(store), Box::new(dir)).await;
            (app, Rows::Sqlite(path))
        }
        Backend::Postgres => {
            let (store, url) = vow_store_postgres::testing::fresh_store().await;
            let app = TestApp::spawn_on(backend, config, Stores::new(store), Box::new(())).await;
            (app, Rows::Postgres(url))
        }
    }
}

/// Where a test's store keeps its rows.
enum Rows {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Rows {
    /// Every row of every table, as text, one row a line.
    async fn everything(&self) -> String {
        match self {
            Rows::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).unwrap();
                let tables: Vec<String> = conn
                    .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")
                    .unwrap()
                    .query_map([], |r| r.get(0))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                let mut all = String::new();
                for table in tables {
                    let mut stmt = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
                    let width = stmt.column_count();
                    let mut rows = stmt.query([]).unwrap();
                    while let Some(row) = rows.next().unwrap() {
                        for i in 0..width {
                            let cell = match row.get_ref(i).unwrap() {
                                rusqlite::types::ValueRef::Text(t)
                                | rusqlite::types::ValueRef::Blob(t) => {
                                    String::from_utf8_lossy(t).into_owned()
                                }
                                other => format!("{other:?}"),
                            };
                            all.push_str(&cell);
                            all.push('|');
                        }
                        all.push('\n');
                    }
                }
                all
            }
            Rows::Postgres(url) => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                let tables: Vec<String> = sqlx::query_scalar(
                    "SELECT table_name::text FROM information_schema.tables
                     WHERE table_schema = current_schema()",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap();
                let mut all = String::new();
                for table in tables {
                    let rows: Vec<String> =
                        sqlx::query_scalar(&format!("SELECT t::text FROM \"{table}\" t"))
                            .fetch_all(&mut conn)
                            .await
                            .unwrap();
                    for row in rows {
                        all.push_str(&row);
                        all.push('\n');
                    }
                }
                all
            }
        }
    }

    /// How many sessions (console and portal) are stored.
    async fn sessions(&self) -> i64 {
        let sql = "SELECT count(*) FROM sessions";
        match self {
            Rows::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.query_row(sql, [], |r| r.get(0)).unwrap()
            }
            Rows::Postgres(url) => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
            }
        }
    }
}

fn access_path(app_id: &str) -> String {
    format!("/api/v1/auth/app-portal-access/{app_id}")
}

/// A portal token for `app_id` (the admin asks with `body`): the token and the link.
async fn portal_token(app: &TestApp, app_id: &str, body: Value) -> (String, String) {
    let (status, out) = app.post(&access_path(app_id), body).await;
    assert_eq!(status, 200, "{out}");
    let token = out["token"].as_str().unwrap().to_string();
    (token, out["url"].as_str().unwrap().to_string())
}

/// `method path` with `token` as the bearer token and an optional JSON body.
async fn as_token(
    app: &TestApp,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = app
        .client
        .request(method, format!("{}{path}", app.base))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    into_parts(req.send().await.unwrap()).await
}

fn all() -> Seek {
    Seek::for_iterator(None, Order::Ascending, 1000)
}

async fn count_apps(app: &TestApp) -> usize {
    app.store.list_applications(&all()).await.unwrap().len()
}

async fn count_endpoints(app: &TestApp, app_id: &str) -> usize {
    let id = AppId::parse(app_id).unwrap();
    app.store.list_endpoints(id, &all()).await.unwrap().len()
}

async fn count_messages(app: &TestApp, app_id: &str) -> usize {
    let id = AppId::parse(app_id).unwrap();
    let filter = MessageFilter::default();
    app.store
        .list_messages(id, &filter, &all())
        .await
        .unwrap()
        .len()
}

/// The stored session of `token`, looked up by its hash as vow does.
async fn session_of(app: &TestApp, token: &str) -> Option<Session> {
    let hash = TokenHash::of(token).to_hex();
    app.store.session(&hash, app.clock.now()).await.unwrap()
}

const HOOK: &str = "https://hooks.example.com/portal";

async fn a_token_is_issued_and_stored_only_as_its_hash(backend: Backend) {
    let (app, rows) = spawn(backend, test_config(&[])).await;
    let app_id = app.create_app("Acme").await;
    let before = app.clock.now();
    let resp = app
        .request(Method::POST, &access_path(&app_id))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["cache-control"],
        "no-store",
        "the answer holds a secret"
    );
    let (status, out) = into_parts(resp).await;
    assert_eq!(status, 200, "{out}");
    let token = out["token"].as_str().unwrap();
    assert!(
        token.starts_with("appsk_") && token.len() == 6 + 43,
        "{token}"
    );
    assert_eq!(out["url"], format!("{}/portal/{token}", app.base));

    let session = session_of(&app, token).await.expect("stored by its hash");
    assert_eq!(
        session.scope,
        SessionScope::Portal(AppId::parse(&app_id).unwrap())
    );
    assert!(!session.read_only);
    assert_ne!(session.csrf, token);
    let ttl = session.expires_at - before;
    assert!(ttl >= Duration::hours(24) && ttl < Duration::hours(24) + Duration::minutes(1));
    assert_eq!(rows.sessions().await, 1);

    let stored = rows.everything().await;
    assert!(stored.contains(&session.id_hash), "the dump holds the rows");
    let secret = token.strip_prefix("appsk_").unwrap();
    assert!(
        !stored.contains(secret),
        "the plain token is stored nowhere"
    );

    // Each request gets a token of its own.
    let (second, _) = portal_token(&app, &app_id, json!({})).await;
    assert_ne!(second, token);
    assert_eq!(rows.sessions().await, 2);
}

async fn the_link_starts_with_public_url_when_it_is_set(backend: Backend) {
    let config = test_config(&[("public_url", "https://hooks.example.com/vow")]);
    let (app, _rows) = spawn(backend, config).await;
    let app_id = app.create_app("Acme").await;
    let (token, url) = portal_token(&app, &app_id, json!({})).await;
    assert_eq!(url, format!("https://hooks.example.com/vow/portal/{token}"));
    // The link's Host is ignored then, even a forged one.
    let resp = app
        .request(Method::POST, &access_path(&app_id))
        .header("host", "evil.example")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let (status, out) = into_parts(resp).await;
    assert_eq!(status, 200, "{out}");
    assert!(out["url"]
        .as_str()
        .unwrap()
        .starts_with("https://hooks.example.com/vow/portal/appsk_"));
}

async fn application_creates_the_app_a_uid_names(backend: Backend) {
    let (app, rows) = spawn(backend, test_config(&[])).await;
    let body = json!({"application": {"name": "Acme", "metadata": {"plan": "pro"}}});
    let (token, _) = portal_token(&app, "acme-42", body.clone()).await;
    assert_eq!(count_apps(&app).await, 1);
    let created = app
        .store
        .get_application(&AppKey::Uid("acme-42".into()))
        .await
        .unwrap()
        .expect("created with the path's uid");
    assert_eq!(created.fields.name, "Acme");
    assert_eq!(
        session_of(&app, &token).await.unwrap().scope,
        SessionScope::Portal(created.id)
    );

    // Again: the application exists, so `application` is ignored and nothing is created.
    let (_, _) = portal_token(&app, "acme-42", json!({"application": {"name": "Other"}})).await;
    assert_eq!(count_apps(&app).await, 1);
    assert_eq!(rows.sessions().await, 2);

    // Without `application`, a missing uid is a 404; an `app_` id cannot be created.
    let (status, out) = app.post(&access_path("nobody"), json!({})).await;
    assert_eq!(
        (status, out["code"].as_str()),
        (404, Some("not_found")),
        "{out}"
    );
    let (status, _) = app
        .post(&access_path(&AppId::new().to_string()), body)
        .await;
    assert_eq!(status, 404);
    // An invalid `application` is named.
    let (status, out) = app
        .post(
            &access_path("acme-43"),
            json!({"application": {"name": ""}}),
        )
        .await;
    assert_eq!(status, 422, "{out}");
    assert_eq!(
        out["detail"][0]["loc"],
        json!(["body", "application", "name"])
    );
    assert_eq!(count_apps(&app).await, 1);
    assert_eq!(rows.sessions().await, 2);
}

async fn unsupported_fields_and_a_bad_expiry_are_422(backend: Backend) {
    let (app, rows) = spawn(backend, test_config(&[])).await;
    let app_id = app.create_app("Acme").await;
    let refused = [
        (json!({"featureFlags": ["beta"]}), "featureFlags"),
        (json!({"expiry": 3599}), "expiry"),
        (json!({"expiry": 604_801}), "expiry"),
        (json!({"capabilities": ["ViewBase"]}), "capabilities"),
        (json!({"sessionId": "s1"}), "sessionId"),
    ];
    for (body, field) in refused {
        let (status, out) = app.post(&access_path(&app_id), body.clone()).await;
        assert_eq!(status, 422, "{body}: {out}");
        assert_eq!(out["detail"][0]["loc"], json!(["body", field]), "{out}");
    }
    assert_eq!(rows.sessions().await, 0, "nothing issued");

    // The bounds themselves, an empty flag list and an empty body are fine.
    let before = app.clock.now();
    let (short, _) = portal_token(&app, &app_id, json!({"expiry": 3600, "featureFlags": []})).await;
    let expires = session_of(&app, &short).await.unwrap().expires_at;
    assert!(expires - before >= Duration::hours(1) && expires - before < Duration::hours(2));
    portal_token(&app, &app_id, json!({"expiry": 604_800})).await;
    let resp = app
        .request(Method::POST, &access_path(&app_id))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(rows.sessions().await, 3);
}

async fn a_token_reaches_its_own_application(backend: Backend) {
    let (app, _rows) = spawn(backend, test_config(&[])).await;
    let (status, _) = app
        .post("/api/v1/app", json!({"name": "Acme", "uid": "acme"}))
        .await;
    assert_eq!(status, 201);
    let app_id = app.get("/api/v1/app/acme").await.1["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (token, _) = portal_token(&app, "acme", json!({})).await;
    let own = format!("/api/v1/app/{app_id}");

    for path in [own.clone(), "/api/v1/app/acme".to_string()] {
        let (status, out) = as_token(&app, &token, Method::GET, &path, None).await;
        assert_eq!((status, &out["id"]), (200, &json!(app_id)), "{out}");
    }
    let (status, out) = as_token(&app, &token, Method::GET, &format!("{own}/endpoint"), None).await;
    assert_eq!((status, out["data"].as_array().unwrap().len()), (200, 0));
    let (status, ep) = as_token(
        &app,
        &token,
        Method::POST,
        "/api/v1/app/acme/endpoint",
        Some(json!({"url": HOOK})),
    )
    .await;
    assert_eq!(status, 201, "{ep}");
    assert_eq!(
        count_endpoints(&app, &app_id).await,
        1,
        "the endpoint row exists"
    );
    let (_, listed) = as_token(&app, &token, Method::GET, &format!("{own}/endpoint"), None).await;
    assert_eq!(listed["data"][0]["id"], ep["id"]);
    let (status, _) = as_token(
        &app,
        &token,
        Method::POST,
        &format!("{own}/msg"),
        Some(json!({"eventType": "order.paid", "payload": {"n": 1}})),
    )
    .await;
    assert_eq!(status, 202);
    assert_eq!(count_messages(&app, &app_id).await, 1);

    // The customer picks event types: it may read them, not create them.
    let (status, _) = app
        .post(
            "/api/v1/event-type",
            json!({"name": "order.paid", "description": "Paid"}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, _) = as_token(&app, &token, Method::GET, "/api/v1/event-type", None).await;
    assert_eq!(status, 200);
    let (status, _) = as_token(
        &app,
        &token,
        Method::GET,
        "/api/v1/event-type/order.paid",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, out) = as_token(
        &app,
        &token,
        Method::POST,
        "/api/v1/event-type",
        Some(json!({"name": "x.y", "description": "no"})),
    )
    .await;
    assert_eq!(status, 403, "{out}");
    let types = app.store.list_event_types(&all(), true).await.unwrap();
    assert_eq!(types.len(), 1);

    // The application itself is the operator's: not changed, not deleted.
    let rename = json!({"name": "Mine now"});
    for (method, body) in [
        (Method::PUT, Some(rename.clone())),
        (Method::PATCH, Some(rename)),
        (Method::DELETE, None),
    ] {
        let (status, out) = as_token(&app, &token, method.clone(), &own, body).await;
        assert_eq!(status, 403, "{method}: {out}");
        assert!(
            out["detail"].as_str().unwrap().contains("its application"),
            "{out}"
        );
    }
    let kept = app
        .store
        .get_application(&AppKey::Uid("acme".into()))
        .await
        .unwrap()
        .expect("not deleted");
    assert_eq!(kept.fields.name, "Acme");
}

async fn another_application_is_not_found_like_a_missing_one(backend: Backend) {
    let (app, _rows) = spawn(backend, test_config(&[])).await;
    let mine = app.create_app("Mine").await;
    let (status, _) = app
        .post("/api/v1/app", json!({"name": "Theirs", "uid": "theirs"}))
        .await;
    assert_eq!(status, 201);
    let theirs = app.get("/api/v1/app/theirs").await.1["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ep = app.create_endpoint(&theirs, json!({"url": HOOK})).await;
    let (status, msg) = app
        .post(
            &format!("/api/v1/app/{theirs}/msg"),
            json!({"eventType": "a.b", "payload": {}}),
        )
        .await;
    assert_eq!(status, 202);
    let msg = msg["id"].as_str().unwrap().to_string();
    let (token, _) = portal_token(&app, &mine, json!({})).await;

    // What a missing application answers, to the admin and to the token.
    let missing = AppId::new().to_string();
    let (status, admin_404) = app.get(&format!("/api/v1/app/{missing}/endpoint")).await;
    assert_eq!(status, 404);
    let (status, token_404) = as_token(
        &app,
        &token,
        Method::GET,
        &format!("/api/v1/app/{missing}/endpoint"),
        None,
    )
    .await;
    assert_eq!((status, &token_404), (404, &admin_404));

    let reads = [
        format!("/api/v1/app/{theirs}"),
        "/api/v1/app/theirs".to_string(),
        format!("/api/v1/app/{theirs}/endpoint"),
        "/api/v1/app/theirs/endpoint".to_string(),
        format!("/api/v1/app/{theirs}/endpoint/{ep}"),
        format!("/api/v1/app/{theirs}/endpoint/{ep}/secret"),
        format!("/api/v1/app/{theirs}/msg"),
        format!("/api/v1/app/{theirs}/msg/{msg}"),
        format!("/api/v1/app/{theirs}/attempt/msg/{msg}"),
        format!("/api/v1/app/{theirs}/attempt/endpoint/{ep}"),
        format!("/api/v1/app/{theirs}/msg/{msg}/endpoint"),
    ];
    for path in reads {
        let (status, body) = as_token(&app, &token, Method::GET, &path, None).await;
        assert_eq!((status, &body), (404, &admin_404), "{path}");
    }
    let writes = [
        (
            Method::POST,
            format!("/api/v1/app/{theirs}/endpoint"),
            Some(json!({"url": HOOK})),
        ),
        (
            Method::POST,
            "/api/v1/app/theirs/msg".to_string(),
            Some(json!({"eventType": "a.b", "payload": {}})),
        ),
        (
            Method::DELETE,
            format!("/api/v1/app/{theirs}/endpoint/{ep}"),
            None,
        ),
        (
            Method::PATCH,
            format!("/api/v1/app/{theirs}/endpoint/{ep}"),
            Some(json!({"url": "https://evil.example/x"})),
        ),
        (Method::DELETE, format!("/api/v1/app/{theirs}"), None),
        (
            Method::POST,
            format!("/api/v1/app/{theirs}/msg/{msg}/endpoint/{ep}/resend"),
            None,
        ),
    ];
    for (method, path, body) in writes {
        let (status, out) = as_token(&app, &token, method.clone(), &path, body).await;
        assert_eq!((status, &out), (404, &admin_404), "{method} {path}");
    }
    assert_eq!(count_apps(&app).await, 2);
    assert_eq!(count_endpoints(&app, &theirs).await, 1);
    assert_eq!(count_messages(&app, &theirs).await, 1);
    let (_, kept) = app
        .get(&format!("/api/v1/app/{theirs}/endpoint/{ep}"))
        .await;
    assert_eq!(kept["url"], HOOK);
    assert_eq!(count_endpoints(&app, &mine).await, 0);
}

async fn routes_outside_the_application_are_forbidden(backend: Backend) {
    let (app, rows) = spawn(backend, test_config(&[])).await;
    let app_id = app.create_app("Acme").await;
    let (token, _) = portal_token(&app, &app_id, json!({})).await;
    let refused = [
        (Method::GET, "/api/v1/app".to_string(), None),
        (
            Method::POST,
            "/api/v1/app".to_string(),
            Some(json!({"name": "New"})),
        ),
        (Method::GET, "/api/v1/source".to_string(), None),
        (
            Method::POST,
            "/api/v1/source".to_string(),
            Some(json!({"name": "s"})),
        ),
        (Method::GET, "/metrics".to_string(), None),
        (
            Method::GET,
            "/api/v1/idempotency-key/k1?route=application.create".to_string(),
            None,
        ),
        (Method::POST, access_path(&app_id), Some(json!({}))),
    ];
    for (method, path, body) in refused {
        let (status, out) = as_token(&app, &token, method.clone(), &path, body).await;
        assert_eq!(status, 403, "{method} {path}: {out}");
        assert_eq!(out["code"], "forbidden");
        assert_eq!(
            out["detail"],
            "an app portal token reaches only its own application"
        );
    }
    assert_eq!(count_apps(&app).await, 1);
    assert!(app.inbound.list_sources(&all()).await.unwrap().is_empty());
    assert_eq!(rows.sessions().await, 1, "a token issued no token");
}

async fn a_console_session_secret_is_not_a_bearer_token(backend: Backend) {
    let (app, _rows) = spawn(backend, test_config(&[])).await;
    let app_id = app.create_app("Acme").await;
    let now = app.clock.now();
    // A console session, by a plain secret and by one that looks like a portal token.
    for secret in ["console-secret-1", "appsk_console-secret-2"] {
        let session = Session {
            id_hash: TokenHash::of(secret).to_hex(),
            scope: SessionScope::Console,
            csrf: "c".into(),
            created_at: now,
            expires_at: now + Duration::hours(1),
            read_only: false,
        };
        app.store.create_session(session).await.unwrap();
        let path = format!("/api/v1/app/{app_id}");
        let (status, out) = as_token(&app, secret, Method::GET, &path, None).await;
        assert_eq!(status, 401, "{secret}: {out}");
        assert_eq!(out["detail"], "invalid token");
    }
    // A portal session's secret without the prefix is no token either.
    let session = Session {
        id_hash: TokenHash::of("no-prefix").to_hex(),
        scope: SessionScope::Portal(AppId::parse(&app_id).unwrap()),
        csrf: "c".into(),
        created_at: now,
        expires_at: now + Duration::hours(1),
        read_only: false,
    };
    app.store.create_session(session).await.unwrap();
    let (status, _) = as_token(&app, "no-prefix", Method::GET, "/api/v1/event-type", None).await;
    assert_eq!(status, 401);
}

async fn a_read_only_token_reads_and_writes_nothing(backend: Backend) {
    let (app, _rows) = spawn(backend, test_config(&[])).await;
    let app_id = app.create_app("Acme").await;
    let ep = app.create_endpoint(&app_id, json!({"url": HOOK})).await;
    let (token, _) = portal_token(&app, &app_id, json!({"readOnly": true})).await;
    assert!(session_of(&app, &token).await.unwrap().read_only);
    let own = format!("/api/v1/app/{app_id}");

    let (status, listed) =
        as_token(&app, &token, Method::GET, &format!("{own}/endpoint"), None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["data"][0]["id"], json!(ep));
    let writes = [
        (
            Method::POST,
            format!("{own}/endpoint"),
            Some(json!({"url": HOOK})),
        ),
        (
            Method::POST,
            format!("{own}/msg"),
            Some(json!({"eventType": "a.b", "payload": {}})),
        ),
        (Method::DELETE, format!("{own}/endpoint/{ep}"), None),
        (
            Method::PATCH,
            format!("{own}/endpoint/{ep}"),
            Some(json!({"description": "changed"})),
        ),
    ];
    for (method, path, body) in writes {
        let (status, out) = as_token(&app, &token, method.clone(), &path, body).await;
        assert_eq!(status, 403, "{method} {path}: {out}");
        assert!(
            out["detail"].as_str().unwrap().contains("read-only"),
            "{out}"
        );
    }
    assert_eq!(
        count_endpoints(&app, &app_id).await,
        1,
        "no row added or removed"
    );
    assert_eq!(count_messages(&app, &app_id).await, 0);
    let (_, kept) = app.get(&format!("{own}/endpoint/{ep}")).await;
    assert_eq!(kept["description"], "");
    // Another application is still a 404, not a 403 that would tell it exists.
    let other = app.create_app("Other").await;
    let (status, _) = as_token(
        &app,
        &token,
        Method::POST,
        &format!("/api/v1/app/{other}/endpoint"),
        Some(json!({"url": HOOK})),
    )
    .await;
    assert_eq!(status, 404);
    // Logging out is allowed.
    let (status, _) = as_token(&app, &token, Method::POST, "/api/v1/auth/logout", None).await;
    assert_eq!(status, 204);
}

async fn an_expired_token_is_refused(backend: Backend) {
    let (app, _rows) = spawn(backend, test_config_toml("portal_token_hours = 2")).await;
    let app_id = app.create_app("Acme").await;
    let (hour, _) = portal_token(&app, &app_id, json!({"expiry": 3600})).await;
    let (default, _) = portal_token(&app, &app_id, json!({})).await;
    let path = format!("/api/v1/app/{app_id}/endpoint");
    for token in [&hour, &default] {
        assert_eq!(as_token(&app, token, Method::GET, &path, None).await.0, 200);
    }
    app.clock.advance(Duration::minutes(61));
    let (status, out) = as_token(&app, &hour, Method::GET, &path, None).await;
    assert_eq!((status, &out["detail"]), (401, &json!("invalid token")));
    assert_eq!(
        as_token(&app, &default, Method::GET, &path, None).await.0,
        200
    );
    app.clock.advance(Duration::minutes(60));
    assert_eq!(
        as_token(&app, &default, Method::GET, &path, None).await.0,
        401
    );
}

async fn logging_out_ends_the_token(backend: Backend) {
    let (app, rows) = spawn(backend, test_config(&[])).await;
    let app_id = app.create_app("Acme").await;
    let (token, _) = portal_token(&app, &app_id, json!({})).await;
    let (kept, _) = portal_token(&app, &app_id, json!({})).await;
    let (status, out) = as_token(&app, &token, Method::POST, "/api/v1/auth/logout", None).await;
    assert_eq!(status, 204, "{out}");
    assert_eq!(session_of(&app, &token).await, None);
    assert_eq!(
        rows.sessions().await,
        1,
        "its row is deleted, the other token's kept"
    );
    let path = format!("/api/v1/app/{app_id}");
    for (method, path) in [
        (Method::GET, path.as_str()),
        (Method::POST, "/api/v1/auth/logout"),
    ] {
        let (status, out) = as_token(&app, &token, method, path, None).await;
        assert_eq!(
            (status, &out["detail"]),
            (401, &json!("invalid token")),
            "{path}"
        );
    }
    assert_eq!(as_token(&app, &kept, Method::GET, &path, None).await.0, 200);

    let (status, out) = app.call(Method::POST, "/api/v1/auth/logout", None).await;
    assert_eq!(status, 403, "{out}");
    assert_eq!(out["detail"], "only an app portal token can be logged out");
    assert_eq!(rows.sessions().await, 1);
}

async fn deleting_the_application_ends_its_tokens(backend: Backend) {
    let (app, rows) = spawn(backend, test_config(&[])).await;
    let app_id = app.create_app("Acme").await;
    let (token, _) = portal_token(&app, &app_id, json!({})).await;
    assert_eq!(app.delete(&format!("/api/v1/app/{app_id}")).await.0, 204);
    assert_eq!(rows.sessions().await, 0);
    let (status, _) = as_token(&app, &token, Method::GET, "/api/v1/event-type", None).await;
    assert_eq!(status, 401);
}

async fn a_portal_tokens_idempotency_keys_are_apart_from_the_admins(backend: Backend) {
    let (app, _rows) = spawn(backend, test_config(&[])).await;
    let app_id = app.create_app("Acme").await;
    let (token, _) = portal_token(&app, &app_id, json!({})).await;
    let path = format!("/api/v1/app/{app_id}/endpoint");
    let body = json!({"url": HOOK});
    let send = |bearer: String| {
        app.client
            .post(format!("{}{path}", app.base))
            .bearer_auth(bearer)
            .header("idempotency-key", "same-key-1")
            .json(&body)
            .send()
    };
    let admin = send(crate::helpers::TOKEN.to_string()).await.unwrap();
    assert_eq!(admin.status(), 201);
    let portal = send(token.clone()).await.unwrap();
    assert_eq!(portal.status(), 201);
    assert!(
        portal.headers().get("idempotent-replayed").is_none(),
        "not the admin's answer"
    );
    let again = send(token).await.unwrap();
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(count_endpoints(&app, &app_id).await, 2);
}

/// Instantiates each named `async fn(Backend)` as `sqlite::name` and `postgres::name`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(crate::helpers::Backend::Sqlite).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(crate::helpers::Backend::Postgres).await
                }
            )*
        }
    };
}

on_both_backends!(
    a_token_is_issued_and_stored_only_as_its_hash,
    the_link_starts_with_public_url_when_it_is_set,
    application_creates_the_app_a_uid_names,
    unsupported_fields_and_a_bad_expiry_are_422,
    a_token_reaches_its_own_application,
    another_application_is_not_found_like_a_missing_one,
    routes_outside_the_application_are_forbidden,
    a_console_session_secret_is_not_a_bearer_token,
    a_read_only_token_reads_and_writes_nothing,
    an_expired_token_is_refused,
    logging_out_ends_the_token,
    deleting_the_application_ends_its_tokens,
    a_portal_tokens_idempotency_keys_are_apart_from_the_admins,
);
