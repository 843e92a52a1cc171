//! Integration tests for `vow-egress`: the address policy as a table, and the client against a
//! real HTTP server on loopback.

mod client;
mod policy;
mod support;
