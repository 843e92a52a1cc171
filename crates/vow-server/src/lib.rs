//! The vow server: configuration, start-up, the Svix-compatible HTTP API.
//!
//! `vow serve` loads a [`Config`], opens the store it names ([`startup::open_store`]), settles
//! the admin token ([`auth`]), and serves [`http::router`] until it is told to stop. Everything
//! is passed in explicitly (listener, store, shutdown token), so tests start the same server on
//! port 0 with a fresh store.
//!
//! # Layout
//! - [`config`]: layered configuration (embedded defaults, file, `VOW_*`), validated at start.
//! - [`secret`]: signing secrets (new, and a client's normalised).
//! - [`startup`]: opening the store, running the server with graceful shutdown.
//! - [`stores`]: [`Stores`](stores::Stores), the backend seen through each of its traits.
//! - [`state`]: [`AppState`](state::AppState), what every handler and worker can reach.
//! - [`auth`]: the admin token.
//! - [`cli`]: the `vow` binary's client commands and their shared flags and output.
//! - [`portal`]: app portal tokens (issued, looked up by hash) and their links.
//! - [`demo`]: `vow demo`, seed 000's six scenarios end to end.
//! - [`delivery`]: the delivery workers (claim, sign, attempt, record).
//! - [`relay`]: relay endpoints, delivered through a connected `vow listen`.
//! - [`forwarding`]: the inbound workers (claim received events, forward them signed, record
//!   each destination's outcome).
//! - [`error`]: [`ApiError`](error::ApiError), the one error type of the API, and its wire shape.
//! - [`http`]: router, middleware, extractors, the API handlers and the inbound ingest routes.
//! - [`metrics`]: the Prometheus metrics vow records and `GET /metrics`.
//! - [`admission`]: refusing new messages while the delivery backlog is over its limit.
//! - [`readiness`]: whether this process's workers run and whether it is stopping, for
//!   `/health/ready`.
//! - [`retention`]: the cleaner that deletes expired payloads, response bodies and raw inbound
//!   payloads.
//! - [`tail`]: `vow tail`'s live stream of attempts, polled from the store.
//! - [`telemetry`]: logging set-up.
//! - [`worker`]: the generic worker loop (claim, run, heartbeat, idle wait, shutdown drain) the
//!   delivery and inbound workers instantiate.

pub mod actions;
pub mod admission;
pub mod auth;
pub mod cli;
pub mod config;
pub mod delivery;
pub mod demo;
pub mod error;
pub mod forwarding;
pub mod http;
pub mod metrics;
pub mod portal;
pub mod readiness;
pub mod relay;
pub mod retention;
pub mod secret;
pub mod startup;
pub mod state;
pub mod stores;
pub mod tail;
pub mod telemetry;
pub mod worker;

pub use config::Config;
