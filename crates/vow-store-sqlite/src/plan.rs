//! Query plans, for the tests that check a statement seeks its index instead of scanning a
//! table (`EXPLAIN QUERY PLAN` on a migrated in-memory database, as a live one without
//! `ANALYZE` plans it).

use rusqlite::Connection;

/// A migrated, empty in-memory database.
pub(crate) fn migrated() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    crate::migrate::migrate(&mut conn).unwrap();
    conn
}

/// The `detail` column of `EXPLAIN QUERY PLAN sql`, one line per step.
pub(crate) fn plan(conn: &Connection, sql: &str) -> String {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let nulls = std::iter::repeat_n(rusqlite::types::Null, stmt.parameter_count());
    let rows = stmt
        .query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
        .unwrap();
    let lines: Vec<String> = rows.collect::<rusqlite::Result<_>>().unwrap();
    lines.join("\n")
}

/// Whether a plan reads `table` itself from end to end.
pub(crate) fn full_scan(plan: &str, table: &str) -> bool {
    plan.lines().any(|l| l.trim() == format!("SCAN {table}"))
}
