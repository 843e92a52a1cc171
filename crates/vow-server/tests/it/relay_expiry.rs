//! Relay targets whose `vow listen` is gone expire (`relay_expiry_seconds`), with real
//! processes: `vow serve` children (SQLite and PostgreSQL; two nodes sharing PostgreSQL), real
//! `vow listen` processes, one `kill -9`ed (no Ctrl-C: nothing cleaned up) and one left
//! connected, and real local receivers. Reads the endpoints and the source back through the API.

use std::time::Duration;

use reqwest::Method;

use crate::child::{database, Vow};
use crate::cli_listen::{call, create_app, send_raw, OPERATOR};
use crate::cli_listen_source::{destination_ids, github_source, listen_source, Listening};
use crate::helpers::{eventually, TOKEN};
use crate::json_child::JsonChild;
use crate::receiver::Receiver;

/// Relay targets expire two seconds after their listener was last connected.
const ENV: &[(&str, &str)] = &[("VOW_RELAY_EXPIRY_SECONDS", "2")];

/// Long enough for a killed listener's connection to be noticed (the stream's keep-alive is
/// 10 s) and its target to expire.
const EXPIRY_WAIT: Duration = Duration::from_secs(40);

on_both_child_stores!(a_killed_listen_expires_and_a_connected_one_does_not);

/// `vow listen --app app` to `local` through `base`, once connected; and its endpoint id.
async fn listen_app(base: &str, app: &str, local: &str) -> (JsonChild, String) {
    let mut listen = JsonChild::start(&[
        "listen", local, "--app", app, "--url", base, "--token", TOKEN,
    ]);
    let endpoint = listen.next("listening").await["endpointId"]
        .as_str()
        .unwrap()
        .to_owned();
    listen.next("connected").await;
    (listen, endpoint)
}

/// The status of `GET` on application `app`'s endpoint `endpoint`.
async fn endpoint_status(base: &str, app: &str, endpoint: &str) -> u16 {
    let path = format!("/api/v1/app/{app}/endpoint/{endpoint}");
    call(base, Method::GET, &path, None).await.0
}

/// Waits until endpoint `endpoint` of `app` is gone.
async fn until_gone(base: &str, app: &str, endpoint: &str) {
    eventually(
        &format!("relay endpoint {endpoint} expires"),
        OPERATOR,
        EXPIRY_WAIT,
        || async { (endpoint_status(base, app, endpoint).await == 404).then_some(()) },
    )
    .await
}

async fn a_killed_listen_expires_and_a_connected_one_does_not(postgres: bool) {
    let (db, _dir) = database(postgres).await;
    let vow = Vow::start(&db, ENV).await;
    let (alive_local, dead_local, other) = (
        Receiver::start(&[]).await,
        Receiver::start(&[]).await,
        Receiver::start(&[]).await,
    );
    let app = create_app(&vow.base).await;
    let source = github_source(&vow.base, &other.url).await;
    let (_alive, alive) = listen_app(&vow.base, &app, &alive_local.url).await;
    let (mut killed, dead) = listen_app(&vow.base, &app, &dead_local.url).await;
    let Listening {
        child: mut killed_source,
        destination: dead_destination,
        ..
    } = listen_source(&vow.base, &source, &dead_local.url).await;
    assert_eq!(destination_ids(&vow.base, &source).await.len(), 2);
    killed.kill_9();
    killed_source.kill_9();
    until_gone(&vow.base, &app, &dead).await;
    eventually(
        "the killed source listener's relay destination expires",
        OPERATOR,
        EXPIRY_WAIT,
        || async {
            let left = destination_ids(&vow.base, &source).await;
            (!left.contains(&dead_destination)).then_some(left)
        },
    )
    .await;
    // The connected one is older than the expiry by now, and stays; it still relays.
    assert_eq!(endpoint_status(&vow.base, &app, &alive).await, 200);
    assert_eq!(destination_ids(&vow.base, &source).await.len(), 1);
    let msg = send_raw(&vow.base, &app, "order.created", r#"{"after":1}"#).await;
    let got = alive_local.wait_for(1).await;
    assert_eq!(got[0].header("webhook-id"), msg);
}

/// On PostgreSQL with two nodes: a listener connected to node A is renewed by A, so node B's
/// sweep (which holds no listener) does not expire it, while a killed one on A expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_on_node_a_is_not_expired_by_node_b() {
    let (db, _dir) = database(true).await;
    let a = Vow::start(&db, ENV).await;
    let b = Vow::start(&db, ENV).await;
    let (alive_local, dead_local) = (Receiver::start(&[]).await, Receiver::start(&[]).await);
    let app = create_app(&a.base).await;
    let (_alive, alive) = listen_app(&a.base, &app, &alive_local.url).await;
    let (mut killed, dead) = listen_app(&a.base, &app, &dead_local.url).await;
    killed.kill_9();
    // Both nodes sweep every second; by the time the killed one is gone, B has swept the
    // connected one (older than the expiry) many times.
    until_gone(&b.base, &app, &dead).await;
    assert_eq!(endpoint_status(&b.base, &app, &alive).await, 200);
    // Sent through B. If B claims it (its own create wakes it), it finds no listener, puts it
    // back due again in 5 s, and passes over the endpoint meanwhile, so A takes it then.
    let msg = send_raw(&b.base, &app, "order.created", r#"{"n":1}"#).await;
    let got = eventually(
        "the listener on A gets it",
        OPERATOR,
        EXPIRY_WAIT,
        || async {
            let got = alive_local.received();
            (!got.is_empty()).then_some(got)
        },
    )
    .await;
    assert_eq!(got[0].header("webhook-id"), msg);
}
