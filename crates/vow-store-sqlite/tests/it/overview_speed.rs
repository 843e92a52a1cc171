//! How long the Overview read takes with a million messages and five million attempts. Ignored:
//! not part of CI (the file it fills is about 2 GB and filling it takes minutes). Run it from a
//! release build:
//!
//! ```sh
//! VOW_OVERVIEW_BENCH_DB=/tmp/overview.db \
//!   cargo test --release -p vow-store-sqlite --test it overview_speed -- --ignored --nocapture
//! ```
//!
//! The file is filled once, by SQL, and kept for the next run (delete it to fill anew): 100
//! applications with 10 endpoints each, 1,000,000 messages over 30 days with one delivery
//! each (3 % dead-lettered, 15 % pending: a backlog past the count cap), 5,000,000 attempts
//! (80 % succeeded), the last two days of activity minutes, 10 sources with 500,000 inbound
//! events (0.5 % quarantined, 0.5 % uncertain) and full rejection logs; no `ANALYZE`, as vow
//! runs none, so the plans are those of a live database. It then prints the
//! read's latency percentiles, and for comparison a day of attempts counted from the attempts
//! table itself.

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use rusqlite::Connection;
use vow_core::AttemptId;
use vow_store::prelude::*;
use vow_store_sqlite::SqliteStore;

/// Crockford's base-32 alphabet, as ULIDs spell it.
const ALPHABET: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// An SQL expression for a ULID whose time is `ms` (milliseconds) and whose random part is
/// the number `n`, zero-padded: ids made so sort by `ms` as vow's do.
fn ulid(ms: &str, n: &str) -> String {
    let time: Vec<String> = (0..10)
        .map(|i| {
            format!(
                "substr('{ALPHABET}', ((({ms}) >> {}) & 31) + 1, 1)",
                45 - 5 * i
            )
        })
        .collect();
    format!("({} || printf('%016d', {n}))", time.join(" || "))
}

/// The SQL that fills a migrated, empty database, as of `now_ms`.
fn fill_sql(now_ms: i64) -> String {
    const DAY: i64 = 86_400_000;
    let base = now_ms - 31 * DAY;
    let app = |n: &str| format!("'app_' || {}", ulid(&base.to_string(), n));
    let endpoint = |n: &str| format!("'ep_' || {}", ulid(&(base + 1).to_string(), n));
    let source = |n: &str| format!("'src_' || {}", ulid(&(base + 2).to_string(), n));
    // Message i is made at t(i) ms, evenly over the last 30 days, for app i % 100 and its
    // endpoint i % 1000.
    let t = format!("({now_ms} - 30 * {DAY} + i * 2592)");
    let msg = format!("'msg_' || {}", ulid(&t, "i"));
    let app_of = app("i % 100");
    let endpoint_of = endpoint("i % 1000");
    let numbers = |n: i64| {
        format!("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {n} - 1)")
    };
    let (apps, endpoints, ids) = (app("i"), endpoint("i"), source("i"));
    let attempt_at = format!("({t} + j * 60000)");
    let attempt_id = format!("'atmpt_' || {}", ulid(&attempt_at, "i * 5 + j"));
    let delivery_id = format!("'dlv_' || {}", ulid(&t, "i"));
    let event_at = format!("({now_ms} - 30 * {DAY} + i * 5184)");
    let event_id = format!("'inevt_' || {}", ulid(&event_at, "i"));
    let source_of = source("i % 10");
    let reject_at = format!("({now_ms} - 2 * {DAY} + i * 17280)");
    let reject_id = format!("'inrej_' || {}", ulid(&reject_at, "i"));
    format!(
        "BEGIN;
        INSERT INTO applications (id, name, metadata, created_at, updated_at)
        {numbers} SELECT {apps}, 'app ' || i, '{{}}', {base}000, {base}000 FROM n;
        INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
                               created_at, updated_at)
        {numbers_ep} SELECT {endpoints}, {app_ep}, 'https://example.com/hook/' || i, '',
               i % 100 = 0, '{{}}', '{{}}', {base}000, {base}000 FROM n;
        INSERT INTO messages (id, app_id, event_type, payload, payload_expires_at, created_at)
        {numbers_msg} SELECT {msg}, {app_of}, 'order.paid',
               '{{\"order\":' || i || ',\"amount\":1999,\"currency\":\"EUR\",\"note\":\"a payload\"}}',
               ({t} + 30 * {DAY}) * 1000, {t} * 1000 FROM n;
        INSERT INTO deliveries (id, app_id, msg_id, endpoint_id, status, attempts,
                                next_attempt_at, created_at, last_status, updated_at)
        {numbers_msg} SELECT {delivery_id}, {app_of}, {msg}, {endpoint_of},
               CASE WHEN i % 100 < 3 THEN 'dead_lettered' WHEN i % 100 < 18 THEN 'pending'
                    ELSE 'delivered' END,
               5,
               CASE WHEN i % 100 = 17 THEN ({now_ms} + {DAY}) * 1000
                    ELSE ({t} + 3600000) * 1000 END,
               {t} * 1000, 200, {t} * 1000 FROM n;
        INSERT INTO attempts (id, app_id, msg_id, endpoint_id, delivery_id, started_at, url,
                              response_status, response, duration_ms, success, trigger)
        {numbers_msg}, m(j) AS (VALUES (0), (1), (2), (3), (4))
        SELECT {attempt_id}, {app_of}, {msg}, {endpoint_of}, {delivery_id}, {attempt_at} * 1000,
               'https://example.com/hook',
               CASE WHEN (i + j) % 5 = 0 THEN 500 ELSE 200 END,
               '{{\"received\":true,\"request\":\"' || i || '-' || j || '\"}}', 42,
               (i + j) % 5 <> 0, 'scheduled'
        FROM n CROSS JOIN m;
        INSERT INTO delivery_activity
        SELECT started_at / 60000000 * 60000000, sum(success), sum(1 - success), sum(success),
               sum(1 - success) / 10, 0
        FROM attempts WHERE started_at >= ({now_ms} - 2 * {DAY}) * 1000 GROUP BY 1;
        INSERT INTO sources (id, token, description, scheme, secrets, tolerance_secs,
                             destinations, created_at, updated_at)
        {numbers_src} SELECT {ids}, 'token-' || i, 'source ' || i, 'stripe', '[\"whsec_x\"]',
               300, '[]', {base}000, {base}000 FROM n;
        INSERT INTO inbound_events (id, source_id, account, event_id, conflicts_with, state,
                                    sha256, size, payload, headers, duplicates, received_at,
                                    updated_at, attempts)
        {numbers_events} SELECT {event_id}, {source_of}, '', 'evt_' || i,
               CASE WHEN i % 200 = 0 THEN 'inevt_01M6BDAZGY0000000000000000' END,
               CASE i % 200 WHEN 0 THEN 'quarantined' WHEN 1 THEN 'uncertain'
                    ELSE 'completed' END,
               printf('%064d', i), 2, X'7B7D', '[]', 0, {event_at} * 1000, {event_at} * 1000, 1
        FROM n;
        INSERT INTO inbound_rejections (id, source_id, reason, status, body_size, received_at,
                                        slot)
        {numbers_rejections} SELECT {reject_id}, {source_of},
               CASE i % 4 WHEN 0 THEN 'signature_mismatch' WHEN 1 THEN 'timestamp_too_old'
                    WHEN 2 THEN 'signature_missing' ELSE 'body_too_large' END,
               401, 10, {reject_at} * 1000, i / 10 FROM n;
        INSERT INTO inbound_rejection_ring (source_id, recorded)
        SELECT source_id, 5000 FROM inbound_rejections GROUP BY source_id;
        INSERT INTO inbound_rejection_counts (source_id, reason, count, first_at, last_at)
        SELECT source_id, reason, 5 * count(*), min(received_at), max(received_at)
        FROM inbound_rejections GROUP BY source_id, reason;
        COMMIT;",
        numbers = numbers(100),
        numbers_ep = numbers(1000),
        app_ep = app("i % 100"),
        numbers_msg = numbers(1_000_000),
        numbers_src = numbers(10),
        numbers_events = numbers(500_000),
        numbers_rejections = numbers(10_000),
    )
}

