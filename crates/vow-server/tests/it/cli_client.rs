//! `vow send` and `vow login` as a user runs them: the real binary against a real
//! `vow serve` child, on SQLite and on PostgreSQL. Messages are counted where they end up (at
//! a real receiver, and in vow's own listing), profiles in the file `vow login` writes.

use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::child::Vow;
use crate::helpers::TOKEN;
use crate::receiver::{standard_signature_ok, Receiver};

/// Instantiates each named `async fn(Vow)` as two tests, `sqlite::name` and
/// `postgres::name`, each with a `vow serve` child on a fresh store.
macro_rules! on_both_children {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let dir = tempfile::tempdir().unwrap();
                    let url = format!("sqlite://{}/vow.db", dir.path().display());
                    super::$name(crate::child::Vow::start(&url, &[]).await).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (_store, url) = vow_store_postgres::testing::fresh_store().await;
                    super::$name(crate::child::Vow::start(&url, &[]).await).await
                }
            )*
        }
    };
}

on_both_children!(
    send_creates_a_message_that_the_endpoint_receives,
    the_same_idempotency_key_twice_makes_one_message,
    send_says_what_vow_answered,
    login_checks_the_token_saves_the_profile_and_send_uses_it,
    login_refuses_an_unknown_token_and_recognises_a_portal_token,
);

/// Runs `vow args…` with `stdin`, in an environment holding only `XDG_CONFIG_HOME` (for
/// profiles).
pub(crate) async fn cli(config: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_vow"))
        .args(args)
        .env_clear()
        .env("XDG_CONFIG_HOME", config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).await.unwrap();
    drop(input);
    child.wait_with_output().await.unwrap()
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// An admin API call to the child that must succeed; its answer.
pub(crate) async fn api(
    vow: &Vow,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let (status, body) = api_answer(vow, method, path, body).await;
    assert!((200..300).contains(&status), "{path}: {status} {body}");
    body
}

/// An admin API call to the child: its status and JSON answer (null when it has none).
pub(crate) async fn api_answer(
    vow: &Vow,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", vow.base))
        .bearer_auth(TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or_default())
}

/// An application with one endpoint at `receiver`; returns the app id, the endpoint id and its
/// secret.
pub(crate) async fn app_with_endpoint(vow: &Vow, receiver: &Receiver) -> (String, String, String) {
    use reqwest::Method;
    let app = api(
        vow,
        Method::POST,
        "/api/v1/app",
        Some(json!({"name": "shop", "uid": "shop"})),
    )
    .await;
    let app = app["id"].as_str().unwrap().to_string();
    let endpoint = api(
        vow,
        Method::POST,
        &format!("/api/v1/app/{app}/endpoint"),
        Some(json!({"url": receiver.url})),
    )
    .await;
    let endpoint = endpoint["id"].as_str().unwrap().to_string();
    let secret = api(
        vow,
        Method::GET,
        &format!("/api/v1/app/{app}/endpoint/{endpoint}/secret"),
        None,
    )
    .await;
    (app, endpoint, secret["key"].as_str().unwrap().to_string())
}

/// The messages of `app` as vow lists them.
async fn messages(vow: &Vow, app: &str) -> Vec<Value> {
    let list = api(
        vow,
        reqwest::Method::GET,
        &format!("/api/v1/app/{app}/msg"),
        None,
    )
    .await;
    list["data"].as_array().unwrap().clone()
}

async fn send_creates_a_message_that_the_endpoint_receives(vow: Vow) {
    let receiver = Receiver::start(&[]).await;
    let (app, endpoint, secret) = app_with_endpoint(&vow, &receiver).await;
    let config = tempfile::tempdir().unwrap();
    let payload = r#"{"orderId": 42, "note": "exact bytes"}"#;
    let out = cli(
        config.path(),
        &[
            "send",
            "--url",
            &vow.base,
            "--token",
            TOKEN,
            "--app",
            "shop",
            "--type",
            "order.created",
            "--data",
            payload,
        ],
        b"",
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains('\x1b'), "{text:?}");
    let stored = messages(&vow, &app).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    let id = stored[0]["id"].as_str().unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(format!("sent {id} (order.created)").as_str()),
        "{text}"
    );
    assert_eq!(lines.next(), Some("going to 1 endpoint:"), "{text}");
    let row = lines.next().unwrap_or_default();
    assert!(
        row.contains(&endpoint) && row.contains(&receiver.url),
        "{text}"
    );

    let received = receiver.wait_for(1).await;
    assert_eq!(received.len(), 1);
    assert_eq!(&received[0].body[..], payload.as_bytes());
    assert_eq!(received[0].header("webhook-id"), id);
    assert!(standard_signature_ok(&received[0], &secret));
}

