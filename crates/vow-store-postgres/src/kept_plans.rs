//! Statements that run on plans made once per connection and kept: the delivery queue's claim
//! and outcome record, and the group commits' batches, which run hundreds of times a second.
//!
//! Planned for each call, the claim spent longer planning than running: at 3,000 msg/s to one
//! endpoint, 0.82 ms of planning against 0.59 ms of execution a call (`pg_stat_statements`),
//! PostgreSQL's largest single cost. A plan kept as PostgreSQL chooses one is no better: made
//! while a table was small it reads it by a sequential scan or by its whole primary key, and
//! keeps doing so as the table grows. So these transactions begin with [`BEGIN`]: every
//! statement in them runs its generic plan (made at its first run on a connection, made again
//! after an `ANALYZE` or a schema change), and the planner makes it with only index conditions
//! and nested loops to choose from, so every table is read by an index condition, row by row,
//! whatever its size when the plan was made. The settings are `SET LOCAL`: they end with the
//! transaction and no other statement on the pooled connection sees them.
//!
//! The group commits join a batch's rows with one another in memory, where a hash join is
//! right, so their connections (a pool that runs nothing else, `flusher_thread`) are set up
//! with [`INDEX_READS`] for the whole session: generic plans that read every table by an index
//! condition, the joins left to the planner. A session setting, because a batch without keys
//! runs without a transaction to hold a `SET LOCAL`. Made for each batch, the plan of its first
//! statement (the applications and their endpoints) cost 0.13 ms, four times its run.
//!
//! The tests hold each statement run this way to its shape ([`tests::off_index_reads`]) on an
//! empty store, the state in which a kept plan goes wrong.

use sqlx::{PgPool, Postgres, Transaction};
use vow_store::StoreResult;

use crate::error::db_error;

/// Generic plans that read every table by an index condition, set with `$set` (`SET` for a
/// session, `SET LOCAL` for a transaction), as a literal.
macro_rules! index_reads {
    ($set:literal) => {
        concat!(
            $set,
            " plan_cache_mode = force_generic_plan; ",
            $set,
            " enable_seqscan = off; ",
            $set,
            " enable_bitmapscan = off"
        )
    };
}

/// Makes every later statement of a session run a generic plan that reads every table by an
/// index condition; how they join is left to the planner.
pub(crate) const INDEX_READS: &str = index_reads!("SET");

/// Begins a transaction whose statements run generic plans made of index conditions and
/// nested loops only. One round trip, as a plain `BEGIN` is.
pub(crate) const BEGIN: &str = concat!(
    "BEGIN; ",
    index_reads!("SET LOCAL"),
    ";
    SET LOCAL enable_hashjoin = off;
    SET LOCAL enable_mergejoin = off;
    SET LOCAL enable_material = off"
);

/// A transaction begun with [`BEGIN`] on a connection from `pool`.
pub(crate) async fn begin(pool: &PgPool) -> StoreResult<Transaction<'static, Postgres>> {
    pool.begin_with(BEGIN).await.map_err(db_error)
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::Value;
    use sqlx::PgConnection;

    use super::*;

    /// The nodes of the plan PostgreSQL keeps for `sql` under [`BEGIN`] that read a table other
    /// than by an index condition, or join other than by a nested loop: `sql` is prepared
    /// with parameters of `types` (a list, as `PREPARE` takes it) and explained with `args`.
    /// Empty when the plan has the shape [`BEGIN`] promises. Second, the plan as JSON.
    pub(crate) async fn off_index_reads(
        conn: &mut PgConnection,
        sql: &str,
        types: &str,
        args: &str,
    ) -> (Vec<String>, String) {
        off_shape(conn, true, sql, types, args).await
    }

    /// As [`off_index_reads`], under [`INDEX_READS`]: the nodes that read a table other than by
    /// an index condition (any join is in that shape).
    async fn off_index_reads_any_join(
        conn: &mut PgConnection,
        sql: &str,
        types: &str,
        args: &str,
    ) -> (Vec<String>, String) {
        off_shape(conn, false, sql, types, args).await
    }

    /// Asserts that each of `statements` (name, SQL, parameter types, arguments) reads every
    /// table by an index condition under [`INDEX_READS`], with the store in `state`.
    pub(crate) async fn assert_index_reads_any_join(
        conn: &mut PgConnection,
        state: &str,
        statements: &[(&str, &str, &str, &str)],
    ) {
        for (name, sql, types, args) in statements {
            let (off, plan) = off_index_reads_any_join(conn, sql, types, args).await;
            assert_eq!(off, Vec::<String>::new(), "{name}, {state}: {plan}");
        }
    }

    /// The nodes of `sql`'s plan that break its shape: under [`BEGIN`] with
    /// `nested_loops_only`, else under [`INDEX_READS`] (set in a transaction, so its rollback
    /// ends them).
    async fn off_shape(
        conn: &mut PgConnection,
        nested_loops_only: bool,
        sql: &str,
        types: &str,
        args: &str,
    ) -> (Vec<String>, String) {
        let begin = if nested_loops_only {
            BEGIN.to_owned()
        } else {
            format!("BEGIN; {INDEX_READS}")
        };
        sqlx::raw_sql(&begin).execute(&mut *conn).await.unwrap();
        sqlx::raw_sql(&format!("PREPARE kept ({types}) AS {sql}"))
            .execute(&mut *conn)
            .await
            .unwrap();
        let plan: Value =
            sqlx::query_scalar(&format!("EXPLAIN (FORMAT JSON) EXECUTE kept ({args})"))
                .fetch_one(&mut *conn)
                .await
                .unwrap();
        sqlx::raw_sql("ROLLBACK; DEALLOCATE kept")
            .execute(&mut *conn)
            .await
            .unwrap();
        let mut found = Vec::new();
        off_index(&plan[0]["Plan"], "", nested_loops_only, &mut found);
        (found, serde_json::to_string_pretty(&plan).unwrap())
    }

    /// Adds to `found` each node of `node`'s tree (under a `parent` node of that type) that
    /// breaks the shape. An index read without a condition is in the shape only as the first
    /// rows of an index, as a `Limit` takes them with no filter: e.g. the first endpoint with
    /// pending rows. With `nested_loops_only`, so is every join other than a nested loop.
    fn off_index(node: &Value, parent: &str, nested_loops_only: bool, found: &mut Vec<String>) {
        let kind = node["Node Type"].as_str().unwrap_or_default();
        let index_read = matches!(kind, "Index Scan" | "Index Only Scan");
        let by_condition = index_read
            && (node.get("Index Cond").is_some()
                || (parent == "Limit" && node.get("Filter").is_none()));
        let reads_a_table = node.get("Relation Name").is_some() && kind != "ModifyTable";
        let joins_off = matches!(kind, "Hash Join" | "Merge Join" | "Materialize");
        if (reads_a_table && !by_condition) || (nested_loops_only && joins_off) {
            found.push(format!(
                "{kind} on {} {}",
                node["Relation Name"].as_str().unwrap_or("-"),
                node["Index Name"].as_str().unwrap_or_default()
            ));
        }
        for child in node["Plans"].as_array().into_iter().flatten() {
            off_index(child, kind, nested_loops_only, found);
        }
    }
}
