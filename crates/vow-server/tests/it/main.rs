//! vow-server's behaviour tests: the HTTP API against a real server on port 0, run once on
//! SQLite and once on PostgreSQL (see [`on_both_stores!`]). Tests assert on stored rows through
//! the store, not only on status codes.

#[macro_use]
mod helpers;

#[macro_use]
mod child;

mod console;

mod app_on_the_fly;
mod applications;
mod attempt_filters;
mod attempted;
mod auth_and_errors;
mod cli_client;
mod cli_listen;
mod cli_listen_source;
mod cli_offline;
mod cli_replay;
mod cli_replay_source;
mod cli_tail;
mod cli_tail_source;
mod cluster;
mod crash;
mod dead_letter_alert;
mod delivery;
mod demo;
mod disk_full;
mod ed25519;
mod endpoints;
mod event_types;
mod faults;
mod idempotency;
mod idempotency_faults;
mod idempotency_in_flight;
mod idempotency_lifetimes;
mod idempotent_routes;
mod inbound;
mod json_child;
mod listen_api;
mod messages;
mod openapi;
mod operators;
mod overload;
mod portal_api;
mod probes;
mod receiver;
mod relay_expiry;
mod request_identity;
mod retention;
mod svix_parity;
mod tail_api;
mod throttle;
mod traces;
mod vacuum_warning;
