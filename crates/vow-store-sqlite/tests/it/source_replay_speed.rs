//! How long a bulk replay of 100,000 dead-lettered inbound forwards takes on SQLite
//! (`vow_store::inbound::source_replay`, in writer jobs of 2,000 events), and how long a small
//! write that arrives meanwhile waits for the one writer: one batch, not the whole replay.
//! Ignored: it fills 100,000 events first.
//!
//! ```sh
//! cargo test -p vow-store-sqlite --test it source_replay_speed -- --ignored --nocapture
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use rusqlite::Connection;
use vow_core::{DestinationId, ReplayId, SourceId};
use vow_store::inbound::source_replay::SourceReplayFilter;
use vow_store::inbound::{Destination, NewSource, SourceFields};
use vow_store::prelude::*;

const EVENTS: i64 = 100_000;

fn source(destination: DestinationId) -> NewSource {
    NewSource {
        id: SourceId::new(),
        token: format!("token-{}", SourceId::new()),
        fields: SourceFields {
            description: "bench".into(),
            scheme: "github".into(),
            hmac: None,
            secrets: vec!["It's a Secret to Everybody".into()],
            tolerance_secs: 300,
            replay_window_secs: None,
            event_id: None,
            account: None,
            version_pointer: None,
            entity_pointer: None,
            destinations: vec![Destination {
                id: destination,
                url: "https://dest.example/hook".into(),
                secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
                idempotent: false,
            }],
        },
        now: Utc::now(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fills 100,000 events; run by hand"]
async fn a_replay_of_100_000_dead_letters_leaves_the_writer_free_between_batches() {
    let (store, dir) = vow_store_sqlite::testing::fresh_store();
    let store = Arc::new(store);
    let destination = DestinationId::new();
    let created = store.create_source(source(destination)).await.unwrap();
    let conn = Connection::open(dir.path().join("vow.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn.execute_batch(&format!(
        "BEGIN;
         WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {EVENTS} - 1)
         INSERT INTO inbound_events (id, source_id, account, event_id, state, sha256, size,
                                     payload, headers, received_at, updated_at, attempts)
         SELECT 'inevt_' || printf('%026d', i), '{src}', '', 'e' || i, 'dead_lettered', 'x', 2,
                X'7B7D', '[]', 1000000 + i, 1000000 + i, 8 FROM n;
         INSERT INTO inbound_forwards (event_id, destination, outcome, attempts, status, error,
                                       updated_at)
         SELECT id, '{destination}', 'dead_lettered', 8, 500, 'boom', updated_at
         FROM inbound_events;
         COMMIT;",
        src = created.id,
    ))
    .unwrap();
    drop(conn);

    let filter = SourceReplayFilter::default();
    let started = Instant::now();
    let counted = store
        .count_source_replay(created.id, &filter)
        .await
        .unwrap();
    println!(
        "dry run: {} forwards counted in {:?}",
        counted.requeued,
        started.elapsed()
    );

    let replay = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let started = Instant::now();
            let done = store
                .replay_source_keyed(created.id, ReplayId::new(), &filter, Utc::now(), None)
                .await
                .unwrap();
            (done.0, started.elapsed())
        })
    };
    // A small write queued just behind it waits for the writer.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let started = Instant::now();
    store
        .create_source(source(DestinationId::new()))
        .await
        .unwrap();
    let waited = started.elapsed();
    let (done, took) = replay.await.unwrap();
    println!(
        "replay: {} forwards requeued in {took:?}; a write arriving meanwhile waited {waited:?}",
        done.requeued
    );
    assert_eq!(done.requeued, EVENTS as u64);
    assert!(waited < took / 4, "the write waited for the whole replay");
}
