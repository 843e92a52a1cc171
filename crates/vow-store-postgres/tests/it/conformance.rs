//! The shared behaviour suite of `vow_store::conformance`, against a fresh PostgreSQL database
//! per case (the guard is the database's URL; the database is left for CI to drop).

vow_store::conformance_suite!(async { vow_store_postgres::testing::fresh_store().await });
