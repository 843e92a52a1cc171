//! The address policy as a table: every refused class, every embedded-IPv4 form, the allow-list.

use std::net::{IpAddr, Ipv4Addr};

use vow_egress::{AddressClass, AddressPolicy, PolicyError};

fn ip(text: &str) -> IpAddr {
    text.parse()
        .unwrap_or_else(|_| panic!("bad test address {text}"))
}

fn assert_refused(policy: &AddressPolicy, cases: &[(&str, AddressClass)]) {
    for (text, class) in cases {
        let refusal = policy
            .check(ip(text))
            .expect_err(&format!("{text} should be refused"));
        assert_eq!(refusal.class(), *class, "{text}");
        assert_eq!(refusal.address(), ip(text), "{text}");
    }
}

fn assert_passes(policy: &AddressPolicy, cases: &[&str]) {
    for text in cases {
        if let Err(refusal) = policy.check(ip(text)) {
            panic!("{text} should pass, got: {refusal}");
        }
    }
}

#[test]
fn every_special_purpose_ipv4_class_is_refused_by_default() {
    use AddressClass::*;
    assert_refused(
        &AddressPolicy::default(),
        &[
            ("0.0.0.0", Unspecified),
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("10.0.0.1", Private),
            ("10.255.255.255", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("169.254.169.254", LinkLocal),
            ("169.254.0.1", LinkLocal),
            ("100.64.0.1", SharedAddressSpace),
            ("100.100.100.200", SharedAddressSpace),
            ("100.127.255.255", SharedAddressSpace),
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("255.255.255.255", Broadcast),
            ("0.1.2.3", Reserved),
            ("192.0.0.1", Reserved),
            ("192.0.0.192", Reserved),
            ("192.88.99.1", Reserved),
            ("240.0.0.1", Reserved),
            ("254.255.255.255", Reserved),
            ("192.0.2.1", Documentation),
            ("198.51.100.7", Documentation),
            ("203.0.113.9", Documentation),
            ("198.18.0.1", Benchmarking),
            ("198.19.255.255", Benchmarking),
        ],
    );
}

#[test]
fn every_special_purpose_ipv6_class_is_refused_by_default() {
    use AddressClass::*;
    assert_refused(
        &AddressPolicy::default(),
        &[
            ("::", Unspecified),
            ("::1", Loopback),
            ("fe80::1", LinkLocal),
            ("febf:ffff::1", LinkLocal),
            ("fec0::1", SiteLocal),
            ("fc00::1", UniqueLocal),
            ("fd12:3456::1", UniqueLocal),
            ("fd00:ec2::254", UniqueLocal),
            ("ff02::1", Multicast),
            ("ff0e::1", Multicast),
            ("2001:db8::1", Documentation),
            ("3fff::1", Documentation),
            ("2001:2::1", Benchmarking),
            ("2001:10::1", Reserved),
            ("100::1", Reserved),
            ("4000::1", Reserved),
            ("64:ff9b:1:ab::1", Reserved),
            ("64:ff9b:0:0:1::1", Reserved),
        ],
    );
}

#[test]
fn public_addresses_pass() {
    assert_passes(
        &AddressPolicy::default(),
        &[
            "8.8.8.8",
            "1.1.1.1",
            "11.0.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "169.253.255.255",
            "172.15.255.255",
            "172.32.0.1",
            "192.0.1.1",
            "198.17.255.255",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "2a00:1450:4001::1",
            "3ffe::1",
        ],
    );
}

#[test]
fn ipv6_forms_that_embed_a_special_purpose_ipv4_address_are_refused_as_that_class() {
    use AddressClass::*;
    let cases: &[(&str, AddressClass, Ipv4Addr)] = &[
        ("::ffff:10.0.0.1", Private, Ipv4Addr::new(10, 0, 0, 1)),
        ("::ffff:127.0.0.1", Loopback, Ipv4Addr::new(127, 0, 0, 1)),
        (
            "::ffff:169.254.169.254",
            LinkLocal,
            Ipv4Addr::new(169, 254, 169, 254),
        ),
        (
            "::ffff:0:192.168.0.1",
            Private,
            Ipv4Addr::new(192, 168, 0, 1),
        ),
        ("::10.0.0.1", Private, Ipv4Addr::new(10, 0, 0, 1)),
        ("::127.0.0.2", Loopback, Ipv4Addr::new(127, 0, 0, 2)),
        ("::2", Reserved, Ipv4Addr::new(0, 0, 0, 2)),
        ("2002:0a00:0001::1", Private, Ipv4Addr::new(10, 0, 0, 1)),
        ("2002:7f00:1::", Loopback, Ipv4Addr::new(127, 0, 0, 1)),
        (
            "2002:a9fe:a9fe:1::1",
            LinkLocal,
            Ipv4Addr::new(169, 254, 169, 254),
        ),
        ("64:ff9b::a00:1", Private, Ipv4Addr::new(10, 0, 0, 1)),
        (
            "64:ff9b::169.254.169.254",
            LinkLocal,
            Ipv4Addr::new(169, 254, 169, 254),
        ),
        (
            "64:ff9b:1::6440:1",
            SharedAddressSpace,
            Ipv4Addr::new(100, 64, 0, 1),
        ),
        // Teredo: the client address is the inverted last 32 bits.
        (
            "2001:0:4136:e378:8000:63bf:f5ff:fffe",
            Private,
            Ipv4Addr::new(10, 0, 0, 1),
        ),
        (
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            Documentation,
            Ipv4Addr::new(192, 0, 2, 45),
        ),
    ];
    let policy = AddressPolicy::default();
    for (text, class, v4) in cases {
        let refusal = policy
            .check(ip(text))
            .expect_err(&format!("{text} should be refused"));
        assert_eq!(refusal.class(), *class, "{text}");
        assert_eq!(refusal.embedded_ipv4(), Some(*v4), "{text}");
        assert_eq!(refusal.address(), ip(text), "{text}");
    }
}

#[test]
fn ipv6_forms_that_embed_a_public_ipv4_address_pass() {
    assert_passes(
        &AddressPolicy::default(),
        &[
            "::ffff:8.8.8.8",
            "::ffff:0:8.8.8.8",
            "::8.8.8.8",
            "2002:0808:0808::1",
            "64:ff9b::808:808",
            "64:ff9b:1::808:808",
            "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
        ],
    );
}

#[test]
fn a_refusal_names_the_address_and_the_class() {
    let policy = AddressPolicy::default();
    let refusal = policy.check(ip("169.254.169.254")).unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "169.254.169.254 is a link-local address"
    );
    let refusal = policy.check(ip("::ffff:10.1.2.3")).unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "::ffff:10.1.2.3 embeds 10.1.2.3, a private address"
    );
}

