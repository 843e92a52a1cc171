//! The backend-independent behaviour suite, run against a fresh SQLite database per case.

vow_store::conformance_suite!(async { vow_store_sqlite::testing::fresh_store() });
