//! Integration tests for `vow-signature`: the published Standard Webhooks
//! vectors, property tests, and the seed styles seen from outside the crate.

mod props;
mod seeds;
mod vectors;
