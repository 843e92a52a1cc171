//! `vow serve` on PostgreSQL warns at start when autovacuum will not clean its work queues, and
//! says why; it stays quiet about tables that will be vacuumed.

use crate::child::Vow;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_warns_when_a_work_queue_opts_out_of_autovacuum() {
    let (_store, url) = vow_store_postgres::testing::fresh_store().await;
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    sqlx::raw_sql("ALTER TABLE deliveries SET (autovacuum_enabled = false)")
        .execute(&mut conn)
        .await
        .unwrap();

    let vow = Vow::start(&url, &[]).await;
    let warned = vow.logged("will not autovacuum");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("autovacuum_enabled = false is set on table deliveries"),
        "{}",
        warned[0]
    );
    assert!(!warned[0].contains("table inbound_events"), "{}", warned[0]);
}