async fn the_same_idempotency_key_twice_makes_one_message(vow: Vow) {
    let receiver = Receiver::start(&[]).await;
    let (app, _, _) = app_with_endpoint(&vow, &receiver).await;
    let config = tempfile::tempdir().unwrap();
    let send = || async {
        let out = cli(
            config.path(),
            &[
                "send",
                "--url",
                &vow.base,
                "--token",
                TOKEN,
                "--app",
                &app,
                "--type",
                "order.created",
                "--data",
                r#"{"orderId":7}"#,
                "--channel",
                "eu",
                "--idempotency-key",
                "order-7",
                "-o",
                "json",
            ],
            b"",
        )
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str::<Value>(&stdout(&out)).unwrap()
    };
    let first = send().await;
    let second = send().await;
    assert_eq!(first["id"], second["id"], "{first} {second}");
    assert_eq!(
        first["endpoints"].as_array().map(Vec::len),
        Some(1),
        "{first}"
    );
    let stored = messages(&vow, &app).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0]["id"], first["id"]);
    assert_eq!(stored[0]["channels"], json!(["eu"]));
    let received = receiver.wait_for(1).await;
    assert_eq!(
        received[0].header("webhook-id"),
        first["id"].as_str().unwrap()
    );
}

async fn send_says_what_vow_answered(vow: Vow) {
    let config = tempfile::tempdir().unwrap();
    let out = cli(
        config.path(),
        &[
            "send",
            "--url",
            &vow.base,
            "--token",
            TOKEN,
            "--app",
            "no-such-app",
            "--type",
            "x",
            "--data",
            "{}",
        ],
        b"",
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("404") && err.contains("not_found"), "{err}");
    let out = cli(
        config.path(),
        &[
            "send", "--url", &vow.base, "--token", TOKEN, "--app", "a", "--type", "x", "--data",
            "{",
        ],
        b"",
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--data is not JSON"),
        "{}",
        stderr(&out)
    );
}

async fn login_checks_the_token_saves_the_profile_and_send_uses_it(vow: Vow) {
    let receiver = Receiver::start(&[]).await;
    let (app, _, _) = app_with_endpoint(&vow, &receiver).await;
    let config = tempfile::tempdir().unwrap();
    let token_line = format!("{TOKEN}\n");
    let out = cli(
        config.path(),
        &["login", "--url", &vow.base, "--profile", "local"],
        token_line.as_bytes(),
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("with the admin token"), "{text}");
    assert!(
        !text.contains(TOKEN) && !stderr(&out).contains(TOKEN),
        "the token was printed"
    );

    let path = config.path().join("vow/profiles.toml");
    let saved: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(saved["local"]["url"].as_str(), Some(vow.base.as_str()));
    assert_eq!(saved["local"]["token"].as_str(), Some(TOKEN));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    let out = cli(
        config.path(),
        &[
            "send",
            "--profile",
            "local",
            "--app",
            &app,
            "--type",
            "ping",
            "--data",
            "{}",
        ],
        b"",
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(messages(&vow, &app).await.len(), 1);
    assert_eq!(receiver.wait_for(1).await.len(), 1);
}

async fn login_refuses_an_unknown_token_and_recognises_a_portal_token(vow: Vow) {
    let config = tempfile::tempdir().unwrap();
    let out = cli(
        config.path(),
        &["login", "--url", &vow.base, "--token", "not-a-token"],
        b"",
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("refused the token (401)"), "{err}");
    assert!(!err.contains("not-a-token"), "{err}");
    let path = config.path().join("vow/profiles.toml");
    assert!(!path.exists(), "nothing is saved for a refused token");

    let app = api(
        &vow,
        reqwest::Method::POST,
        "/api/v1/app",
        Some(json!({"name": "p"})),
    )
    .await;
    let app = app["id"].as_str().unwrap();
    let access = api(
        &vow,
        reqwest::Method::POST,
        &format!("/api/v1/auth/app-portal-access/{app}"),
        Some(json!({})),
    )
    .await;
    let portal = access["token"].as_str().unwrap();
    let out = cli(
        config.path(),
        &["login", "--url", &vow.base, "-o", "json"],
        format!("{portal}\n").as_bytes(),
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains(portal), "the token was printed: {text}");
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["access"], "portal", "{report}");
    assert_eq!(report["profile"], "default", "{report}");
    let saved: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(saved["default"]["token"].as_str(), Some(portal));
}
