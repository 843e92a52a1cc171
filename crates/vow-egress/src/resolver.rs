//! Name resolution for egress: the system resolver, then the [`AddressPolicy`].
//!
//! [`GuardedResolver`] is installed as reqwest's DNS resolver. It resolves a host name once with
//! the system resolver (`getaddrinfo`, via [`std::net::ToSocketAddrs`] on tokio's blocking pool,
//! so `/etc/hosts`, `nsswitch` and the platform's caching behave as for any other program), drops
//! every address the policy refuses and hands reqwest the rest. reqwest connects to exactly those
//! addresses, so there is no second lookup that a rebinding DNS server could answer differently.
//! When nothing is left the lookup fails with [`ResolveError::Refused`], carrying every
//! [`Refusal`]; [`crate::EgressError`] finds it in reqwest's error chain.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::policy::{AddressPolicy, Refusal};

/// Why a host name produced no address vow may connect to.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// Every address of the host is refused by the policy.
    #[error("every address of `{host}` is refused: {}", refusals[0])]
    Refused {
        /// The host name as written in the URL.
        host: String,
        /// One refusal per resolved address, in resolver order; never empty.
        refusals: Vec<Refusal>,
    },
    /// The resolver answered with no address at all.
    #[error("`{host}` has no addresses")]
    NoAddresses {
        /// The host name as written in the URL.
        host: String,
    },
    /// The system resolver failed (unknown name, no network, ...).
    #[error("could not resolve `{host}`")]
    Lookup {
        /// The host name as written in the URL.
        host: String,
        /// What the system resolver said.
        #[source]
        source: io::Error,
    },
}

impl ResolveError {
    /// The refusals when every address was refused, else an empty slice.
    pub fn refusals(&self) -> &[Refusal] {
        match self {
            ResolveError::Refused { refusals, .. } => refusals,
            _ => &[],
        }
    }
}

/// A `reqwest::dns::Resolve` that only returns addresses its [`AddressPolicy`] permits.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

impl GuardedResolver {
    /// A resolver that filters with `policy`.
    pub fn new(policy: Arc<AddressPolicy>) -> Self {
        Self { policy }
    }

    /// Resolves `host` with the system resolver and returns the permitted addresses (port 0),
    /// in resolver order, without duplicates.
    pub async fn lookup(&self, host: &str) -> Result<Vec<SocketAddr>, ResolveError> {
        let owned = host.to_owned();
        let resolved = tokio::task::spawn_blocking(move || {
            (owned.as_str(), 0)
                .to_socket_addrs()
                .map(Iterator::collect::<Vec<_>>)
        })
        .await
        .unwrap_or_else(|join| Err(io::Error::other(join)))
        .map_err(|source| ResolveError::Lookup {
            host: host.to_owned(),
            source,
        })?;
        self.filter(host, resolved)
    }

    fn filter(
        &self,
        host: &str,
        resolved: Vec<SocketAddr>,
    ) -> Result<Vec<SocketAddr>, ResolveError> {
        if resolved.is_empty() {
            return Err(ResolveError::NoAddresses {
                host: host.to_owned(),
            });
        }
        let mut permitted: Vec<SocketAddr> = Vec::with_capacity(resolved.len());
        let mut refusals = Vec::new();
        for addr in resolved {
            match self.policy.check(addr.ip()) {
                Ok(()) if !permitted.contains(&addr) => permitted.push(addr),
                Ok(()) => {}
                Err(refusal) => refusals.push(refusal),
            }
        }
        if !refusals.is_empty() {
            tracing::debug!(
                host,
                refused = refusals.len(),
                permitted = permitted.len(),
                first_refusal = %refusals[0],
                "egress: dropped refused addresses"
            );
        }
        if permitted.is_empty() {
            return Err(ResolveError::Refused {
                host: host.to_owned(),
                refusals,
            });
        }
        Ok(permitted)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        Box::pin(async move {
            let addrs = this.lookup(name.as_str()).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::AddressClass;

    fn resolver(allow: &str) -> GuardedResolver {
        GuardedResolver::new(Arc::new(AddressPolicy::parse_allow_list(allow).unwrap()))
    }

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn refused_addresses_are_dropped_and_the_rest_kept_in_order() {
        let kept = resolver("")
            .filter(
                "mixed.example",
                addrs(&[
                    "10.0.0.1:0",
                    "8.8.8.8:0",
                    "[::1]:0",
                    "1.1.1.1:0",
                    "8.8.8.8:0",
                ]),
            )
            .unwrap();
        assert_eq!(kept, addrs(&["8.8.8.8:0", "1.1.1.1:0"]));
    }

    #[test]
    fn a_name_with_only_refused_addresses_fails_with_every_refusal() {
        let err = resolver("")
            .filter("evil.example", addrs(&["127.0.0.1:0", "[fd00:ec2::254]:0"]))
            .unwrap_err();
        let classes: Vec<_> = err.refusals().iter().map(|r| r.class()).collect();
        assert_eq!(classes, [AddressClass::Loopback, AddressClass::UniqueLocal]);
        assert!(err.to_string().contains("127.0.0.1 is a loopback address"));
    }

    #[test]
    fn an_empty_answer_is_not_a_refusal() {
        let err = resolver("").filter("empty.example", vec![]).unwrap_err();
        assert!(matches!(err, ResolveError::NoAddresses { .. }));
    }

    #[test]
    fn the_allow_list_lets_resolved_addresses_through() {
        let kept = resolver("127.0.0.0/8")
            .filter("localhost", addrs(&["[::1]:0", "127.0.0.1:0"]))
            .unwrap();
        assert_eq!(kept, addrs(&["127.0.0.1:0"]));
    }

    #[tokio::test]
    async fn localhost_resolves_with_the_system_resolver_and_is_refused() {
        let err = resolver("").lookup("localhost").await.unwrap_err();
        assert!(!err.refusals().is_empty(), "{err}");
        assert!(err
            .refusals()
            .iter()
            .all(|r| r.class() == AddressClass::Loopback));
    }
}
