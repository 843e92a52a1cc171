//! The `vow` binary's client side: the commands a developer runs against a running vow or
//! offline, and the conventions they share.
//!
//! # Layout
//! - [`target`]: which vow a command talks to and with what token (`--url`, `--token`,
//!   `--profile`, their `VOW_*` variables, and the profiles `vow login` writes), and the HTTP
//!   client that turns vow's problem answers into errors that name the problem.
//! - [`follow`]: following a server-sent event stream of vow, reconnecting when it drops
//!   (`listen` and `tail`).
//! - [`listen`]: `vow listen`, deliveries relayed to a local URL.
//! - [`replay`]: `vow replay`, an endpoint's (or an inbound source's) dead letters replayed
//!   and followed to the end.
//! - [`progress`]: following requeued deliveries until they settle (a progress bar on a
//!   terminal, plain lines elsewhere), with rate and ETA; what `replay` shows.
//! - [`signal`]: Ctrl-C (or SIGTERM) for the commands that run until stopped.
//! - [`tail`]: `vow tail`, a live stream of delivery attempts or of a source's activity.
//! - [`output`]: how results are printed: aligned human text, coloured only on a terminal and
//!   never under `NO_COLOR`, or `--output json` for scripts.
//! - [`input`]: `--data TEXT|@FILE|-` and file flags, read byte for byte.
//! - [`when`]: `--since` and `--until`: RFC 3339, or a span ago.
//! - [`capture`]: a captured request (header lines, or a raw HTTP request) read back.
//! - One module per command: [`sign`] and [`verify`] (offline, with the signing and the
//!   verification vow itself uses), [`send`] and [`login`] (against a running vow),
//!   [`completions`].

pub mod capture;
pub mod completions;
pub mod follow;
pub mod input;
pub mod listen;
pub mod login;
pub mod output;
pub mod progress;
pub mod replay;
pub mod send;
pub mod sign;
pub mod signal;
pub mod tail;
pub mod target;
pub mod verify;
pub mod when;
