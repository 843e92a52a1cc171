//! Several nodes, as real processes. Three `vow serve` on one PostgreSQL database share the work,
//! and one killed with `kill -9` under load loses nothing; a PostgreSQL restart under load (a
//! server of this test's own, so the shared one is left alone) is answered with a prompt 503
//! while the database is down, and vow recovers by itself, again losing nothing. Both count at
//! `crash.rs`'s receiver: what arrived, attempts that overlapped, and which process sent each.
//!
//! # Layout
//! - `clients`: paced clients that keep every answer (status, `Retry-After`, latency).
//! - `private_postgres`: a PostgreSQL server of the test's own (`initdb`, `pg_ctl`).

mod clients;
mod private_postgres;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::child::Vow;
use crate::crash::{load, setup_app, Receiver, CRASH_ENV};
use crate::helpers::eventually;
use clients::{chain, Answer, Clients, CLIENT_TIMEOUT};
use private_postgres::PrivatePostgres;

/// The most attempts one process has in flight to one endpoint (`delivery_max_per_endpoint`).
const PER_ENDPOINT: usize = 32;

/// The most deliveries one process has claimed and not yet recorded (`delivery_max_in_flight`,
/// set rather than left to the default so the bound on duplicates below is visible): a claim
/// keeps its place until its outcome is recorded, so this bounds the attempts a process can
/// have made and not yet recorded.
const IN_FLIGHT: usize = 64;

/// Messages the three nodes are sent.
const MESSAGES: usize = 900;

/// [`CRASH_ENV`] (a five-second delivery lease, one-second retries) with [`PER_ENDPOINT`] and
/// [`IN_FLIGHT`], given as text.
fn node_env<'a>(per_endpoint: &'a str, in_flight: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut env = CRASH_ENV.to_vec();
    env.push(("VOW_DELIVERY_MAX_PER_ENDPOINT", per_endpoint));
    env.push(("VOW_DELIVERY_MAX_IN_FLIGHT", in_flight));
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_share_postgres_and_a_killed_one_loses_nothing() {
    let (_store, url) = vow_store_postgres::testing::fresh_store().await;
    let (per_endpoint, in_flight) = (PER_ENDPOINT.to_string(), IN_FLIGHT.to_string());
    let env = node_env(&per_endpoint, &in_flight);
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(Vow::start(&url, &env).await);
    }
    let pids: Vec<u32> = nodes.iter().map(Vow::pid).collect();
    let (receiver, hook) = Receiver::start().await;
    let app = setup_app(&nodes[1].base, &hook).await;
    let bases: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
    let loader = tokio::spawn(async move { load(&bases, &app, MESSAGES).await });

    // Kill the busiest node while deliveries flow and messages are still being posted.
    let sent_by = |pid| {
        receiver
            .ledger()
            .iter()
            .filter(|a| a.from == Some(pid))
            .count()
    };
    let flowing = || receiver.ledger().len() >= 60;
    receiver
        .wait_until("deliveries", Duration::from_secs(30), flowing)
        .await;
    let busiest = (0..nodes.len()).max_by_key(|&n| sent_by(pids[n])).unwrap();
    let victim = pids[busiest];
    let survivors: Vec<u32> = pids.iter().copied().filter(|&p| p != victim).collect();
    assert!(sent_by(victim) > 0, "the node to kill delivered its share");
    nodes[busiest].kill_9();
    let killed_at = Instant::now();
    // Its clients' requests to the dead node fail from now on, as a real client's would.
    let acked = loader.await.unwrap();
    assert!(acked.len() >= MESSAGES / 2, "{} acknowledged", acked.len());
    // Every delivery ends up recorded as delivered, also those the killed node held leased
    // (the survivors take them over once the lease runs out) and those of messages whose answer
    // the kill cut off.
    let stored = nothing_lost(&receiver, &url, &acked).await;

    // The survivors share the work, and went on with it after the kill.
    let ledger = receiver.ledger();
    assert!(
        ledger
            .iter()
            .all(|a| a.from.is_none_or(|p| pids.contains(&p))),
        "every attempt came from one of the nodes"
    );
    for &pid in &survivors {
        let after = ledger
            .iter()
            .filter(|a| a.from == Some(pid) && a.at > killed_at)
            .count();
        assert!(after > 0, "node {pid} delivered nothing after the kill");
    }

    // Duplicates. The killed node's attempts the receiver answered but that node never recorded
    // are attempted again by a survivor once their lease (5 s) runs out: a message may arrive
    // twice, and only one whose attempt was made by the killed node and not yet recorded. Those
    // held their places in it, so there are at most IN_FLIGHT of them. (A sender the receiver
    // could not name is a process already gone when its connection was accepted: the killed one.)
    let mut senders: HashMap<&str, Vec<Option<u32>>> = HashMap::new();
    for a in &ledger {
        senders.entry(&a.id).or_default().push(a.from);
    }
    let twice: Vec<_> = senders.iter().filter(|(_, from)| from.len() > 1).collect();
    for (id, from) in &twice {
        assert_eq!(from.len(), 2, "{id} arrived more than twice: {from:?}");
        assert!(
            from.iter().any(|f| f.is_none_or(|p| p == victim)),
            "{id} arrived twice, never from the killed node: {from:?}"
        );
    }
    assert!(
        twice.len() <= IN_FLIGHT,
        "{} duplicates, more than the killed node could have had in flight",
        twice.len()
    );
    let duplicates = usize::try_from(receiver.duplicates()).unwrap();
    assert_eq!(duplicates, twice.len());
    let shares: Vec<String> = [victim]
        .iter()
        .chain(&survivors)
        .map(|&p| {
            let after = ledger
                .iter()
                .filter(|a| a.from == Some(p) && a.at > killed_at);
            format!("{} ({} after the kill)", sent_by(p), after.count())
        })
        .collect();
    let unnamed = ledger.iter().filter(|a| a.from.is_none()).count();
    let retaken = ledger
        .iter()
        .filter(|a| twice.iter().any(|(id, _)| **id == a.id) && a.at > killed_at)
        .map(|a| a.at - killed_at)
        .max();
    println!(
        "three nodes, one killed: {} acknowledged, {} stored, all delivered; attempts by node: \
         killed {}, survivors {}, {unnamed} by a process already gone; {duplicates} duplicates \
         (the last one redelivered {retaken:?} after the kill); 0 overlaps",
        acked.len(),
        stored.len(),
        shares[0],
        shares[1..].join(", "),
    );
}