/// Fills the database at `path` unless it holds messages already.
fn fill(path: &Path) {
    let conn = Connection::open(path).unwrap();
    let filled: i64 = conn
        .query_row(
            "SELECT count(*) FROM (SELECT 1 FROM messages LIMIT 1)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    if filled == 1 {
        return;
    }
    let started = Instant::now();
    conn.execute_batch(&fill_sql(Utc::now().timestamp_millis()))
        .unwrap();
    println!("filled in {:.0?}", started.elapsed());
}

/// `sorted`'s value at percentile `p`.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let at = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[at]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fills a 2 GB database; run by hand (see the module docs)"]
async fn overview_speed_with_a_million_messages_and_five_million_attempts() {
    let path = std::env::var("VOW_OVERVIEW_BENCH_DB").expect("VOW_OVERVIEW_BENCH_DB names a file");
    let path = Path::new(&path);
    drop(SqliteStore::open(path).unwrap());
    fill(path);
    let store = SqliteStore::open(path).unwrap();

    let mut times = Vec::new();
    let mut last = None;
    for round in 0..1050 {
        let started = Instant::now();
        let o = store.overview(Utc::now()).await.unwrap();
        if round >= 50 {
            times.push(started.elapsed());
        }
        last = Some(o);
    }
    times.sort();
    let o = last.unwrap();
    println!(
        "overview (SQLite), {} reads: p50 {:.2?}, p95 {:.2?}, p99 {:.2?}, max {:.2?}",
        times.len(),
        percentile(&times, 0.50),
        percentile(&times, 0.95),
        percentile(&times, 0.99),
        percentile(&times, 1.0),
    );
    println!(
        "  day: {:?}\n  backlog: {:?}\n  disabled: {:?}\n  held: {:?}\n  day inbound: {:?}",
        o.day.deliveries,
        o.current.backlog,
        o.current.endpoints_disabled,
        o.current.held,
        o.day.inbound
    );
    assert!(o.current.backlog.due.more, "the backlog is past the cap");

    // For comparison: a day of attempts counted from the attempts table itself.
    let conn = Connection::open(path).unwrap();
    let since = AttemptId::first_at(Utc::now() - TimeDelta::days(1)).to_string();
    let mut scans = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let (n, ok): (i64, i64) = conn
            .query_row(
                "SELECT count(*), sum(success) FROM attempts WHERE id >= ?1",
                [&since],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        scans.push(started.elapsed());
        println!("  a day of attempts from the table: {n} ({ok} succeeded)");
    }
    scans.sort();
    println!("  ...in p50 {:.2?}", percentile(&scans, 0.5));
}