#[test]
fn the_allow_list_opens_exactly_its_ranges() {
    let policy = AddressPolicy::parse_allow_list("127.0.0.0/8, ::1/128,10.1.0.0/16").unwrap();
    assert_passes(
        &policy,
        &[
            "127.0.0.1",
            "127.255.255.254",
            "::1",
            "10.1.0.1",
            "10.1.255.255",
            // Checked against the embedded IPv4 address too.
            "::ffff:127.0.0.1",
            "2002:7f00:1::1",
            // Public addresses are unaffected.
            "8.8.8.8",
        ],
    );
    use AddressClass::*;
    assert_refused(
        &policy,
        &[
            ("10.0.255.255", Private),
            ("10.2.0.0", Private),
            ("169.254.169.254", LinkLocal),
            ("::2", Reserved),
            ("0.0.0.0", Unspecified),
            ("fe80::1", LinkLocal),
        ],
    );
}

#[test]
fn a_bare_address_in_the_allow_list_opens_only_that_address() {
    let policy = AddressPolicy::parse_allow_list("192.168.1.10, fd00::5").unwrap();
    assert_passes(&policy, &["192.168.1.10", "fd00::5"]);
    assert_refused(
        &policy,
        &[
            ("192.168.1.11", AddressClass::Private),
            ("fd00::6", AddressClass::UniqueLocal),
        ],
    );
}

#[test]
fn an_empty_allow_list_is_the_default_policy() {
    assert_eq!(
        AddressPolicy::parse_allow_list(" , ").unwrap(),
        AddressPolicy::default()
    );
    assert!(AddressPolicy::default().allowed().is_empty());
}

#[test]
fn allow_list_parse_errors_name_the_bad_item_and_its_position() {
    for (list, bad, position) in [
        ("10.0.0.0/8, nonsense, ::1/128", "nonsense", 2),
        ("10.0.0.0/33", "10.0.0.0/33", 1),
        ("127.0.0.0/8,,fe80::/129", "fe80::/129", 3),
        ("localhost", "localhost", 1),
    ] {
        let err = AddressPolicy::parse_allow_list(list).unwrap_err();
        let PolicyError::InvalidCidr {
            item, position: at, ..
        } = &err
        else {
            panic!("unexpected error {err:?}");
        };
        assert_eq!((item.as_str(), *at), (bad, position), "{list}");
        assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
    }
}
