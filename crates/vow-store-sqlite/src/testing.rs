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