/// Checks the ledger and the rows of the database at `url` once the load is over: every
/// `acked` message arrived at the receiver and is stored; every stored message arrived too, and
/// its delivery (to the one endpoint) is recorded as delivered; no two attempts of one message
/// overlapped (a delivery is leased to one process at a time). Returns the stored messages.
async fn nothing_lost(receiver: &Receiver, url: &str, acked: &[String]) -> Vec<String> {
    receiver.wait_for_all(acked).await;
    let db = sqlx::PgPool::connect(url).await.unwrap();
    let stored: Vec<String> = sqlx::query_scalar("SELECT id FROM messages")
        .fetch_all(&db)
        .await
        .unwrap();
    let missing = acked.iter().filter(|id| !stored.contains(id)).count();
    assert_eq!(missing, 0, "acknowledged messages not stored");
    receiver.wait_for_all(&stored).await;
    all_recorded_as_delivered(&db, stored.len()).await;
    let overlaps = receiver.overlaps();
    assert_eq!(overlaps, 0, "a delivery was attempted twice at once");
    stored
}

/// Waits until each of the `messages` deliveries (one endpoint) is recorded as delivered.
async fn all_recorded_as_delivered(db: &sqlx::PgPool, messages: usize) {
    let counts = || async {
        let (delivered, all): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE status = 'delivered'), count(*) FROM deliveries",
        )
        .fetch_one(db)
        .await
        .ok()?;
        (usize::try_from(delivered).ok()? == messages && all == delivered).then_some(())
    };
    let every = Duration::from_millis(100);
    let what = "every delivery recorded as delivered";
    eventually(what, every, Duration::from_secs(30), counts).await;
}

/// Clients posting messages to the one node during the restart.
const CLIENTS: usize = 4;

