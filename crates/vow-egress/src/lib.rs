//! `vow-egress`: the one outbound HTTP client every vow delivery (and, later, every inbound
//! forward) goes through, with a guard against server-side request forgery (SSRF).
//!
//! A webhook endpoint URL is chosen by a tenant, so without a guard vow would happily POST to
//! `http://169.254.169.254/` (cloud metadata), `http://localhost:5432/` or an office LAN. This crate
//! refuses destinations that are loopback, private, link-local, shared (CGNAT), multicast,
//! unspecified, broadcast, reserved, documentation or benchmarking addresses, including IPv6 forms
//! that embed such an IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, NAT64, Teredo).
//!
//! # How the guard cannot be bypassed
//!
//! * Host names are resolved **once**, by [`GuardedResolver`] (the system resolver,
//!   `getaddrinfo`), which drops refused addresses. reqwest then connects to exactly the addresses
//!   it returned, so a DNS answer that changes between "check" and "connect" (DNS rebinding) has
//!   nothing to change.
//! * reqwest does not call a resolver for IP-literal hosts (`http://127.0.0.1/`,
//!   `http://[::1]/`), so [`EgressClient::post`] checks the URL with [`EgressClient::check_url`]
//!   before anything is sent; `post` is the only way to send, so no caller can skip the check.
//! * Redirects are never followed (a `3xx` is returned as a response) and proxies from the
//!   environment (`HTTP_PROXY`, ...) are ignored, so the address that was checked is the address
//!   that is connected to.
//!
//! Operators open ranges for development and tests with an allow-list
//! (`VOW_ALLOWED_SUBNETS=127.0.0.0/8,::1/128`, parsed by [`AddressPolicy::parse_allow_list`]).
//! A refused destination surfaces as [`EgressError::Refused`] carrying a [`Refusal`] (class and
//! address), which the delivery log shows verbatim.
//!
//! Header values and bodies are never logged: they carry signatures and tenant data.
//!
//! # Layout
//!
//! * [`policy`]: [`AddressPolicy`], [`AddressClass`], [`Refusal`]. Pure: which addresses are
//!   refused, embedded-IPv4 unwrapping, the allow-list.
//! * [`resolver`]: [`GuardedResolver`], a `reqwest::dns::Resolve` that resolves with the system
//!   resolver and keeps only permitted addresses; [`ResolveError`].
//! * [`client`]: [`EgressConfig`], [`EgressClient`] and its single send method
//!   [`EgressClient::post`], [`EgressResponse`].
//! * [`error`]: [`EgressError`] and the mapping from reqwest's error chain to it.
//! * `body` (private): the request body that records whether it was fully handed to the
//!   connection, which is how [`EgressError::Timeout`] knows `sent`.

mod body;
pub mod client;
pub mod error;
pub mod policy;
pub mod resolver;

pub use client::{EgressClient, EgressConfig, EgressResponse};
pub use error::{BuildError, EgressError};
pub use policy::{AddressClass, AddressPolicy, PolicyError, Refusal};
pub use resolver::{GuardedResolver, ResolveError};
