//! How long the Overview read takes with a million messages and five million attempts. Ignored:
//! not part of CI (the database it fills takes about 3 GB and minutes). Run it from a release
//! build against a database of its own, which it fills once and keeps for the next run (drop
//! it to fill anew):
//!
//! ```sh
//! psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE vow_overview_bench'
//! VOW_OVERVIEW_BENCH_URL=postgres://postgres@127.0.0.1:5432/vow_overview_bench \
//!   cargo test --release -p vow-store-postgres --test it overview_speed -- --ignored --nocapture
//! ```
//!
//! The data is the SQLite twin's (`vow-store-sqlite/tests/it/overview_speed.rs`): 100
//! applications with 10 endpoints each, 1,000,000 messages over 30 days with one delivery
//! each (3 % dead-lettered, 15 % pending: a backlog past the count cap), 5,000,000 attempts
//! (80 % succeeded), the last two days of activity minutes (in 4 shards), 10 sources with
//! 500,000 inbound events (0.5 % quarantined, 0.5 % uncertain) and full rejection logs. The
//! read is timed twice: right after `VACUUM ANALYZE`, and after every pending delivery was
//! updated (as claims and records keep doing), so index-only scans meet pages that are not
//! all-visible. For comparison it also counts a day of attempts from the attempts table.

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use vow_core::AttemptId;
use vow_store::prelude::*;
use vow_store_postgres::PgStore;

/// Crockford's base-32 alphabet, as ULIDs spell it.
const ALPHABET: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// An SQL expression for a ULID whose time is `ms` (milliseconds) and whose random part is
/// the number `n`, zero-padded: ids made so sort by `ms` as vow's do.
fn ulid(ms: &str, n: &str) -> String {
    let time: Vec<String> = (0..10)
        .map(|i| {
            let shift = 45 - 5 * i;
            format!("substr('{ALPHABET}', ((({ms})::bigint >> {shift}) & 31)::int + 1, 1)")
        })
        .collect();
    format!("({} || lpad(({n})::text, 16, '0'))", time.join(" || "))
}

/// A `timestamptz` from milliseconds.
fn ts(ms: &str) -> String {
    format!("to_timestamp(({ms})::double precision / 1000)")
}

/// The SQL that fills a migrated, empty database, as of `now_ms`.
fn fill_sql(now_ms: i64) -> String {
    const DAY: i64 = 86_400_000;
    let base = now_ms - 31 * DAY;
    let base_ts = ts(&base.to_string());
    let app = |n: &str| format!("'app_' || {}", ulid(&base.to_string(), n));
    let endpoint = |n: &str| format!("'ep_' || {}", ulid(&(base + 1).to_string(), n));
    let source = |n: &str| format!("'src_' || {}", ulid(&(base + 2).to_string(), n));
    let month_ago = now_ms - 30 * DAY;
    let t = format!("({month_ago}::bigint + i * 2592)");
    let msg = format!("'msg_' || {}", ulid(&t, "i"));
    let app_of = app("i % 100");
    let endpoint_of = endpoint("i % 1000");
    let numbers = |n: i64| format!("generate_series(0::bigint, {n} - 1) AS i");
    let attempt_at = format!("({t} + j * 60000)");
    let attempt_id = format!("'atmpt_' || {}", ulid(&attempt_at, "i * 5 + j"));
    let delivery_id = format!("'dlv_' || {}", ulid(&t, "i"));
    let event_at = format!("({month_ago}::bigint + i * 5184)");
    let event_id = format!("'inevt_' || {}", ulid(&event_at, "i"));
    let source_of = source("i % 10");
    let reject_at = format!("({}::bigint + i * 17280)", now_ms - 2 * DAY);
    let reject_id = format!("'inrej_' || {}", ulid(&reject_at, "i"));
    format!(
        "BEGIN;
        INSERT INTO applications (id, name, metadata, created_at, updated_at)
        SELECT {apps}, 'app ' || i, '{{}}', {base_ts}, {base_ts} FROM {numbers_app};
        INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
                               created_at, updated_at)
        SELECT {endpoints}, {app_ep}, 'https://example.com/hook/' || i, '', i % 100 = 0,
               '{{}}', '{{}}', {base_ts}, {base_ts} FROM {numbers_ep};
        INSERT INTO messages (id, app_id, event_type, payload, payload_expires_at, created_at)
        SELECT {msg}, {app_of}, 'order.paid',
               '{{\"order\":' || i || ',\"amount\":1999,\"currency\":\"EUR\",\"note\":\"a payload\"}}',
               {msg_expires}, {msg_at} FROM {numbers_msg};
        INSERT INTO deliveries (id, app_id, msg_id, endpoint_id, status, attempts,
                                next_attempt_at, created_at, last_status, updated_at)
        SELECT {delivery_id}, {app_of}, {msg}, {endpoint_of},
               CASE WHEN i % 100 < 3 THEN 'dead_lettered' WHEN i % 100 < 18 THEN 'pending'
                    ELSE 'delivered' END,
               5,
               CASE WHEN i % 100 = 17 THEN {tomorrow} ELSE {msg_due} END,
               {msg_at}, 200, {msg_at} FROM {numbers_msg};
        INSERT INTO attempts (id, app_id, msg_id, endpoint_id, delivery_id, started_at, url,
                              response_status, response, duration_ms, success, trigger)
        SELECT {attempt_id}, {app_of}, {msg}, {endpoint_of}, {delivery_id}, {attempt_ts},
               'https://example.com/hook',
               CASE WHEN (i + j) % 5 = 0 THEN 500 ELSE 200 END,
               '{{\"received\":true,\"request\":\"' || i || '-' || j || '\"}}', 42,
               (i + j) % 5 <> 0, 'scheduled'
        FROM {numbers_msg} CROSS JOIN generate_series(0::bigint, 4) AS j;
        INSERT INTO delivery_activity
            (minute, shard, succeeded, failed, delivered, dead_lettered, disabled)
        SELECT date_trunc('minute', started_at), abs(hashtext(id)) % 4,
               count(*) FILTER (WHERE success), count(*) FILTER (WHERE NOT success),
               count(*) FILTER (WHERE success), count(*) FILTER (WHERE NOT success) / 10, 0
        FROM attempts WHERE started_at >= {two_days_ago} GROUP BY 1, 2;
        INSERT INTO sources (id, token, description, scheme, secrets, tolerance_secs,
                             destinations, created_at, updated_at)
        SELECT {sources}, 'token-' || i, 'source ' || i, 'stripe', '[\"whsec_x\"]', 300, '[]',
               {base_ts}, {base_ts} FROM {numbers_src};
        INSERT INTO inbound_events (id, source_id, account, event_id, conflicts_with, state,
                                    sha256, size, payload, headers, duplicates, received_at,
                                    updated_at, attempts)
        SELECT {event_id}, {source_of}, '', 'evt_' || i,
               CASE WHEN i % 200 = 0 THEN 'inevt_01M6BDAZGY0000000000000000' END,
               CASE i % 200 WHEN 0 THEN 'quarantined' WHEN 1 THEN 'uncertain'
                    ELSE 'completed' END,
               lpad(i::text, 64, '0'), 2, '\\x7b7d'::bytea, '[]', 0, {event_ts}, {event_ts}, 1
        FROM {numbers_events};
        INSERT INTO inbound_rejections (id, source_id, reason, status, body_size, received_at,
                                        slot)
        SELECT {reject_id}, {source_of},
               CASE i % 4 WHEN 0 THEN 'signature_mismatch' WHEN 1 THEN 'timestamp_too_old'
                    WHEN 2 THEN 'signature_missing' ELSE 'body_too_large' END,
               401, 10, {reject_ts}, i / 10 FROM {numbers_rejections};
        INSERT INTO inbound_rejection_ring (source_id, recorded)
        SELECT source_id, 5000 FROM inbound_rejections GROUP BY source_id;
        INSERT INTO inbound_rejection_counts (source_id, reason, count, first_at, last_at)
        SELECT source_id, reason, 5 * count(*), min(received_at), max(received_at)
        FROM inbound_rejections GROUP BY source_id, reason;
        COMMIT;",
        apps = app("i"),
        endpoints = endpoint("i"),
        sources = source("i"),
        app_ep = app("i % 100"),
        numbers_app = numbers(100),
        numbers_ep = numbers(1000),
        numbers_msg = numbers(1_000_000),
        numbers_src = numbers(10),
        numbers_events = numbers(500_000),
        numbers_rejections = numbers(10_000),
        msg_at = ts(&t),
        msg_expires = ts(&format!("{t} + {}", 30 * DAY)),
        msg_due = ts(&format!("{t} + 3600000")),
        tomorrow = ts(&(now_ms + DAY).to_string()),
        attempt_ts = ts(&attempt_at),
        two_days_ago = ts(&(now_ms - 2 * DAY).to_string()),
        event_ts = ts(&event_at),
        reject_ts = ts(&reject_at),
    )
}