/// How long PostgreSQL stays down: longer than the delivery lease (5 s), so the leases held
/// when it stopped run out while it is down.
const OUTAGE: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_mid_load_answers_503_then_recovers_with_nothing_lost() {
    let pg = match PrivatePostgres::init().await {
        Ok(pg) => pg,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    pg.start().await;
    let (receiver, hook) = Receiver::start().await;
    let (per_endpoint, in_flight) = (PER_ENDPOINT.to_string(), IN_FLIGHT.to_string());
    let vow = Vow::start(&pg.url(), &node_env(&per_endpoint, &in_flight)).await;
    let app = setup_app(&vow.base, &hook).await;
    let clients = Clients::start(&vow.base, &app, CLIENTS);
    let before = || receiver.distinct() >= 30;
    receiver
        .wait_until(
            "deliveries before the outage",
            Duration::from_secs(30),
            before,
        )
        .await;

    // PostgreSQL goes away at once, as when it is killed or its machine dies.
    pg.stop().await;
    let down = Instant::now();
    let (status, body, took) = ready(&vow.base).await;
    assert_eq!(status, Some(503), "{body}");
    assert_eq!(body["checks"]["store"], "unreachable", "{body}");
    // The outage itself: its length is the behaviour under test.
    tokio::time::sleep(OUTAGE).await;
    let restart = Instant::now();
    pg.start().await;
    let up = Instant::now();

    // vow recovers by itself: creates sent after the restart are accepted again.
    let first_accepted = || async {
        let answers = clients.answers();
        let accepted = answers
            .iter()
            .find(|a| a.sent >= up && a.status == Some(202));
        accepted.map(|a| a.sent + a.took - up)
    };
    let every = Duration::from_millis(50);
    let what = "a create accepted after the restart";
    let recovered = eventually(what, every, Duration::from_secs(30), first_accepted).await;
    let is_ready = || async { (ready(&vow.base).await.0 == Some(200)).then(|| up.elapsed()) };
    let what = "readiness after the restart";
    let ready_again = eventually(what, every, Duration::from_secs(30), is_ready).await;
    let after = || async {
        let answers = clients.answers();
        let accepted = answers
            .iter()
            .filter(|a| a.sent >= up && a.status == Some(202));
        (accepted.count() >= 40).then_some(())
    };
    let what = "creates accepted after the restart";
    eventually(what, every, Duration::from_secs(30), after).await;
    let answers = clients.stop().await;

    if std::env::var_os("TEST_LOG").is_some() {
        for a in &answers {
            let at = a.sent.checked_duration_since(down).map(|d| d.as_secs_f64());
            let at = at.unwrap_or_else(|| -down.duration_since(a.sent).as_secs_f64());
            let (status, code, error) = (a.status, &a.code, &a.error);
            eprintln!(
                "create at {at:+.3}s: {status:?} {code:?} in {:?} {error:?}",
                a.took
            );
        }
    }
    // Every create was answered within the client's timeout, 202 or 503 with Retry-After.
    let unanswered: Vec<_> = answers
        .iter()
        .filter(|a| a.status.is_none())
        .map(|a| (a.sent.saturating_duration_since(down), a.took, &a.error))
        .collect();
    assert!(
        unanswered.is_empty(),
        "{} creates got no answer within {CLIENT_TIMEOUT:?} (sent when after the stop, took, why): \
         {:?}",
        unanswered.len(),
        &unanswered[..unanswered.len().min(5)]
    );
    for a in &answers {
        match a.status {
            Some(202) => assert!(a.id.is_some(), "{a:?}"),
            Some(503) => assert!(a.retry_after.is_some(), "a 503 without Retry-After: {a:?}"),
            _ => panic!("a create answered neither 202 nor 503: {a:?}"),
        }
    }
    // Every create sent while PostgreSQL was down, and answered before it was back, was a 503.
    let outage: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.sent >= down && a.sent + a.took <= restart)
        .collect();
    // (Each client is answered at least once while it is down.)
    assert!(
        outage.len() >= CLIENTS,
        "{} creates during the outage",
        outage.len()
    );
    let accepted: Vec<_> = outage.iter().filter(|a| a.status != Some(503)).collect();
    assert!(accepted.is_empty(), "accepted while down: {accepted:?}");
    let mut codes: HashMap<&str, usize> = HashMap::new();
    for a in &outage {
        *codes
            .entry(a.code.as_deref().unwrap_or("none"))
            .or_default() += 1;
    }
    assert!(
        codes
            .keys()
            .all(|c| ["store_unavailable", "overloaded"].contains(c)),
        "{codes:?}"
    );

    // Nothing acknowledged is lost: before, during (none) or after the outage.
    let acked: Vec<String> = answers.iter().filter_map(|a| a.id.clone()).collect();
    let stored = nothing_lost(&receiver, &pg.url(), &acked).await;
    // Duplicates: an attempt the receiver answered just before PostgreSQL stopped, whose
    // outcome could not be recorded while it was down and whose lease ran out meanwhile, is
    // claimed (by this same process) and attempted again after the restart; its first outcome
    // is then refused as a lost lease. Such attempts hold their places in the process until
    // recorded, so at most IN_FLIGHT messages arrive twice, and none more often.
    let mut arrivals: HashMap<String, usize> = HashMap::new();
    for a in receiver.ledger() {
        *arrivals.entry(a.id).or_default() += 1;
    }
    let most = arrivals.values().copied().max().unwrap_or_default();
    assert!(most <= 2, "a message arrived {most} times");
    let duplicates = receiver.duplicates();
    assert!(
        usize::try_from(duplicates).unwrap() <= IN_FLIGHT,
        "{duplicates} duplicates"
    );
    let mut latencies: Vec<Duration> = outage.iter().map(|a| a.took).collect();
    latencies.sort();
    println!(
        "PostgreSQL restart: {} creates, {} acknowledged, {} stored, all delivered; readiness \
         503 in {took:?} after the stop; {} creates during the {OUTAGE:?} outage, all 503 \
         {codes:?} (answered in {:?} to {:?}, median {:?}); first 202 {recovered:?} and ready \
         {ready_again:?} after the restart; {duplicates} duplicates; 0 overlaps",
        answers.len(),
        acked.len(),
        stored.len(),
        outage.len(),
        latencies[0],
        latencies[latencies.len() - 1],
        latencies[latencies.len() / 2],
    );
}

/// `GET /health/ready`: its status (`None`: no answer within [`CLIENT_TIMEOUT`]), body, and how
/// long it took.
async fn ready(base: &str) -> (Option<u16>, Value, Duration) {
    let started = Instant::now();
    let client = reqwest::Client::builder()
        .timeout(CLIENT_TIMEOUT)
        .build()
        .unwrap();
    let resp = client.get(format!("{base}/health/ready")).send().await;
    let (status, body) = match resp {
        Ok(r) => (
            Some(r.status().as_u16()),
            r.json().await.unwrap_or_default(),
        ),
        Err(e) => (None, Value::String(chain(&e))),
    };
    (status, body, started.elapsed())
}
