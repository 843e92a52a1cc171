//! Which destination addresses vow may connect to. Pure functions of an address and the
//! allow-list: no IO, no DNS.
//!
//! An address is refused when it belongs to a special-purpose range ([`AddressClass`]) unless
//! the operator's allow-list ([`AddressPolicy::parse_allow_list`]) contains it. IPv6 addresses
//! that carry an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated
//! `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`, 6to4 `2002:AABB:CCDD::/48`, NAT64
//! `64:ff9b::/96` and the `/96` form of `64:ff9b:1::/48`, Teredo `2001::/32`) are judged by the
//! IPv4 address they lead to. Outside those, an IPv6 address must be global unicast (`2000::/3`,
//! the only block IANA allocates from); everything else is [`AddressClass::Reserved`].

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::IpNet;

/// The special-purpose class that made an address unsuitable as a webhook destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AddressClass {
    /// `0.0.0.0`, `::`: Linux connects these to the local host.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918: `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`.
    Private,
    /// `169.254.0.0/16` (includes the cloud metadata service `169.254.169.254`), `fe80::/10`.
    LinkLocal,
    /// Carrier-grade NAT, `100.64.0.0/10` (includes Alibaba's metadata `100.100.100.200`).
    SharedAddressSpace,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `0.0.0.0/8`, `192.0.0.0/24` (includes Oracle's metadata `192.0.0.192`),
    /// `192.88.99.0/24`, `240.0.0.0/4`, IPv6 ORCHID `2001:10::/28` and every IPv6 address outside
    /// `2000::/3` that no other class names (for example `100::/64`, unusable NAT64 forms).
    Reserved,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18.0.0/15`, `2001:2::/48`.
    Benchmarking,
    /// IPv6 unique local `fc00::/7` (includes AWS's metadata `fd00:ec2::254`).
    UniqueLocal,
    /// IPv6 site-local `fec0::/10` (deprecated, still routed inside some networks).
    SiteLocal,
}

impl AddressClass {
    /// A short lowercase phrase for messages: `"loopback"`, `"private"`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::Unspecified => "unspecified",
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link-local",
            AddressClass::SharedAddressSpace => "shared (CGNAT)",
            AddressClass::Multicast => "multicast",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Reserved => "reserved",
            AddressClass::Documentation => "documentation",
            AddressClass::Benchmarking => "benchmarking",
            AddressClass::UniqueLocal => "unique-local",
            AddressClass::SiteLocal => "site-local",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a destination address was refused: the address, its class and, for IPv6 forms that embed
/// an IPv4 address, the IPv4 address that was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Refusal {
    address: IpAddr,
    class: AddressClass,
    embedded: Option<Ipv4Addr>,
}

impl Refusal {
    /// The address as resolved (or as written in the URL).
    pub fn address(&self) -> IpAddr {
        self.address
    }

    /// The class that made it unsuitable.
    pub fn class(&self) -> AddressClass {
        self.class
    }

    /// The IPv4 address carried by an IPv6 address (mapped, 6to4, NAT64, Teredo, ...), when that
    /// is what was refused.
    pub fn embedded_ipv4(&self) -> Option<Ipv4Addr> {
        self.embedded
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.embedded {
            Some(v4) => write!(
                f,
                "{} embeds {}, a {} address",
                self.address, v4, self.class
            ),
            None => write!(f, "{} is a {} address", self.address, self.class),
        }
    }
}

/// An allow-list item that is neither a CIDR nor an IP address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The item at `position` (1-based) of the comma-separated list does not parse.
    #[error(
        "allowed subnet #{position} `{item}` is not a CIDR like `10.0.0.0/8` or `::1/128`, \
         nor an IP address"
    )]
    InvalidCidr {
        /// The offending item, trimmed.
        item: String,
        /// Its 1-based position in the list.
        position: usize,
        /// What the CIDR parser said.
        #[source]
        source: ipnet::AddrParseError,
    },
}

/// Decides whether vow may connect to an address: special-purpose ranges are refused unless an
/// allowed CIDR contains the address.
///
/// `AddressPolicy::default()` allows nothing extra (production). The allow-list is matched
/// against the address as resolved **and**, for IPv6 forms that embed an IPv4 address, against
/// that IPv4 address: allowing `127.0.0.0/8` also allows `::ffff:127.0.0.1`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    allowed: Vec<IpNet>,
}

impl AddressPolicy {
    /// A policy whose allow-list is `allowed` (host bits are cleared: `10.1.2.3/8` is `10.0.0.0/8`).
    pub fn new(allowed: impl IntoIterator<Item = IpNet>) -> Self {
        let mut allowed: Vec<IpNet> = allowed.into_iter().map(|net| net.trunc()).collect();
        allowed.dedup();
        Self { allowed }
    }

    /// Parses a comma-separated allow-list such as the value of `VOW_ALLOWED_SUBNETS`:
    /// `"127.0.0.0/8, ::1/128"`. Items are CIDRs or bare addresses (a `/32` or `/128`);
    /// whitespace and empty items are ignored, so `""` is the default policy.
    pub fn parse_allow_list(list: &str) -> Result<Self, PolicyError> {
        let mut allowed = Vec::new();
        for (index, item) in list.split(',').enumerate() {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let net = match item.parse::<IpNet>() {
                Ok(net) => net,
                Err(source) => match item.parse::<IpAddr>() {
                    Ok(ip) => IpNet::from(ip),
                    Err(_) => {
                        return Err(PolicyError::InvalidCidr {
                            item: item.to_owned(),
                            position: index + 1,
                            source,
                        })
                    }
                },
            };
            allowed.push(net);
        }
        Ok(Self::new(allowed))
    }

    /// The allowed ranges, normalised.
    pub fn allowed(&self) -> &[IpNet] {
        &self.allowed
    }

    /// `Ok(())` when vow may connect to `ip`; otherwise why not.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refusal> {
        let (class, embedded) = match classify(ip) {
            None => return Ok(()),
            Some(found) => found,
        };
        let allowed = self.is_listed(ip) || embedded.is_some_and(|v4| self.is_listed(v4.into()));
        if allowed {
            return Ok(());
        }
        Err(Refusal {
            address: ip,
            class,
            embedded,
        })
    }

    fn is_listed(&self, ip: IpAddr) -> bool {
        self.allowed.iter().any(|net| net.contains(&ip))
    }
}

impl FromStr for AddressPolicy {
    type Err = PolicyError;

    fn from_str(list: &str) -> Result<Self, Self::Err> {
        Self::parse_allow_list(list)
    }
}

impl fmt::Display for AddressPolicy {
    /// The allow-list in the format [`AddressPolicy::parse_allow_list`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, net) in self.allowed.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{net}")?;
        }
        Ok(())
    }
}

/// The special-purpose class of `ip`, ignoring any allow-list, and the embedded IPv4 address
/// that was judged for IPv6 forms carrying one. `None` means globally routable unicast.
pub fn classify(ip: IpAddr) -> Option<(AddressClass, Option<Ipv4Addr>)> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4).map(|class| (class, None)),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_ipv4(v6) {
                return classify_v4(v4).map(|class| (class, Some(v4)));
            }
            classify_v6(v6).map(|class| (class, None))
        }
    }
}

/// The IPv4 address an IPv6 address leads to, for the forms that carry one: IPv4-mapped
/// `::ffff:0:0/96`, IPv4-translated `::ffff:0:0:0/96`, IPv4-compatible `::/96` (except `::` and
/// `::1`), NAT64 `64:ff9b::/96` and `64:ff9b:1::/96`, 6to4 `2002::/16` (bits 16..48) and Teredo
/// `2001::/32` (the client address: the last 32 bits inverted).
pub fn embedded_ipv4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let last32 = || Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    match s {
        // `::` and `::1` are IPv6's own unspecified and loopback addresses.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, _, _]
        | [0, 0, 0, 0, 0, 0xffff, _, _]
        | [0, 0, 0, 0, 0xffff, 0, _, _] => Some(last32()),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] | [0x64, 0xff9b, 1, 0, 0, 0, _, _] => Some(last32()),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))),
        [0x2001, 0, ..] => Some(Ipv4Addr::from(!u32::from(last32()))),
        _ => None,
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, c, _] = ip.octets();
    let class = match (a, b, c) {
        _ if ip.is_unspecified() => AddressClass::Unspecified,
        _ if ip.is_broadcast() => AddressClass::Broadcast,
        (0, _, _) => AddressClass::Reserved,
        (10, _, _) => AddressClass::Private,
        (100, 64..=127, _) => AddressClass::SharedAddressSpace,
        (127, _, _) => AddressClass::Loopback,
        (169, 254, _) => AddressClass::LinkLocal,
        (172, 16..=31, _) => AddressClass::Private,
        (192, 0, 0) => AddressClass::Reserved,
        (192, 0, 2) => AddressClass::Documentation,
        (192, 88, 99) => AddressClass::Reserved,
        (192, 168, _) => AddressClass::Private,
        (198, 18..=19, _) => AddressClass::Benchmarking,
        (198, 51, 100) => AddressClass::Documentation,
        (203, 0, 113) => AddressClass::Documentation,
        (224..=239, _, _) => AddressClass::Multicast,
        (240..=255, _, _) => AddressClass::Reserved,
        _ => return None,
    };
    Some(class)
}

/// IPv6 addresses that carry no IPv4 address.
fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    let s = ip.segments();
    let class = match s {
        _ if ip.is_unspecified() => AddressClass::Unspecified,
        _ if ip.is_loopback() => AddressClass::Loopback,
        [first, ..] if first & 0xff00 == 0xff00 => AddressClass::Multicast,
        [first, ..] if first & 0xffc0 == 0xfe80 => AddressClass::LinkLocal,
        [first, ..] if first & 0xffc0 == 0xfec0 => AddressClass::SiteLocal,
        [first, ..] if first & 0xfe00 == 0xfc00 => AddressClass::UniqueLocal,
        [0x2001, 0xdb8, ..] => AddressClass::Documentation,
        [0x3fff, second, ..] if second & 0xf000 == 0 => AddressClass::Documentation,
        [0x2001, 0x2, 0, ..] => AddressClass::Benchmarking,
        [0x2001, second, ..] if second & 0xfff0 == 0x10 => AddressClass::Reserved,
        // Only 2000::/3 is allocated as global unicast.
        [first, ..] if first & 0xe000 != 0x2000 => AddressClass::Reserved,
        _ => return None,
    };
    Some(class)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn teredo_client_address_is_the_inverted_last_32_bits() {
        // 2001:0:4136:e378:8000:63bf:3fff:fdd2 is RFC 4380's example for client 192.0.2.45.
        let teredo: Ipv6Addr = "2001:0:4136:e378:8000:63bf:3fff:fdd2".parse().unwrap();
        assert_eq!(embedded_ipv4(teredo), Some(Ipv4Addr::new(192, 0, 2, 45)));
    }

    #[test]
    fn documentation_prefix_3fff_covers_exactly_a_slash_20() {
        let inside: Ipv6Addr = "3fff:fff::1".parse().unwrap();
        assert_eq!(classify_v6(inside), Some(AddressClass::Documentation));
        for outside in ["3fff:1000::1", "3ffe:ffff::1"] {
            assert_eq!(classify_v6(outside.parse().unwrap()), None, "{outside}");
        }
    }

    #[test]
    fn display_round_trips_through_parse() {
        let policy = AddressPolicy::parse_allow_list(" 127.0.0.1/8 ,::1, ").unwrap();
        assert_eq!(policy.to_string(), "127.0.0.0/8,::1/128");
        assert_eq!(policy.to_string().parse::<AddressPolicy>().unwrap(), policy);
    }
}
