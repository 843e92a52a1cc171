//! Integration tests for `vow-signature`: the published Standard Webhooks
//! vectors, property tests, the seed styles seen from outside the crate, and
//! inbound provider verification (published vectors and per-provider cases).

mod props;
mod providers;
mod seeds;
mod vectors;