/// Fills the database unless it holds messages already; vacuums and analyzes it either way.
async fn fill(url: &str) {
    let mut conn = crate::support::raw(url).await;
    let filled: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM messages)")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    if !filled {
        let started = Instant::now();
        sqlx::raw_sql(&fill_sql(Utc::now().timestamp_millis()))
            .execute(&mut conn)
            .await
            .unwrap();
        println!("filled in {:.0?}", started.elapsed());
    }
    sqlx::raw_sql("VACUUM ANALYZE")
        .execute(&mut conn)
        .await
        .unwrap();
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

/// Times 1,000 reads (after 50 to warm up) and prints their percentiles and the last one.
async fn time_reads(store: &PgStore, label: &str) {
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
        "overview (PostgreSQL, {label}), {} reads: p50 {:.2?}, p95 {:.2?}, p99 {:.2?}, max {:.2?}",
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fills a 3 GB database; run by hand (see the module docs)"]
async fn overview_speed_with_a_million_messages_and_five_million_attempts() {
    let url =
        std::env::var("VOW_OVERVIEW_BENCH_URL").expect("VOW_OVERVIEW_BENCH_URL names a database");
    let store = PgStore::connect(&url, 4).await.unwrap();
    store.migrate().await.unwrap();
    fill(&url).await;
    time_reads(&store, "vacuumed").await;

    let mut conn = crate::support::raw(&url).await;
    let started = Instant::now();
    sqlx::query("UPDATE deliveries SET updated_at = updated_at WHERE status = 'pending'")
        .execute(&mut conn)
        .await
        .unwrap();
    println!(
        "every pending delivery updated in {:.0?}",
        started.elapsed()
    );
    time_reads(&store, "pending deliveries just updated").await;

    // For comparison: a day of attempts counted from the attempts table itself.
    let since = AttemptId::first_at(Utc::now() - TimeDelta::days(1)).to_string();
    let mut scans = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let (n, ok): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE success) FROM attempts WHERE id >= $1",
        )
        .bind(&since)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        scans.push(started.elapsed());
        println!("  a day of attempts from the table: {n} ({ok} succeeded)");
    }
    scans.sort();
    println!("  ...in p50 {:.2?}", percentile(&scans, 0.5));
}
