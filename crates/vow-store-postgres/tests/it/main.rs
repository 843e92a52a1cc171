//! The integration tests of vow-store-postgres: one binary, against a real PostgreSQL
//! (`VOW_TEST_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/postgres`; each test gets
//! a fresh database).
//!
//! - `conformance`: the shared suite every backend passes.
//! - `idempotency`: a key in flight on one node does not block another.
//! - `inbound`: processing inbound events: concurrent claims, paths the suite leaves out.
//! - `postgres`: several processes on one database, migrations, a server that goes away.
//! - `queue`: the delivery queue with several processes on one database, creates racing a delete.
//! - `overview_speed`: the Overview read with a million messages (ignored: run by hand).
//! - `smoke`: quick checks of this backend's own choices (conflict sentences, byte order).

mod conformance;
mod group_commit;
mod idempotency;
mod inbound;
mod overview_speed;
mod postgres;
mod queue;
mod smoke;
mod support;
