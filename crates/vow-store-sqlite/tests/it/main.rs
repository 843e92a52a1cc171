//! Integration tests of the SQLite store: the shared conformance suite, then what is specific to
//! SQLite (durability settings, reopening, group commit), and the Overview's speed with a
//! realistic amount of data and a bulk inbound replay of 100,000 dead letters (both ignored: run
//! by hand).

mod conformance;
mod overview_speed;
mod source_replay_speed;
mod sqlite;
