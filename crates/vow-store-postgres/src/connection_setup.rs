//! What every pooled connection sets before its first statement: `jit = off`.
//!
//! PostgreSQL JIT-compiles a query whose estimated cost passes `jit_above_cost` (100,000 by
//! default), and with inlining and optimisation past 500,000. vow's queue statements read a
//! handful of index entries, but their estimates grow with the rows they might read: with a
//! backlog of 270,000 pending deliveries the next-due query was estimated at 2.1 million and
//! spent 487 ms compiling for 1 ms of execution (4.9 ms in all with JIT off), on every call. The
//! larger the backlog, the slower each claim: the queue decayed as it filled. vow runs no query
//! that JIT would pay for, so it is off for every connection, whatever the server's default.
//!
//! Set with `SET` after connecting rather than in the `options` startup parameter, which
//! pgbouncer refuses unless its `ignore_startup_parameters` lists it (docs/several-nodes.md).
//! The group commits' connections also keep their plans to index reads (`kept_plans`), and
//! bound a lock wait outside a transaction (`batcher::LOCK_WAIT`).

use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;

use sqlx::{Executor, PgConnection};

use crate::{batcher, kept_plans};

/// The statement each new connection runs first.
const SETUP: &str = "SET jit = off";

/// What each new connection of the group commits' pool runs first: [`SETUP`],
/// [`kept_plans::INDEX_READS`] and [`batcher::LOCK_WAIT`], in one round trip.
static BATCH_SETUP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{SETUP}; {}; {}",
        kept_plans::INDEX_READS,
        batcher::LOCK_WAIT
    )
});

/// A pool's `after_connect` hook.
pub(crate) type Hook =
    for<'c> fn(
        &'c mut PgConnection,
        sqlx::pool::PoolConnectionMetadata,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'c>>;

/// The shared pool's hook: runs [`SETUP`] on a new connection.
pub(crate) const SET_UP: Hook = |conn, _meta| run(conn, SETUP);

/// The group commits' pool's hook: runs [`BATCH_SETUP`] on a new connection.
pub(crate) const SET_UP_FOR_BATCHES: Hook = |conn, _meta| run(conn, BATCH_SETUP.as_str());

/// Runs `setup` on `conn`.
fn run<'c>(
    conn: &'c mut PgConnection,
    setup: &'static str,
) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'c>> {
    Box::pin(async move {
        conn.execute(setup).await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use sqlx::Connection;

    use crate::PgStore;

    /// The test schema's URL with `jit = on` asked for at connection start, as a server's or a
    /// role's default might.
    async fn url_asking_for_jit() -> String {
        let schema = vow_pg_testing::fresh_schema().await;
        let mut url = url::Url::parse(&schema.url).unwrap();
        let options: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| match k.as_ref() {
                "options" => (k.into_owned(), format!("{v} -c jit=on")),
                _ => (k.into_owned(), v.into_owned()),
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(options);
        url.to_string()
    }

    #[tokio::test]
    async fn pooled_connections_have_jit_off_whatever_the_default_and_batches_keep_plans() {
        let url = url_asking_for_jit().await;
        let mut plain = sqlx::PgConnection::connect(&url).await.unwrap();
        let default: String = sqlx::query_scalar("SHOW jit")
            .fetch_one(&mut plain)
            .await
            .unwrap();
        assert_eq!(default, "on", "the URL asks for jit = on");

        // Four: three in the shared pool, one in the group commits'.
        let store = PgStore::connect(&url, 4).await.unwrap();
        // Three connections at once, so the pool opens more than one.
        let mut held = Vec::new();
        for _ in 0..3 {
            let mut conn = store.conn().await.unwrap();
            let jit: String = sqlx::query_scalar("SHOW jit")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            assert_eq!(jit, "off");
            let plans: String = sqlx::query_scalar("SHOW plan_cache_mode")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            assert_eq!(
                plans, "auto",
                "only the group commits' connections keep plans"
            );
            held.push(conn);
        }
        let settings = "SELECT setting FROM pg_settings WHERE name IN \
             ('jit', 'lock_timeout', 'plan_cache_mode', 'enable_seqscan', 'enable_bitmapscan') \
             ORDER BY name";
        let shared: Vec<String> = sqlx::query_scalar(settings)
            .fetch_all(&mut *held[0])
            .await
            .unwrap();
        assert_eq!(shared, ["on", "on", "off", "0", "auto"]);
        let mut batches = store.flushers.pool().acquire().await.unwrap();
        let batch: Vec<String> = sqlx::query_scalar(settings)
            .fetch_all(&mut *batches)
            .await
            .unwrap();
        assert_eq!(batch, ["off", "off", "off", "10", "force_generic_plan"]);
        let mut tx = crate::batcher::begin(&mut batches).await.unwrap();
        let waits: String = sqlx::query_scalar("SHOW lock_timeout")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        assert_eq!(waits, "0", "a batch's transaction waits as long as it must");
    }
}
