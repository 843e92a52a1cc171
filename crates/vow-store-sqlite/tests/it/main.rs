//! Integration tests of the SQLite store: the shared conformance suite, then what is specific to
//! SQLite (durability settings, reopening, group commit).

mod conformance;
mod sqlite;
