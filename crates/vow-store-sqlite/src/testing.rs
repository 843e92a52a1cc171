//! Test support (feature `testing`): a fresh, migrated store in its own temporary directory.

use crate::SqliteStore;

/// A new, empty, migrated database in a temporary directory. Keep the guard alive as long as the
/// store; dropping it deletes the directory (drop the store first).
///
/// # Panics
/// When the temporary directory or the database cannot be created: this is for tests.
pub fn fresh_store() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::Builder::new()
        .prefix("vow-sqlite-test-")
        .tempdir()
        .expect("create a temporary directory for a test database");
    let store = SqliteStore::open(&dir.path().join("vow.db")).expect("open a fresh test database");
    (store, dir)
}

/// Makes the database full for a fault test: at most `pages` pages from now on (SQLite answers
/// a write that needs more with `SQLITE_FULL`, as on a full disk); `None` lifts the limit, as
/// when space returns. The limit is the write connection's (`PRAGMA max_page_count`), and only
/// it writes. Returns the pages the database holds now.
///
/// # Panics
/// When the writer is gone: this is for tests.
pub async fn fill_up(store: &SqliteStore, pages: Option<u64>) -> u64 {
    store
        .write(move |c| {
            // SQLite's own ceiling, when lifted.
            let limit = pages.unwrap_or(u64::from(u32::MAX - 1));
            c.query_row(&format!("PRAGMA max_page_count = {limit}"), [], |_| Ok(()))?;
            Ok(c.query_row("PRAGMA page_count", [], |r| r.get::<_, u64>(0))?)
        })
        .await
        .expect("set the page limit")
}
